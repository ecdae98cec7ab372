package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
)

// discardConn takes every write; nothing is read.
type discardConn struct{}

func (discardConn) Read(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
func (discardConn) Write(context.Context, []byte) error      { return nil }
func (discardConn) Close(string) error                       { return nil }

// acceptingBackend records every action as done; the session needs
// nothing else of it here.
type acceptingBackend struct{ c2a.Backend }

func (acceptingBackend) Act(context.Context, gateway.ActionRequest) (gateway.ActionResult, error) {
	return gateway.ActionResult{}, nil
}

// TestSessionForgetsSettledDeliveries checks that a channel a harness
// keeps open for months does not remember every delivery it ever
// settled: its memory stays bounded however many deliveries pass, and a
// late answer to an earlier attempt, or a repeated chat/ack, of a
// recent delivery is still recognised.
func TestSessionForgetsSettledDeliveries(t *testing.T) {
	s := newSession(t.Context(), discardConn{}, Options{Agent: "claude", Backend: acceptingBackend{}})
	defer s.cancel()
	s.initialized = true
	s.caps.Injection = map[string]bool{"immediate": true}
	s.groups["g"] = &groupState{acked: map[string]bool{}}
	const n = 40_000
	answer := func(id string) error {
		raw, _ := json.Marshal(id)
		return s.onResponse(Message{ID: raw, Result: json.RawMessage(`{}`)})
	}
	for i := range n {
		ev := fmt.Sprintf("ev%07d", i)
		d := gateway.Delivery{}
		d.EventID, d.Group, d.Seq = ev, "g", int64(i+1)
		if err := s.onFeed(feedItem{group: "g", d: d}); err != nil {
			t.Fatalf("onFeed(%s) = %v", ev, err)
		}
		p := s.pending[ev]
		if p == nil {
			t.Fatalf("%s not pending after its delivery", ev)
		}
		first := p.id
		if i%2 == 0 { // a redelivery, then the answer to the first attempt
			if err := s.deliver(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := answer(first); err != nil {
			t.Fatalf("answering %s = %v", first, err)
		}
		if s.pending[ev] != nil {
			t.Fatalf("%s still pending after its acknowledgement", ev)
		}
		if i%2 == 0 {
			// The second attempt's late answer is no error.
			if err := answer(fmt.Sprintf("deliver-%s-2", ev)); err != nil {
				t.Fatalf("late answer to %s = %v", ev, err)
			}
		}
	}
	if got := s.done.len(); got > n/2 {
		t.Errorf("after %d settled deliveries the session remembers %d of them, want a bound well below that", n, got)
	}
	last := fmt.Sprintf("ev%07d", n-1)
	res, e := s.onRequest(Message{Method: "chat/ack", Params: json.RawMessage(`{"eventId":"` + last + `"}`)})
	if e != nil {
		t.Fatalf("repeated chat/ack of %s = %v, want a duplicate", last, e)
	}
	if m, _ := res.(map[string]any); m["duplicate"] != true {
		t.Errorf("repeated chat/ack of %s = %v, want duplicate", last, res)
	}
}
