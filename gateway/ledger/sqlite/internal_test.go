package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

func TestPragmas(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	tests := []struct {
		name   string
		reader bool
		q      string
		want   string
	}{
		{"writer journal_mode", false, "PRAGMA journal_mode", "wal"},
		{"writer synchronous", false, "PRAGMA synchronous", "1"}, // NORMAL: the syncer fsyncs
		{"writer busy_timeout", false, "PRAGMA busy_timeout", "5000"},
		{"writer temp_store", false, "PRAGMA temp_store", "2"}, // MEMORY: savepoint journals in memory
		{"writer user_version", false, "PRAGMA user_version", "3"},
		{"reader query_only", true, "PRAGMA query_only", "1"},
		{"reader journal_mode", true, "PRAGMA journal_mode", "wal"},
		{"reader busy_timeout", true, "PRAGMA busy_timeout", "5000"},
	}
	for _, tt := range tests {
		var db interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		} = s.wconn
		if tt.reader {
			db = s.rdb
		}
		var got string
		if err := db.QueryRowContext(ctx, tt.q).Scan(&got); err != nil || got != tt.want {
			t.Errorf("%s: %s = %q, %v, want %q", tt.name, tt.q, got, err, tt.want)
		}
	}
	if _, err := s.rdb.ExecContext(ctx, `DELETE FROM events`); err == nil {
		t.Errorf("DELETE on the read pool succeeded, want a query_only error")
	}
}

// heldStore opens a Store whose writer, at its first transaction, stops
// inside it: entered is closed once it is there, and it goes on when the
// caller closes release. The store is closed and ctx (30 s) ends with t.
func heldStore(t *testing.T) (ctx context.Context, s *Store, entered, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	now := func() time.Time {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return time.Now()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &Options{Now: now})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s, entered, release
}

