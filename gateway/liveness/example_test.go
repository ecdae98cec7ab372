package liveness_test

import (
	"context"
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
)

// A relay's tracker: beats cost a ledger event only on a transition, and
// the sweeper records stale and evicted when no one beats.
func ExampleTracker() {
	now := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := memory.New(clock)
	tr := liveness.New(store, liveness.Options{Now: clock, StaleAfter: 15 * time.Minute})
	ctx := context.Background()
	for range 100 {
		tr.Beat(ctx, "claude")
		now = now.Add(time.Second)
	}
	now = now.Add(15 * time.Minute)
	tr.Sweep(ctx)
	st := tr.Status("claude")
	fmt.Println(st.Liveness, st.Since.Format(time.TimeOnly))
	evs, _ := store.Range(ctx, liveness.DefaultGroup, 0, nil, 0)
	fmt.Println(len(evs), "events for 100 beats")
	// Output:
	// stale 10:16:39
	// 2 events for 100 beats
}
