package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/transports"
)

// TestOutboundForgetsFinishedDeliveries checks that the dispatcher of a
// relay left running for a year does not keep every delivery it ever
// finished: once its record is read back, a delivery is forgotten,
// and a restart that reads a year of records forgets them as its
// follower passes them.
func TestOutboundForgetsFinishedDeliveries(t *testing.T) {
	r := routedRelay(t)
	const n = 1000
	var text strings.Builder
	for i := range n {
		text.WriteString(env("GEMINI", "CLAUDE", "REQUEST", fmt.Sprintf("g%d", i%7), fmt.Sprintf("message %d", i)))
		text.WriteString("\n")
	}
	ingest(t, r, "", text.String())
	// settled waits until every message has its record and the
	// dispatcher remembers at most a few deliveries.
	settled := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			recs := 0
			for g := range 7 {
				recs += len(waitEvents(t, r, fmt.Sprintf("g%d", g), gateway.KindDelivery, 0))
			}
			final, pending := gateway.OutboundTracked(r)
			if recs == n && final+pending <= 16 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d delivery records; the dispatcher remembers %d final and %d pending deliveries, want at most 16", what, recs, n, final, pending)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	folder := &recordingSender{}
	opts := &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder, "mail": &recordingSender{}}}
	stop := runOutbound(t, r, opts)
	settled("first run")
	stop()
	stop = runOutbound(t, r, opts)
	defer stop()
	settled("after a restart")
	if got := folder.tries(); got != n {
		t.Errorf("sends = %d, want %d (each message once)", got, n)
	}
}

// followFailsOnce is a ledger whose first Follow of each group fails at
// once (a JetStream ledger's server unreachable for a while).
type followFailsOnce struct {
	ledger.Store
	mu     sync.Mutex
	failed map[string]bool
}

func (s *followFailsOnce) Follow(ctx context.Context, group string, since int64) iter.Seq2[ledger.Event, error] {
	s.mu.Lock()
	fail := !s.failed[group]
	s.failed[group] = true
	s.mu.Unlock()
	if fail {
		return func(yield func(ledger.Event, error) bool) { yield(ledger.Event{}, errors.New("ledger unreachable")) }
	}
	return s.Store.Follow(ctx, group, since)
}

// TestOutboundFollowsAgainAfterFailure checks that a group whose follower
// failed is followed again: its deliveries were never sent (nor recorded
// failed) until the relay restarted.
func TestOutboundFollowsAgainAfterFailure(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := gateway.New(&followFailsOnce{Store: st, failed: map[string]bool{}}, &gateway.Options{Book: book})
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "before the outage"))
	folder := &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder}})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "during the outage"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 2); len(evs) != 2 {
		t.Fatalf("delivery records = %d, want 2: the group was not followed again after its follower failed", len(evs))
	}
	if n := folder.count("claude-out"); n != 2 {
		t.Errorf("sent %d, want 2", n)
	}
}