// waitQueued waits until n operations wait in s's queue.
func waitQueued(ctx context.Context, t *testing.T, s *Store, n int) {
	t.Helper()
	for len(s.queue) < n {
		if ctx.Err() != nil {
			t.Fatalf("only %d operations queued, want %d", len(s.queue), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit holds the writer inside one transaction while appends
// queue up, then checks that all of them join that transaction: one
// commit, one fsync.
func TestGroupCommit(t *testing.T) {
	const queued = 20
	ctx, s, entered, release := heldStore(t)

	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Append(ctx, []ledger.Record{rec}); err != nil {
			t.Errorf("Append() error = %v", err)
		}
	})
	<-entered // the writer is inside the first transaction
	for range queued {
		wg.Go(func() {
			if _, err := s.Append(ctx, []ledger.Record{rec}); err != nil {
				t.Errorf("Append() error = %v", err)
			}
		})
	}
	waitQueued(ctx, t, s, queued)
	close(release)
	wg.Wait()
	want := Stats{Commits: 1, Syncs: 1, Ops: 1 + queued, Events: 1 + queued}
	got := s.Stats()
	if got.SyncTime <= 0 {
		t.Errorf("Stats().SyncTime = %v after an fsync, want its time", got.SyncTime)
	}
	if got.SyncTime = 0; got != want {
		t.Errorf("Stats() = %+v, want %+v (the queued appends in one commit)", got, want)
	}
}

// TestFailedOpIsolated checks that a failing operation leaves no trace:
// it is rolled back to its savepoint without affecting the others in its
// batch.
func TestFailedOpIsolated(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	for i, submit := range []struct {
		name string
		fn   func(context.Context, func(*wtx) error) error
	}{{"savepoint", s.submit}} {
		group := fmt.Sprintf("g%d", i)
		rec := ledger.Record{Kind: "chat.message", GroupID: group}
		// An op that appends and then fails must leave no trace.
		err = submit.fn(ctx, func(w *wtx) error {
			if _, err := w.append(rec); err != nil {
				return err
			}
			return ledger.ErrConflict
		})
		if !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("%s: submit(failing op) = %v, want ErrConflict", submit.name, err)
		}
		res, err := s.Append(ctx, []ledger.Record{rec})
		if err != nil || res[0].Event.Seq != 1 {
			t.Fatalf("%s: Append() after a failed op = %+v, %v, want seq 1", submit.name, res, err)
		}
		if gs, _ := s.Groups(ctx); len(gs) != i+1 || gs[i].ID != group || gs[i].LastSeq != 1 {
			t.Errorf("%s: Groups() = %+v, want %s at seq 1", submit.name, gs, group)
		}
	}
}

// TestSchemaV1 checks that a ledger of schema version 1, made with or
// without the trigger events_last_seq that moved groups.last_seq with
// every insert, opens as version 2 without the trigger, and that its
// groups' seqs go on: imports and appends share one seq counter per group.
func TestSchemaV1(t *testing.T) {
	const v1Trigger = `CREATE TRIGGER events_last_seq AFTER INSERT ON events BEGIN
	INSERT INTO groups (group_id, last_seq) VALUES (NEW.group_id, NEW.seq)
	ON CONFLICT (group_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq);
END`
	for _, tt := range []struct {
		name    string
		trigger bool
	}{{"with trigger", true}, {"before the trigger", false}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "ledger.db")
			setup := []string{schema, "PRAGMA user_version = 1"}
			if tt.trigger {
				setup = append(setup, v1Trigger)
			}
			// Two events in g and one in h, as a version 1 writer left them.
			for i, g := range []string{"g", "g", "h"} {
				seq := map[int]int{0: 1, 1: 2, 2: 1}[i]
				setup = append(setup, fmt.Sprintf(`INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, v)
					VALUES ('01J9J3DCZ5P8Q2R4S6T8V0W1X%d', '%s', %d, '2026-01-13T10:00:00.000Z', 'chat.message', '', 'user', '{}', 1)`, i, g, seq))
			}
			if !tt.trigger {
				setup = append(setup, `INSERT INTO groups VALUES ('g', 2), ('h', 1)`)
			}
			execFile(t, path, setup...)

			s, err := Open(ctx, path, nil)
			if err != nil {
				t.Fatalf("Open(version 1) error = %v", err)
			}
			defer s.Close()
			var version, triggers int
			if err := s.pin.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger')`).Scan(&version, &triggers); err != nil {
				t.Fatal(err)
			}
			if version != schemaVersion || triggers != 0 {
				t.Errorf("after Open: user_version %d with %d triggers, want %d with none", version, triggers, schemaVersion)
			}
			imported := ledger.Event{V: ledger.Version, ID: "01J9J3DCZ5P8Q2R4S6T8V0W1Y3", TS: ledger.FormatTime(time.Now()),
				Kind: "chat.message", GroupID: "g", Seq: 3, Data: []byte(`{}`)}
			if n, err := s.ImportEvents(ctx, []ledger.Event{imported}); n != 1 || err != nil {
				t.Fatalf("ImportEvents() = %d, %v", n, err)
			}
			res, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: "g"}, {Kind: "chat.message", GroupID: "h"}})
			if err != nil || res[0].Event.Seq != 4 || res[1].Event.Seq != 2 {
				t.Fatalf("Append() after import = %+v, %v, want g at seq 4, h at 2", res, err)
			}
			want := []ledger.Group{{ID: "g", LastSeq: 4}, {ID: "h", LastSeq: 2}}
			if gs, err := s.Groups(ctx); err != nil || !slices.Equal(gs, want) {
				t.Errorf("Groups() = %+v, %v, want %+v", gs, err, want)
			}
		})
	}
}

