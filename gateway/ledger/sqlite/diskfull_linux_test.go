package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

const fullEnv = "LEDGER_SQLITE_FULL_PATH"

// TestDiskFullHelper is the child process of TestDiskFull: with a file
// size limit (the runtime ignores SIGXFSZ, so writes past it fail with
// EFBIG as on a full disk), it appends until an append fails, printing
// "ACK <id>" after each, then "ERR <error>" for the failure and for one
// more try, and closes the ledger.
func TestDiskFullHelper(t *testing.T) {
	path := os.Getenv(fullEnv)
	if path == "" {
		t.Skip("helper process for TestDiskFull")
	}
	lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("SETUP", err)
		os.Exit(1)
	}
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		fmt.Println("SETUP", err)
		os.Exit(1)
	}
	data := []byte(`{"text":"` + strings.Repeat("x", 2000) + `"}`)
	for i := 0; i < 10000; i++ {
		r := msg(fmt.Sprintf("g%d", i%7), "")
		r.Data = data
		res, err := s.Append(context.Background(), []ledger.Record{r})
		if err != nil {
			fmt.Println("ERR", err)
			_, err = s.Append(context.Background(), []ledger.Record{msg("g0", "")})
			fmt.Println("ERR", err)
			break
		}
		fmt.Println("ACK", res[0].Event.ID)
	}
	fmt.Println("CLOSE", s.Close())
	os.Exit(0)
}

// TestDiskFull fills the disk under a ledger (a file size limit in a
// child process) and checks that the append that does not fit fails with
// an error rather than a panic, and that the ledger then opens with every
// acknowledged event, each group's seqs dense, and takes appends again.
func TestDiskFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullHelper$")
	cmd.Env = append(os.Environ(), fullEnv+"="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var acked, errs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "ACK":
			acked = append(acked, rest)
		case "ERR":
			errs = append(errs, rest)
		case "SETUP":
			t.Fatalf("helper: %s", rest)
		}
	}
	t.Logf("helper: %d acknowledged, then %q", len(acked), errs)
	if len(acked) == 0 || len(errs) != 2 || errs[0] == "<nil>" || errs[1] == "<nil>" {
		t.Fatalf("helper: %d appends acknowledged, errors %q; want some, then two failures", len(acked), errs)
	}
	s := openPath(t, path)
	defer s.Close()
	for _, id := range acked {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Errorf("acknowledged event %s: %v", id, err)
		}
	}
	n := 0
	for g := range 7 {
		n += len(checkDense(t, s, fmt.Sprintf("g%d", g)))
	}
	if n != len(acked) {
		t.Errorf("the ledger holds %d events, want the %d acknowledged", n, len(acked))
	}
	if _, err := s.Append(t.Context(), []ledger.Record{msg("g0", "")}); err != nil {
		t.Errorf("Append after the disk has room again: %v", err)
	}
}
