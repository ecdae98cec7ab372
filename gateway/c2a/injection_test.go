package c2a_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestSSEBufferedAndDigest: the agent stream over SSE (Remote.FollowAll
// reads GET /v1/agents/{agent}/stream) yields a buffering agent's
// fragments as one delivery with its last fragment's position, resumes
// after that position without repeating or losing anything, and yields
// the digest instead of the broadcast; Remote lookups by id still find
// each event alone (per_event).
func TestSSEBufferedAndDigest(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: testrelay.InjectionAgents})
	rm := &c2a.Remote{URL: r.URL}
	a, b, bc := r.Fragments(t)
	r.Clock.Advance(2 * time.Minute)

	next := func(after int64) gateway.Delivery {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for d, err := range rm.FollowAll(ctx, "claude", after) {
			if err != nil {
				t.Fatalf("FollowAll after %d: %v", after, err)
			}
			return d
		}
		t.Fatalf("FollowAll after %d: nothing", after)
		return gateway.Delivery{}
	}
	m := next(0)
	var frags []string
	for _, f := range m.Fragments {
		frags = append(frags, f.EventID)
	}
	if m.EventID != b.ID || !slices.Equal(frags, []string{a.ID, b.ID}) || m.Position == 0 {
		t.Fatalf("first SSE delivery = %s fragments %v at %d, want %s merging %s, %s", m.EventID, frags, m.Position, b.ID, a.ID, b.ID)
	}
	// Resuming after it: the broadcast never comes alone; the digest
	// does once the hour ends.
	r.EndHour()
	d := next(m.Position)
	if d.Kind != gateway.KindDigest || d.Digest == nil || !slices.Equal(d.Digest.Entries[0].EventIDs, []string{bc.ID}) {
		t.Fatalf("after resuming: %s %s, want claude's digest of %s", d.Kind, d.EventID, bc.ID)
	}
	for _, id := range []string{a.ID, bc.ID} {
		got, ok, err := c2a.FindDelivery(t.Context(), rm, "claude", "", id)
		if err != nil || !ok || got.EventID != id || len(got.Fragments) != 0 {
			t.Errorf("FindDelivery(%s) = %+v, %v, %v, want the event alone", id, got, ok, err)
		}
	}
}