// TestSeqsAfterFailedOp checks the writer's seqs within one transaction:
// an operation that appends and then fails is rolled back to its
// savepoint, and the next append in the same transaction takes the seq
// the failed one had; groups.last_seq is right after the commit.
func TestSeqsAfterFailedOp(t *testing.T) {
	ctx, s, entered, release := heldStore(t)
	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	results := make([]ledger.Result, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	ops := []func(int){
		func(i int) { // the first, holding the writer inside the transaction
			var res []ledger.Result
			if res, errs[i] = s.Append(ctx, []ledger.Record{rec}); errs[i] == nil {
				results[i] = res[0]
			}
		},
		func(i int) {
			errs[i] = s.submit(ctx, func(w *wtx) error {
				var err error
				if results[i], err = w.append(rec); err != nil {
					return err
				}
				return ledger.ErrConflict
			})
		},
		func(i int) {
			var res []ledger.Result
			if res, errs[i] = s.Append(ctx, []ledger.Record{rec, rec}); errs[i] == nil {
				results[i] = res[1]
			}
		},
	}
	for i, op := range ops {
		wg.Go(func() { op(i) })
		if i == 0 {
			<-entered
			continue
		}
		waitQueued(ctx, t, s, i)
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || results[0].Event.Seq != 1 {
		t.Errorf("first Append() = %+v, %v, want seq 1", results[0], errs[0])
	}
	if !errors.Is(errs[1], ledger.ErrConflict) || results[1].Event.Seq != 2 {
		t.Errorf("failing op: appended %+v, error %v, want seq 2 and ErrConflict", results[1], errs[1])
	}
	if errs[2] != nil || results[2].Event.Seq != 3 {
		t.Errorf("last Append() = %+v, %v, want seq 3 for its second record", results[2], errs[2])
	}
	if st := s.Stats(); st.Commits != 1 {
		t.Errorf("Stats() = %+v, want the three operations in one commit", st)
	}
	if gs, err := s.Groups(ctx); err != nil || len(gs) != 1 || gs[0].LastSeq != 3 {
		t.Errorf("Groups() = %+v, %v, want g at seq 3", gs, err)
	}
	if evs, err := s.Range(ctx, "g", 0, nil, 0); err != nil || len(evs) != 3 {
		t.Errorf("Range() = %d events, %v, want 3", len(evs), err)
	}
}

// TestPipelinedSync checks the overlap of fsync and work: with an
// operation waiting when a transaction commits, the syncer fsyncs it while
// the writer runs that operation in the next transaction, which commits
// only once the fsync is done; and no caller is answered before the fsync
// that covers its commit.
func TestPipelinedSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// MaxBatch 1 keeps the second operation queued when the first
	// commits; the clock holds the writer inside the first until then.
	inFirst := make(chan struct{})
	queued := make(chan struct{})
	var calls atomic.Int64
	now := func() time.Time {
		if calls.Add(1) == 1 {
			close(inFirst)
			<-queued
		}
		return time.Now()
	}
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &Options{MaxBatch: 1, Now: now})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, which waits for the syncer
	var flushes atomic.Int64
	s.wal.flush = func(f *os.File) error {
		if flushes.Add(1) == 1 {
			close(entered)
			<-release
		}
		return f.Sync()
	}

	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	first := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, []ledger.Record{rec})
		first <- err
	}()
	<-inFirst
	ran := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		second <- s.submit(ctx, func(w *wtx) error {
			close(ran)
			_, err := w.append(rec)
			return err
		})
	}()
	for len(s.queue) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the second operation was never queued")
		}
		time.Sleep(time.Millisecond)
	}
	close(queued)
	select {
	case <-entered: // the first commit is being fsynced
	case <-ctx.Done():
		t.Fatal("the first commit was never fsynced")
	}
	select {
	case <-ran: // the writer works while the fsync runs
	case <-ctx.Done():
		t.Fatal("the writer did not run the second operation while the first fsync ran")
	}
	if got := s.Stats().Commits; got != 1 {
		t.Errorf("Stats().Commits = %d during the first fsync, want 1", got)
	}
	for name, ch := range map[string]chan error{"first": first, "second": second} {
		select {
		case err := <-ch:
			t.Fatalf("%s write returned (%v) before its commit was fsynced", name, err)
		default:
		}
	}
	unblock()
	for name, ch := range map[string]chan error{"first": first, "second": second} {
		if err := <-ch; err != nil {
			t.Errorf("%s write: error = %v", name, err)
		}
	}
	if got := s.Stats(); got.Commits != 2 || got.Syncs != 2 {
		t.Errorf("Stats() = %+v, want 2 commits and 2 fsyncs", got)
	}
	if gs, _ := s.Groups(ctx); len(gs) != 1 || gs[0].LastSeq != 2 {
		t.Errorf("Groups() = %+v, want g at seq 2", gs)
	}
}

// TestSyncFailure checks that a failed fsync of the WAL fails the writes
// it was to make durable and every write after it.
func TestSyncFailure(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	eio := errors.New("input/output error")
	s.wal.flush = func(*os.File) error { return eio }
	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	for i := range 2 {
		_, err := s.Append(ctx, []ledger.Record{rec})
		if !errors.Is(err, ErrBroken) || (i == 0 && !errors.Is(err, eio)) {
			t.Errorf("Append() #%d error = %v, want ErrBroken (wrapping the fsync's error the first time)", i+1, err)
		}
	}
	if _, err := s.SetCursor(ctx, "g", "a", "x"); !errors.Is(err, ErrBroken) {
		t.Errorf("SetCursor() after a failed fsync: error = %v, want ErrBroken", err)
	}
}

