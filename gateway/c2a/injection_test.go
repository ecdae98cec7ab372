package c2a_test

import (
	"context"
	"fmt"
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

// TestRemoteFindsAndPagesLikeLocal: over the HTTP API, FindDelivery
// (GET …/deliveries?event_id=) and Newest (…?before_pos=) give what they
// give in process, for an event delivered to the agent, its own event,
// an unknown id and an event asked for in another group.
func TestRemoteFindsAndPagesLikeLocal(t *testing.T) {
	r := testrelay.Start(t, nil)
	local, remote := &c2a.Local{Relay: r.Relay}, &c2a.Remote{URL: r.URL}
	in := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "first", "deploy", "")
	own := r.Send(t, "CLAUDE", "CHATGPT", "REQUEST", "mine", "deploy", "")
	for i := range 5 {
		r.Send(t, "GEMINI", "CLAUDE", "REQUEST", "more", "", fmt.Sprint("T", i))
	}
	for _, tc := range []struct {
		name, group, id string
		found           bool
	}{
		{"delivered", "", in.ID, true},
		{"delivered, its group", in.GroupID, in.ID, true},
		{"delivered, another group", in.GroupID + "x", in.ID, false},
		{"own", "", own.ID, false},
		{"unknown", "", "01NOSUCHEVENT", false},
	} {
		ld, lok, lerr := c2a.FindDelivery(t.Context(), local, "claude", tc.group, tc.id)
		rd, rok, rerr := c2a.FindDelivery(t.Context(), remote, "claude", tc.group, tc.id)
		if lerr != nil || rerr != nil || lok != tc.found || rok != tc.found || ld.EventID != rd.EventID || ld.Policy != rd.Policy {
			t.Errorf("%s: local %v %v %v, remote %v %v %v; want found %v", tc.name, ld.EventID, lok, lerr, rd.EventID, rok, rerr, tc.found)
		}
	}
	keep := func(d gateway.Delivery) bool { return d.From == "gemini" }
	lds, lmore, lerr := c2a.Newest(t.Context(), local, "claude", keep, 3)
	rds, rmore, rerr := c2a.Newest(t.Context(), remote, "claude", keep, 3)
	ids := func(ds []gateway.Delivery) (out []string) {
		for _, d := range ds {
			out = append(out, d.EventID)
		}
		return out
	}
	if lerr != nil || rerr != nil || len(lds) != 3 || !lmore || !rmore || !slices.Equal(ids(lds), ids(rds)) {
		t.Errorf("Newest: local %v %v %v, remote %v %v %v; want the same 3 and more", ids(lds), lmore, lerr, ids(rds), rmore, rerr)
	}
}
