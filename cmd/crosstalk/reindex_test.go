package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// TestLedgerReindex runs `crosstalk ledger reindex` on the data directory
// of a relay that recorded envelopes: --check finds the projections the
// relay kept equal to a rebuild, then lists a row planted in them and
// fails, and reindex rebuilds them so that --check passes again.
func TestLedgerReindex(t *testing.T) {
	dir := t.TempDir()
	r := startTestRelay(t, dir, nil)
	for i, to := range []string{"BOB", "CAROL", "BOB"} {
		if _, ok := postEnvelope(r.url, testEnvelope(t, "ALICE", to, envelope.IntentRequest, "item "+string(rune('a'+i)))); !ok {
			t.Fatalf("envelope %d not recorded", i)
		}
	}
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}
	reindex := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"ledger", "reindex", "--data", dir}, args...), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, stderr := reindex("--check"); code != exitOK || !strings.Contains(stderr, "match") {
		t.Fatalf("reindex --check = exit %d: %s", code, stderr)
	}

	db, err := sql.Open("sqlite", filepath.Join(dir, "ledger.db.projection"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO marks(grp, event, kind, actor) VALUES('clitest', 'planted', 1, 'bob')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, stdout, stderr := reindex("--check")
	if code != exitFailure || !strings.Contains(stdout, "planted") {
		t.Fatalf("reindex --check with a planted row = exit %d, %q, %s; want a failure naming the row", code, stdout, stderr)
	}
	if code, _, stderr := reindex(); code != exitOK || !strings.Contains(stderr, "rebuilt") {
		t.Fatalf("reindex = exit %d: %s", code, stderr)
	}
	if code, _, stderr := reindex("--check"); code != exitOK {
		t.Fatalf("reindex --check after reindex = exit %d: %s", code, stderr)
	}
	if code, _, _ := reindex("--check", "extra"); code != exitUsage {
		t.Errorf("reindex with an argument = exit %d, want %d", code, exitUsage)
	}
}

// TestLedgerReindexDamaged: `crosstalk ledger reindex` rebuilds a
// projections file whose damage SQLite meets only when emptying it
// (garbage over pages inside a file that opens): before, it failed with
// "database disk image is malformed" and the file had to be found and
// deleted by hand.
func TestLedgerReindexDamaged(t *testing.T) {
	dir := t.TempDir()
	c, err := server.OpenCore(t.Context(), &server.Options{DataDir: dir, DNSServer: server.DNSServerNone})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		b, err := envelope.Marshal(envelope.New("ALICE", "BOB", envelope.IntentRequest, fmt.Sprintf("question %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Relay.SyncProjection(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := filepath.Join(dir, "ledger.db.projection")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 2; i < len(b); i++ { // the second half's pages
		b[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ledger", "reindex", "--data", dir}, strings.NewReader(""), &stdout, &stderr); code != exitOK || !strings.Contains(stderr.String(), "rebuilt") {
		t.Fatalf("reindex of a damaged projections file = exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"ledger", "reindex", "--check", "--data", dir}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("reindex --check after reindex = exit %d: %s", code, stderr.String())
	}
}