// TestWALFileReopens checks that the WAL syncer follows the name when the
// file is replaced (SQLite deletes the WAL when its last connection closes
// and creates a new one later), fsyncing the new file before it returns,
// and fails when there is no WAL.
func TestWALFileReopens(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	w := newWALFile(db)
	w.checkEvery = 0 // check the name on every sync
	defer w.close()
	var synced []byte // the first byte of each fsynced file
	w.flush = func(f *os.File) error {
		b := make([]byte, 1)
		_, err := f.ReadAt(b, 0)
		synced = append(synced, b[0])
		return err
	}
	if err := w.sync(); err == nil {
		t.Fatal("sync() without a WAL file succeeded")
	}
	for i := range 2 {
		if err := os.WriteFile(db+"-wal", []byte{byte(i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := w.sync(); err != nil {
			t.Fatalf("sync() #%d error = %v", i+1, err)
		}
		if err := w.sync(); err != nil {
			t.Fatalf("sync() #%d again: error = %v", i+1, err)
		}
		if i == 0 {
			if err := os.Remove(db + "-wal"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// After the replacement: the old file once more, then the new one.
	if !bytes.Equal(synced, []byte{0, 0, 0, 1, 1}) {
		t.Errorf("fsynced files %v: want the first WAL (0) three times, then the new one (1) twice", synced)
	}
}

// A transaction waits for more operations only while callers are arriving
// concurrently (the last commit had several), for at most the last fsync's
// time and maxLinger, and not once it is large.
func TestLingerFor(t *testing.T) {
	for _, tt := range []struct {
		name           string
		prevOps, ops   int
		lastSync, want time.Duration
	}{
		{"lone caller", 1, 1, time.Millisecond, 0},
		{"first commit", 0, 1, 0, 0},
		{"concurrent, fast disk", 5, 3, 150 * time.Microsecond, 150 * time.Microsecond},
		{"concurrent, slow disk", 5, 3, 20 * time.Millisecond, maxLinger},
		{"large already", 40, lingerOps, time.Millisecond, 0},
	} {
		if got := lingerFor(tt.prevOps, tt.ops, lingerOps, tt.lastSync); got != tt.want {
			t.Errorf("%s: lingerFor(%d, %d, %d, %v) = %v, want %v", tt.name, tt.prevOps, tt.ops, lingerOps, tt.lastSync, got, tt.want)
		}
	}
}

// A transaction left open on the writer's connection (as a failed
// ROLLBACK would leave it) does not stop later writes: the next batch ends
// it and begins again.
func TestBeginEndsATransactionLeftOpen(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	if _, err := s.Append(ctx, []ledger.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wconn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil { // the writer is idle
		t.Fatal(err)
	}
	res, err := s.Append(ctx, []ledger.Record{rec})
	if err != nil || res[0].Event.Seq != 2 {
		t.Fatalf("Append() with a transaction left open = %+v, %v, want seq 2", res, err)
	}
}

// TestTimestamps checks the appended events' ts against the clock: its
// millisecond, never earlier than the last one even when the clock goes
// back, and the same text for appends within one millisecond.
func TestTimestamps(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	steps := []struct {
		clock time.Time
		want  string
	}{
		{t0.Add(300 * time.Microsecond), "2026-11-28T15:00:00.000Z"},
		{t0.Add(900 * time.Microsecond), "2026-11-28T15:00:00.000Z"}, // the same millisecond
		{t0.Add(ms + 1), "2026-11-28T15:00:00.001Z"},
		{t0.Add(-5 * ms), "2026-11-28T15:00:00.001Z"}, // the clock went back
		{t0.Add(ms + 999*time.Microsecond), "2026-11-28T15:00:00.001Z"},
		{t0.Add(2 * ms), "2026-11-28T15:00:00.002Z"},
		{t0.Add(time.Hour).In(time.FixedZone("X", 3600)), "2026-11-28T16:00:00.000Z"},
	}
	var i atomic.Int64
	now := func() time.Time { return steps[min(int(i.Load()), len(steps)-1)].clock }
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &Options{Now: now})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	for j, step := range steps {
		i.Store(int64(j))
		res, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: "g"}})
		if err != nil {
			t.Fatalf("Append() #%d error = %v", j, err)
		}
		if got := res[0].Event.TS; got != step.want {
			t.Errorf("Append() #%d at %v: ts %s, want %s", j, step.clock, got, step.want)
		}
	}
}

// TestFlushSeqs checks groups.last_seq after transactions that append to
// one or many groups, each group more than once.
func TestFlushSeqs(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	want := map[string]int64{}
	for _, groups := range []int{1, 7, 8, 9, 19, 3} {
		var recs []ledger.Record
		for i := range 2 * groups {
			g := fmt.Sprintf("g%02d", i%groups)
			recs = append(recs, ledger.Record{Kind: "chat.message", GroupID: g})
			want[g]++
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatalf("Append(%d groups) error = %v", groups, err)
		}
		if got := LastSeqs(t, s); !maps.Equal(got, want) {
			t.Errorf("after appending to %d groups: Groups() = %v, want %v", groups, got, want)
		}
	}
}

// TestHeldAppends runs one-record appends in one transaction, as the
// writer does with queued appendOne ops, and checks what insertHeld made
// of them: runs of 16, 8, 4, 2 and 1 in one statement each, and the
// fallback to one statement per append when a dedupe key is taken, by an
// event committed before or by one earlier in the same run.
func TestHeldAppends(t *testing.T) {
	type rec struct{ group, key string }
	many := func(n int, key func(i int) string) []rec {
		var rs []rec
		for i := range n {
			rs = append(rs, rec{fmt.Sprintf("g%d", i%3), key(i)})
		}
		return rs
	}
	tests := []struct {
		name   string
		before []rec // committed first
		recs   []rec // then appended in one transaction
		dups   map[int]string
	}{
		{name: "one", recs: many(1, func(int) string { return "" })},
		{name: "a run of 16 and one of 4", recs: many(20, func(i int) string { return fmt.Sprint("k", i) })},
		{name: "31: 16, 8, 4, 2, 1", recs: many(31, func(i int) string { return "" })},
		{
			name: "a key taken within the run",
			recs: many(12, func(i int) string { return fmt.Sprint("k", i%10) }),
			dups: map[int]string{10: "k0", 11: "k1"},
		},
		{
			name:   "a key taken before",
			before: []rec{{"g1", "old"}},
			recs:   append(many(6, func(i int) string { return fmt.Sprint("k", i) }), rec{"g2", "old"}, rec{"g0", "k9"}),
			dups:   map[int]string{6: "old"},
		},
		{
			// The run of 8 goes one at a time and gives back a seq;
			// the run of 4 after it was made with the seqs before.
			name:   "a key taken in a run that others follow",
			before: []rec{{"g0", "k3"}},
			recs:   many(12, func(i int) string { return fmt.Sprint("k", i) }),
			dups:   map[int]string{3: "k3"},
		},
		{
			name:   "the last of 17 taken",
			before: []rec{{"g0", "k16"}},
			recs:   many(17, func(i int) string { return fmt.Sprint("k", i) }),
			dups:   map[int]string{16: "k16"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			byKey := map[string]string{} // dedupe key → event id
			seqs := map[string]int64{}
			for _, r := range tt.before {
				res, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: r.group, DedupeKey: r.key}})
				if err != nil {
					t.Fatal(err)
				}
				byKey[r.key] = res[0].Event.ID
				seqs[r.group]++
			}
			// The writer goroutine waits on an empty queue: the test
			// runs its transaction, as WriterTurn does.
			bt := s.begin()
			var ops []*op
			for i, r := range tt.recs {
				o := &op{ctx: ctx, done: make(chan error, 1), rec: ledger.Record{
					Kind: "chat.message", GroupID: r.group, DedupeKey: r.key, Data: fmt.Appendf(nil, `{"i":%d}`, i)}}
				ops = append(ops, o)
				bt.run(o)
			}
			c, ok := bt.commit()
			if !ok {
				t.Fatalf("commit: %v", bt.err)
			}
			s.finish(c)
			log, err := s.Log(ctx, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			pos := map[string]int64{}
			for _, l := range log {
				pos[l.Event.ID] = l.Pos
			}
			for i, o := range ops {
				if err := <-o.done; err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				r, res := tt.recs[i], o.res
				if key, dup := tt.dups[i]; dup {
					if !res.Duplicate || res.Event.ID != byKey[key] || res.Pos != 0 {
						t.Errorf("op %d: %+v, want a duplicate of %s (%q)", i, res, byKey[key], key)
					}
					continue
				}
				seqs[r.group]++
				if res.Duplicate || res.Event.Seq != seqs[r.group] || res.Event.GroupID != r.group || res.Pos != pos[res.Event.ID] || res.Pos == 0 {
					t.Errorf("op %d: %+v, want seq %d in %s at log position %d", i, res, seqs[r.group], r.group, pos[res.Event.ID])
				}
				if got, err := s.Get(ctx, res.Event.ID); err != nil || !ledger.Equal(got, res.Event) || !bytes.Equal(got.Data, fmt.Appendf(nil, `{"i":%d}`, i)) {
					t.Errorf("op %d: Get(%s) = %+v, %v, want %+v", i, res.Event.ID, got, err, res.Event)
				}
				if r.key != "" {
					byKey[r.key] = res.Event.ID
				}
			}
			if len(log) != len(pos) || len(log) != len(tt.before)+len(tt.recs)-len(tt.dups) {
				t.Errorf("the log holds %d events, want %d", len(log), len(tt.before)+len(tt.recs)-len(tt.dups))
			}
			if got := LastSeqs(t, s); !maps.Equal(got, seqs) {
				t.Errorf("Groups() = %v, want %v", got, seqs)
			}
			// The next append follows on.
			res, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: "g0"}})
			if err != nil || res[0].Event.Seq != seqs["g0"]+1 || res[0].Pos != log[len(log)-1].Pos+1 {
				t.Errorf("Append() after = %+v, %v, want seq %d", res, err, seqs["g0"]+1)
			}
		})
	}
}

