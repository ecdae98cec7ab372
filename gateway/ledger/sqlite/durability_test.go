package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

func openPath(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", path, err)
	}
	return s
}

// msg is a chat message with data as large as a short envelope's event,
// which the store keeps packed (schema 3): the durability tests cover
// packed rows.
func msg(group, key string) ledger.Record {
	return ledger.Record{Kind: "chat.message", GroupID: group, By: "user", Data: msgData(group, key), DedupeKey: key}
}

// msgData is msg's data.
func msgData(group, key string) []byte {
	return fmt.Appendf(nil, `{"text":"a message to %s, key %s: please review the change and answer with a short summary","format":"plain","priority":"normal","to":["@all"],"client_id":"msg:%s"}`, group, key, key)
}

// checkData fails unless every event holds the data msg gave it, and
// every row of the file at path holds its data packed.
func checkData(t *testing.T, path string, evs []ledger.Event) {
	t.Helper()
	for _, ev := range evs {
		if want := msgData(ev.GroupID, ev.DedupeKey); !bytes.Equal(ev.Data, want) {
			t.Fatalf("event %s (%s/%d) data = %q, want %q", ev.ID, ev.GroupID, ev.Seq, ev.Data, want)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, packed int
	if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE typeof(data) = 'blob') FROM events`).Scan(&rows, &packed); err != nil {
		t.Fatal(err)
	}
	if rows != packed || rows == 0 {
		t.Errorf("%d of the file's %d rows hold packed data, want every one", packed, rows)
	}
}

// checkDense fails unless group holds seqs 1..n without gaps.
func checkDense(t *testing.T, s ledger.Store, group string) []ledger.Event {
	t.Helper()
	evs, err := s.Range(t.Context(), group, 0, nil, 0)
	if err != nil {
		t.Fatalf("Range(%s) error = %v", group, err)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("Range(%s)[%d].Seq = %d, want %d", group, i, ev.Seq, i+1)
		}
	}
	return evs
}

// TestAbandoned leaves a Store open without Close, as a crashed process
// would, and reads its file through a second Store.
func TestAbandoned(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	a := openPath(t, path)
	t.Cleanup(func() { a.Close() })
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				res, err := a.Append(ctx, []ledger.Record{msg("g", fmt.Sprintf("w%d-%d", w, i))})
				if err != nil {
					t.Errorf("Append() error = %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, res[0].Event.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	b := openPath(t, path) // a is still open and never closed before this
	defer b.Close()
	evs := checkDense(t, b, "g")
	if len(evs) != len(acked) {
		t.Errorf("second Store sees %d events, want %d", len(evs), len(acked))
	}
	checkData(t, path, evs)
	for _, id := range acked {
		if _, err := b.Get(ctx, id); err != nil {
			t.Errorf("second Store Get(%s) error = %v", id, err)
		}
	}
	// Both Stores may write: seq stays dense, dedupe keys stay unique.
	if res, err := b.Append(ctx, []ledger.Record{msg("g", "w0-0"), msg("g", "")}); err != nil || !res[0].Duplicate || res[1].Event.Seq != 81 {
		t.Errorf("second Store Append(w0-0, new) = %+v, %v, want duplicate and seq 81", res, err)
	}
	if res, err := a.Append(ctx, []ledger.Record{msg("g", "")}); err != nil || res[0].Event.Seq != 82 {
		t.Errorf("first Store Append(new) = %+v, %v, want seq 82", res, err)
	}
}

const crashEnv = "LEDGER_SQLITE_CRASH_PATH"

// TestCrashHelper is the child process of TestCrash: it appends from
// several goroutines, printing "ACK <id>" after each Append returns,
// until it is killed.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestCrash")
	}
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	for w := 0; ; w++ {
		if w < 16 {
			go func() {
				for i := 0; ; i++ {
					recs := []ledger.Record{msg("g", fmt.Sprintf("w%d-%d", w, i))}
					if i%3 == 0 {
						recs = append(recs, msg("h", ""))
					}
					res, err := s.Append(context.Background(), recs)
					mu.Lock()
					if err != nil {
						fmt.Println("ERR", err)
						os.Exit(1)
					}
					for _, r := range res {
						fmt.Println("ACK", r.Event.ID)
					}
					mu.Unlock()
				}
			}()
			continue
		}
		select {} // killed by the parent
	}
}

// TestCrash kills a process that is appending with SIGKILL and checks
// that every event it had acknowledged is in the file.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stuck := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // never hang the suite
	defer stuck.Stop()
	var acked []string
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(30 * time.Second)
	for len(acked) < 500 && sc.Scan() && time.Now().Before(deadline) {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ACK "); ok {
			acked = append(acked, id)
		} else if strings.HasPrefix(line, "ERR") {
			t.Fatalf("child: %s", line)
		}
	}
	cmd.Process.Kill() // SIGKILL: no Close, no deferred code
	// Acknowledgements printed before the kill count too.
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked = append(acked, id)
		}
	}
	cmd.Wait()
	if len(acked) < 500 {
		t.Fatalf("child acknowledged only %d appends", len(acked))
	}

	s := openPath(t, path)
	defer s.Close()
	g, h := checkDense(t, s, "g"), checkDense(t, s, "h")
	checkData(t, path, slices.Concat(g, h))
	stored := make(map[string]bool)
	for _, ev := range slices.Concat(g, h) {
		stored[ev.ID] = true
	}
	missing := 0
	for _, id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged events are missing after the crash", missing, len(acked))
	}
	t.Logf("child acknowledged %d events; %d stored (%d committed but unanswered)", len(acked), len(stored), len(stored)-len(acked))
}

// TestCloseWhileAppending closes a Store under load: every Append either
// succeeds and is durable, or fails with ErrClosed.
func TestCloseWhileAppending(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openPath(t, path)
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	started := make(chan struct{}, 32)
	for range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				res, err := s.Append(ctx, []ledger.Record{msg("g", "")})
				if err != nil {
					if !errors.Is(err, ledger.ErrClosed) {
						t.Errorf("Append() during Close error = %v, want ErrClosed", err)
					}
					return
				}
				mu.Lock()
				acked = append(acked, res[0].Event.ID)
				mu.Unlock()
				if i == 2 {
					started <- struct{}{}
				}
			}
		})
	}
	for range 32 {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	wg.Wait()

	s = openPath(t, path)
	defer s.Close()
	evs := checkDense(t, s, "g")
	if len(evs) != len(acked) {
		t.Errorf("after Close and reopen: %d events, want the %d acknowledged", len(evs), len(acked))
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		want string // in the error
	}{
		{"empty", "", "want a file name"},
		{"memory", ":memory:", "want a file name"},
		{"uri", "file:x.db", "want a file name"},
		{"missing dir", filepath.Join(dir, "no", "such", "ledger.db"), "no such file or directory"},
		// SQLite's own "unable to open database file" said not why.
		{"directory", dir, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), tt.path, nil)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) error = nil, want an error", tt.path)
			}
			if !strings.HasPrefix(err.Error(), "sqlite: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open(%q) error = %q, want prefix \"sqlite: \" and %q", tt.path, err, tt.want)
			}
		})
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openPath(t, path)
	s.Close()
	// Bump user_version behind the Store's back.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(t.Context(), path, nil); err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "restore the backup") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(newer schema) error = %v, want a schema version error", err)
	}
}

// TestOpenForeignDatabase checks that Open refuses a SQLite database
// that is not a ledger (no schema version, tables of its own), such as
// the projections file restored in place of ledger.db by mistake, and
// leaves it as it was, instead of writing the ledger's schema into it and
// running on an empty ledger. An empty file is still a new ledger.
func TestOpenForeignDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE meta(k TEXT PRIMARY KEY, v ANY)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(t.Context(), path, nil); err == nil || !strings.Contains(err.Error(), "not a crosstalk ledger") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(foreign database) error = %v, want \"not a crosstalk ledger\"", err)
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'events'").Scan(&n); err != nil || n != 0 {
		t.Errorf("after Open: events tables = %d (%v), want the foreign file untouched", n, err)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	openPath(t, empty).Close()
}

// TestOpenTruncated checks that Open refuses a ledger cut short (a copy
// interrupted half way, restored in place of ledger.db) or with garbage
// over its header, as docs/operations.md says, rather than run on what is
// left of it, with an error that says to restore a backup (ErrDamaged).
func TestOpenTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	s := openPath(t, path)
	for i := range 2000 {
		if _, err := s.Append(t.Context(), []ledger.Record{msg(fmt.Sprintf("g%d", i%50), "")}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(whole) - 4096, len(whole) / 2 / 4096 * 4096, len(whole)/2 + 100, 8192} {
		cut := filepath.Join(dir, fmt.Sprintf("cut-%d.db", n))
		if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		if s, err := sqlite.Open(t.Context(), cut, nil); err == nil {
			s.Close()
			t.Errorf("Open(ledger cut to %d of %d bytes) error = nil, want an error", n, len(whole))
		} else if !errors.Is(err, sqlite.ErrDamaged) || !strings.Contains(err.Error(), "restore it from a backup") {
			t.Errorf("Open(ledger cut to %d of %d bytes) error = %v, want ErrDamaged", n, len(whole), err)
		}
	}
	garbled := append([]byte(nil), whole...)
	for i := range 100 {
		garbled[i] = byte(i*7 + 1)
	}
	bad := filepath.Join(dir, "garbled.db")
	if err := os.WriteFile(bad, garbled, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(t.Context(), bad, nil); err == nil {
		s.Close()
		t.Errorf("Open(ledger with garbage over its header) error = nil, want an error")
	} else if !errors.Is(err, sqlite.ErrDamaged) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Open(ledger with garbage over its header) error = %v, want ErrDamaged naming the file", err)
	}
}

// TestFollowOtherStore checks that Follow sees appends made through
// another Store on the same file, by polling.
func TestFollowOtherStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	a, err := sqlite.Open(ctx, path, &sqlite.Options{FollowPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer a.Close()
	b := openPath(t, path)
	defer b.Close()
	done := make(chan []int64, 1)
	go func() {
		var got []int64
		for ev, err := range a.Follow(ctx, "g", 0) {
			if err != nil {
				break
			}
			if got = append(got, ev.Seq); len(got) == 3 {
				break
			}
		}
		done <- got
	}()
	for range 3 {
		if _, err := b.Append(ctx, []ledger.Record{msg("g", "")}); err != nil {
			t.Fatalf("Append() error = %v", err)
		}
	}
	if got := <-done; !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("Follow(g, 0) on the other Store = %v, want [1 2 3]", got)
	}
}

// TestTwoStoresShareSeqs checks that two Stores on the same file (two
// processes, say) keep every group's seq dense when they take turns,
// appending and importing: each writer remembers the groups' last seqs
// between its transactions only while no other connection has written.
func TestTwoStoresShareSeqs(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	a := openPath(t, path)
	defer a.Close()
	b := openPath(t, path)
	defer b.Close()
	want := map[string]int64{}
	for i, step := range []struct {
		s     *sqlite.Store
		group string
		imp   bool
	}{
		{a, "g", false}, {a, "g", false}, {b, "g", false}, {a, "g", false},
		{b, "h", false}, {a, "h", false}, {b, "g", true}, {a, "g", false},
		{a, "h", true}, {b, "h", false}, {b, "g", false}, {a, "g", false},
	} {
		want[step.group]++
		var seq int64
		if step.imp {
			ev := ledger.Event{V: ledger.Version, ID: envelope.NewID(), TS: "2026-01-13T10:00:00.000Z", Seq: want[step.group],
				Kind: "chat.message", GroupID: step.group, By: "user", Data: json.RawMessage(`{}`)}
			if n, err := step.s.ImportEvents(ctx, []ledger.Event{ev}); n != 1 || err != nil {
				t.Fatalf("step %d: ImportEvents(%s seq %d) = %d, %v", i, step.group, ev.Seq, n, err)
			}
			seq = ev.Seq
		} else {
			res, err := step.s.Append(ctx, []ledger.Record{msg(step.group, "")})
			if err != nil {
				t.Fatalf("step %d: Append(%s) error = %v", i, step.group, err)
			}
			seq = res[0].Event.Seq
		}
		if seq != want[step.group] {
			t.Errorf("step %d: %s got seq %d, want %d", i, step.group, seq, want[step.group])
		}
	}
	for _, s := range []*sqlite.Store{a, b} {
		gs, err := s.Groups(ctx)
		if err != nil || len(gs) != 2 || gs[0].LastSeq != want["g"] || gs[1].LastSeq != want["h"] {
			t.Errorf("Groups() = %+v, %v, want g at %d, h at %d", gs, err, want["g"], want["h"])
		}
	}
}

// TestOpenOrphanedWAL: a ledger moved or deleted without its -wal (a
// restore half done) is refused while its WAL is there, and neither the
// WAL nor a new file is touched — before, Open created an empty file,
// SQLite replayed the orphaned WAL into it, and the relay started on a
// ledger of no events, consuming the WAL. An empty WAL is no ledger's.
func TestOpenOrphanedWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	s := openPath(t, path)
	for i := range 50 {
		if _, err := s.Append(t.Context(), []ledger.Record{msg("g", fmt.Sprintf("k%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	wal, err := os.ReadFile(path + "-wal")
	if err != nil || len(wal) == 0 {
		t.Fatalf("the open ledger's WAL: %d bytes, %v", len(wal), err)
	}
	s.Close()
	orphan := filepath.Join(dir, "moved", "ledger.db")
	if err := os.Mkdir(filepath.Dir(orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(t.Context(), orphan, nil); err == nil {
		s.Close()
		t.Fatal("Open(missing file beside its WAL) error = nil, want a refusal")
	} else if !strings.Contains(err.Error(), "write-ahead log") || !strings.Contains(err.Error(), orphan+"-wal") {
		t.Errorf("Open(missing file beside its WAL) error = %v, want it to name the WAL", err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused Open created %s (%v)", orphan, err)
	}
	if b, _ := os.ReadFile(orphan + "-wal"); len(b) != len(wal) {
		t.Errorf("the refused Open left the WAL %d bytes, want %d untouched", len(b), len(wal))
	}

	if err := os.WriteFile(orphan+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	openPath(t, orphan).Close()
}
