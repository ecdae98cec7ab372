package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// TestJetStreamTwoRelays runs two relays' services, each on its own
// connection to one in-process JetStream ledger. Every round both
// reserve overlapping scopes at once: exactly one wins, both see the
// same reservations, and a third service started afterwards (a restart)
// rebuilds the same table.
func TestJetStreamTwoRelays(t *testing.T) {
	node := natstest.Single(t, false)
	ctx := context.Background()
	var svcs []*reserve.Service
	open := func() *reserve.Service {
		s, err := jetstream.Open(ctx, node.URL, &jetstream.Options{Stream: "reserve", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		svc, err := reserve.NewService(ctx, s, reserve.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svcs = append(svcs, open(), open())
	const rounds = 20
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		scopes := [][]string{
			{fmt.Sprintf("free/a%d", round), fmt.Sprintf("src/%d/*", round)},
			{fmt.Sprintf("free/b%d", round), fmt.Sprintf("src/%d/x.go", round)},
		}
		for i, svc := range svcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = svc.Reserve(ctx, reserve.Request{Agent: fmt.Sprint("agent", i), Scopes: scopes[i], TTL: time.Hour})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !errors.Is(err, reserve.ErrConflict) {
				t.Fatal(err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, won, errs)
		}
	}
	views := [][]reserve.Reservation{}
	for _, svc := range append(svcs, open()) {
		rs, err := svc.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, rs)
	}
	if len(views[0]) != 2*rounds {
		t.Fatalf("%d reservations, want %d (one request of two per round)", len(views[0]), 2*rounds)
	}
	for i, v := range views[1:] {
		if len(v) != len(views[0]) {
			t.Fatalf("view %d has %d reservations, want %d", i+1, len(v), len(views[0]))
		}
		for j := range v {
			if v[j] != views[0][j] {
				t.Fatalf("view %d differs at %d: %+v vs %+v", i+1, j, v[j], views[0][j])
			}
		}
	}
}