// LastSeqs returns each group's last seq as Groups reports it. It is
// exported for the package's external tests (import_test.go), as test code
// only.
func LastSeqs(t *testing.T, s ledger.Store) map[string]int64 {
	t.Helper()
	gs, err := s.Groups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, g := range gs {
		got[g.ID] = g.LastSeq
	}
	return got
}

// TestMarksKeepSchema checks that marks need no schema change: a ledger
// file with a mark keeps this schema version (a relay that does not know
// marks still opens it), the mark is a cursors row under the group ""
// no cursor has, and a file without marks has none.
func TestMarksKeepSchema(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMark(ctx, "outbound"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetMark in a ledger without marks error = %v, want ErrNotFound", err)
	}
	if err := s.SetMark(ctx, "outbound", ledger.Mark{Pos: res[0].Pos, EventID: res[0].Event.ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, rows int
	var event string
	if err := db.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version), count(*), max(event_id) FROM cursors WHERE group_id = '' AND actor = 'outbound'`).Scan(&version, &rows, &event); err != nil {
		t.Fatal(err)
	}
	if version != schemaVersion || rows != 1 || event != res[0].Event.ID {
		t.Errorf("after SetMark: user_version %d (this program's %d), %d mark rows naming %s; want this program's version, one row naming %s", version, schemaVersion, rows, event, res[0].Event.ID)
	}
}

// TestCursorsOfPlan checks that CursorsOf looks cursors up by their key,
// one group at a time, and does not scan the cursors table (every actor's
// cursors: ~6 ms at 300 groups × 50 agents).
func TestCursorsOfPlan(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+cursorsOfQuery, "alice")
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN: %v", err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatalf("scanning the plan: %v", err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading the plan: %v", err)
	}
	want := []string{"SCAN g", "SEARCH c USING PRIMARY KEY (group_id=? AND actor=?)"}
	if !slices.Equal(plan, want) {
		t.Errorf("CursorsOf's plan = %q, want %q", plan, want)
	}
}

// execFile runs stmts on the SQLite file at path through a connection of
// its own, as another writer (an older version, a damaged disk) would
// leave the file; the file is in WAL mode after it.
func execFile(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, "_pragma=journal_mode(WAL)"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
