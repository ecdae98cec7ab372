package gateway

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// TestProjQueue checks when the write path applies queued facts and when
// it reads the log instead.
func TestProjQueue(t *testing.T) {
	at := func(pos ...int64) []projection.Facts {
		out := make([]projection.Facts, len(pos))
		for i, p := range pos {
			out[i] = projection.Facts{Pos: p}
		}
		return out
	}
	posOf := func(fs []projection.Facts) []int64 {
		out := make([]int64, len(fs))
		for i, f := range fs {
			out[i] = f.Pos
		}
		return out
	}
	wait := int64(projGapWait)
	type step struct {
		add     []projection.Facts
		stale   bool
		after   int64
		now     int64
		run     []int64
		readLog bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a run after the mark", []step{
			{add: at(3, 1, 2), after: 0, now: 1, run: []int64{1, 2, 3}},
			{after: 3, now: 2, run: []int64{}},
		}},
		{"a gap filled in time", []step{
			{add: at(2, 3), after: 0, now: 1, run: []int64{}},
			{add: at(1), after: 0, now: 1 + wait, run: []int64{1, 2, 3}},
		}},
		{"a gap that stays open", []step{
			{add: at(1, 3), after: 0, now: 1, run: []int64{1}},
			{after: 1, now: 1 + wait/2, run: []int64{}},
			{after: 1, now: 2 + wait, run: []int64{}, readLog: true},
		}},
		{"progress restarts the wait", []step{
			{add: at(2, 4), after: 0, now: 1, run: []int64{}},
			{add: at(1), after: 0, now: wait, run: []int64{1, 2}},
			{after: 2, now: 2 * wait, run: []int64{}},
			{after: 2, now: 3*wait + 1, run: []int64{}, readLog: true},
		}},
		{"facts the log applied are dropped", []step{
			{add: at(1, 2), after: 5, now: 1, run: []int64{}},
			{after: 5, now: 2 + wait, run: []int64{}},
		}},
		{"an append without positions", []step{
			{add: at(1), stale: true, after: 0, now: 1, run: []int64{}, readLog: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q projQueue
			for i, s := range tc.steps {
				if s.add != nil || s.stale {
					q.add(s.add, s.stale)
				}
				run, log := q.take(s.after, s.now)
				if got := posOf(run); !slices.Equal(got, s.run) || log != s.readLog {
					t.Fatalf("step %d: take(%d) = %v, read the log %v; want %v, %v", i, s.after, got, log, s.run, s.readLog)
				}
			}
		})
	}
	t.Run("readLog and applied clear the queue", func(t *testing.T) {
		var q projQueue
		q.add(at(1, 2), true) // dropped: the log read covers them
		q.readLog()
		q.add(at(7), false)
		q.applied(5)
		run, log := q.take(5, 1)
		if len(run) != 0 || log {
			t.Fatalf("take after applied(5) = %v, %v; want nothing", posOf(run), log)
		}
		if n := len(q.in) + len(q.held); n != 1 {
			t.Fatalf("queue holds %d facts, want the one after 5", n)
		}
	})
	t.Run("adds past the bound keep nothing", func(t *testing.T) {
		// Appends go on while a sync holds projMu: the queue overflows
		// once and must stay within the bound after, whatever comes.
		var q projQueue
		for i := range 3 * projQueueMax {
			q.add(at(int64(i+1)), false)
			if n := len(q.in); n > projQueueMax {
				t.Fatalf("after %d adds the queue holds %d facts, want at most projQueueMax = %d", i+1, n, projQueueMax)
			}
		}
		if _, log := q.take(0, 1); !log {
			t.Fatal("take after the queue overflowed did not read the log")
		}
	})
	t.Run("a full queue reads the log", func(t *testing.T) {
		var q projQueue
		fs := make([]projection.Facts, projQueueMax+1)
		for i := range fs {
			fs[i].Pos = int64(i + 2) // all after a gap at 1
		}
		q.add(fs, false)
		if _, log := q.take(0, 1); !log {
			t.Fatal("take with more than projQueueMax queued did not read the log")
		}
	})
}

// TestProjQueueBoundedWhileSyncHeld: while a sync holds projMu (a
// Reindex, the catch-up after an upgrade, a slow log read), appends go on
// and the queue stays within projQueueMax: past it, the next sync reads
// the log, which holds the facts it dropped. projQueueMax+64 appends go
// past the bound and on after it (a queue that kept them all would hold
// projQueueMax+64); that adds stay bounded however long they go on after
// the overflow is TestProjQueue's "adds past the bound keep nothing", on
// the queue alone: each append here costs the relay's whole write path
// and CheckProjection a rebuild, which at 3*projQueueMax made this test
// the slowest of the package.
func TestProjQueueBoundedWhileSyncHeld(t *testing.T) {
	ctx := context.Background()
	r := syncingRelay(t)
	r.projMu.Lock() // what a long Reindex does for its whole duration
	for i := range projQueueMax + 64 {
		rec := ledger.Record{Kind: KindMessage, GroupID: "g", By: "a", Data: mustJSON(EventData{Text: fmt.Sprint(i), To: []string{"b"}})}
		if _, err := r.store.Append(ctx, []ledger.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	r.projQ.mu.Lock()
	n := len(r.projQ.in)
	r.projQ.mu.Unlock()
	r.projMu.Unlock()
	if n > projQueueMax {
		t.Errorf("queue holds %d facts while a sync is under way, want at most projQueueMax = %d (the log is read anyway)", n, projQueueMax)
	}
	if diff, err := r.CheckProjection(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("CheckProjection = %d rows differ (%v)", len(diff), err)
	}
}

// TestProjQueueLivenessAppends: a liveness event (a heartbeat's
// transition or renewal) goes through the relay's store, so its position
// is queued and the appends after it are applied at once, not held
// behind a gap for projGapWait and then read from the log.
func TestProjQueueLivenessAppends(t *testing.T) {
	ctx := context.Background()
	r := syncingRelay(t)
	if _, err := r.Heartbeat(ctx, "claude"); err != nil {
		t.Fatal(err)
	}
	rec := ledger.Record{Kind: KindMessage, GroupID: "g", By: "a", Data: mustJSON(EventData{Text: "x"})}
	res, err := r.store.Append(ctx, []ledger.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	pos, _, err := r.proj.HighWater(ctx) // what the write path applied, no read sync
	if err != nil {
		t.Fatal(err)
	}
	if pos != res[0].Pos {
		t.Errorf("after a heartbeat and an append at %d, the write path applied up to %d: the heartbeat's position is a gap it waits on", res[0].Pos, pos)
	}
}

// syncingRelay is a relay on a memory ledger whose write path syncs after
// every append, caught up with its (empty) ledger.
func syncingRelay(t *testing.T) *Relay {
	t.Helper()
	st := memory.New(nil)
	t.Cleanup(func() { st.Close() })
	r := New(st, &Options{})
	r.projEvery = 0
	if err := r.SyncProjection(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}
