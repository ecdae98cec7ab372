package liveness_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)) }

const stale = 15 * time.Minute

func events(t *testing.T, s ledger.Store) []liveness.EventData {
	t.Helper()
	evs, err := s.Range(context.Background(), liveness.DefaultGroup, 0, nil, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]liveness.EventData, len(evs))
	for i, ev := range evs {
		if ev.Kind != ledger.KindLiveness {
			t.Fatalf("event %d is %s", i, ev.Kind)
		}
		if err := json.Unmarshal(ev.Data, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func states(evs []liveness.EventData) []attention.Liveness {
	out := make([]attention.Liveness, len(evs))
	for i, e := range evs {
		out[i] = e.State
	}
	return out
}

func beat(t *testing.T, tr *liveness.Tracker, agent string) liveness.Status {
	t.Helper()
	st, err := tr.Beat(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sweep(t *testing.T, tr *liveness.Tracker) int {
	t.Helper()
	n, err := tr.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTransitionsNotBeats: a thousand beats a few seconds apart record one
// event; silence then records stale and evicted at the §4.1 thresholds,
// and the next beat active again.
func TestTransitionsNotBeats(t *testing.T) {
	clk := newClock()
	store := memory.New(clk.Now)
	tr := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	start := clk.Now()
	for range 1000 {
		if st := beat(t, tr, "Alice"); st.Liveness != attention.Active {
			t.Fatalf("beat: %+v", st)
		}
		clk.Add(time.Second / 4)
	}
	if got := states(events(t, store)); len(got) != 1 || got[0] != attention.Active {
		t.Fatalf("after 1000 beats: %v, want [active]", got)
	}
	last := start.Add(999 * time.Second / 4)
	// Per liveness state, stepping just before and at each threshold.
	for _, step := range []struct {
		at   time.Duration
		want attention.Liveness
	}{
		{stale - time.Millisecond, attention.Active},
		{stale, attention.Stale},
		{2*stale - time.Millisecond, attention.Stale},
		{2 * stale, attention.Evicted},
		{3 * stale, attention.Evicted},
	} {
		clk.Set(last.Add(step.at))
		sweep(t, tr)
		if st := tr.Status("alice"); st.Liveness != step.want || st.Recorded != step.want || !st.LastSeen.Equal(last) {
			t.Fatalf("at last+%v: %+v, want %s recorded", step.at, st, step.want)
		}
	}
	// The first sweep flushed the last beat (a renewal), then the two
	// transitions.
	evs := events(t, store)
	if got := states(evs); len(got) != 4 || got[1] != attention.Active || got[2] != attention.Stale || got[3] != attention.Evicted {
		t.Fatalf("events %v, want [active active stale evicted]", got)
	}
	if evs[1].SeenAt != ledger.FormatTime(last) || evs[2].At != ledger.FormatTime(last.Add(stale)) || evs[3].At != ledger.FormatTime(last.Add(2*stale)) {
		t.Fatalf("flush of %s, transitions at %s and %s; want the last beat and the thresholds", evs[1].SeenAt, evs[2].At, evs[3].At)
	}
	beat(t, tr, "alice")
	if got := states(events(t, store)); len(got) != 5 || got[4] != attention.Active {
		t.Fatalf("events %v, want active again", got)
	}
}

// TestLedgerBoundedByTime: beating every 5 s for 6 hours while sweeping
// every 30 s records a number of events bounded by time (renewals every
// StaleAfter/2), not by the 4320 beats.
func TestLedgerBoundedByTime(t *testing.T) {
	clk := newClock()
	store := memory.New(clk.Now)
	tr := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	const hours = 6
	for i := range hours * 3600 / 5 {
		beat(t, tr, "alice")
		if i%6 == 0 {
			sweep(t, tr)
		}
		clk.Add(5 * time.Second)
	}
	n := len(events(t, store))
	if max := 1 + hours*int(time.Hour/(stale/2)); n > max {
		t.Fatalf("%d events for %d beats, want at most %d", n, hours*720, max)
	}
	t.Logf("%d beats, %d events", hours*720, n)
}

// TestRestart: a tracker started on the same ledger (a restarted relay)
// derives the same statuses.
func TestRestart(t *testing.T) {
	clk := newClock()
	store := memory.New(clk.Now)
	tr := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	beat(t, tr, "alice")
	clk.Add(10 * time.Minute)
	beat(t, tr, "bob")
	clk.Add(6 * time.Minute)
	sweep(t, tr)
	again := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	if err := again.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, got := tr.All(), again.All()
	if len(got) != 2 || len(want) != 2 {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("after restart %+v, before %+v", got[i], want[i])
		}
	}
	if got[0].Liveness != attention.Stale || got[1].Liveness != attention.Active {
		t.Fatalf("alice %s, bob %s; want stale, active", got[0].Liveness, got[1].Liveness)
	}
}

// TestTwoRelays: two trackers on one ledger. A sighting on one relay is
// seen by the other after a sync; a relay's unrecorded sighting is
// flushed by its sweep before the other would judge the agent stale; and
// both sweeping at once record each transition once.
func TestTwoRelays(t *testing.T) {
	clk := newClock()
	store := memory.New(clk.Now)
	a := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	b := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	ctx := context.Background()
	t0 := clk.Now()
	beat(t, a, "alice")
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Status("alice"); !st.LastSeen.Equal(t0) || st.Liveness != attention.Active {
		t.Fatalf("b sees %+v", st)
	}
	clk.Add(5 * time.Minute)
	beat(t, a, "alice") // under StaleAfter/2: memory only
	if n := len(events(t, store)); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	clk.Add(7 * time.Minute) // 12 min after the recorded sighting
	if n := sweep(t, a); n != 1 {
		t.Fatalf("a's sweep appended %d, want the flush", n)
	}
	clk.Add(5 * time.Minute) // 17 min after t0, 12 after the last beat
	var wg sync.WaitGroup
	for _, tr := range []*liveness.Tracker{a, b} {
		wg.Go(func() { sweep(t, tr) })
	}
	wg.Wait()
	if st := b.Status("alice"); st.Liveness != attention.Active || !st.LastSeen.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("b sees %+v, want active since the flushed sighting", st)
	}
	clk.Add(10 * time.Minute)
	for _, tr := range []*liveness.Tracker{a, b} {
		wg.Go(func() { sweep(t, tr) })
	}
	wg.Wait()
	if got := states(events(t, store)); len(got) != 3 || got[2] != attention.Stale {
		t.Fatalf("events %v, want [active active stale]", got)
	}
	for _, tr := range []*liveness.Tracker{a, b} {
		if st := tr.Status("alice"); st.Recorded != attention.Stale || st.Liveness != attention.Stale {
			t.Fatalf("%+v, want stale", st)
		}
	}
}

// TestStaleVoidedByRenewal: a stale judged on an older sighting than a
// renewal folded before it changes nothing.
func TestStaleVoidedByRenewal(t *testing.T) {
	clk := newClock()
	store := memory.New(clk.Now)
	ctx := context.Background()
	t0 := clk.Now()
	rec := func(state attention.Liveness, seen time.Time, prev int) {
		b, _ := json.Marshal(liveness.EventData{Agent: "alice", State: state, SeenAt: ledger.FormatTime(seen), At: ledger.FormatTime(seen)})
		if _, err := store.Append(ctx, []ledger.Record{{Kind: ledger.KindLiveness, GroupID: liveness.DefaultGroup, Data: b}}); err != nil {
			t.Fatal(err)
		}
	}
	rec(attention.Active, t0, 0)
	rec(attention.Active, t0.Add(10*time.Minute), 1)
	rec(attention.Stale, t0, 1) // another relay judged on the first sighting
	clk.Add(16 * time.Minute)
	tr := liveness.New(store, liveness.Options{Now: clk.Now, StaleAfter: stale})
	if err := tr.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := tr.Status("alice"); st.Recorded != attention.Active || st.Liveness != attention.Active {
		t.Fatalf("%+v, want active", st)
	}
}

func TestBadAgent(t *testing.T) {
	tr := liveness.New(memory.New(nil), liveness.Options{})
	for _, a := range []string{"", string(make([]byte, liveness.MaxAgentLen+1))} {
		if _, err := tr.Beat(context.Background(), a); err == nil {
			t.Fatalf("Beat(%q) succeeded", a)
		}
	}
}
