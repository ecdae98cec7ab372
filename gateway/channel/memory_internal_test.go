package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// discardConn is a harness connection that takes every message.
type discardConn struct{}

func (discardConn) Read(ctx context.Context) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }
func (discardConn) Write(context.Context, []byte) error      { return nil }
func (discardConn) Close(string) error                       { return nil }

// cursorBackend is a relay that records the delivery cursor and nothing
// else; the session calls nothing more of it here.
type cursorBackend struct {
	c2a.Backend
	acts int
}

func (b *cursorBackend) Act(_ context.Context, req gateway.ActionRequest) (gateway.ActionResult, error) {
	if req.Action != gateway.ActionDelivered {
		return gateway.ActionResult{}, fmt.Errorf("unexpected action %s", req.Action)
	}
	b.acts++
	return gateway.ActionResult{}, nil
}

func (b *cursorBackend) Touch(context.Context, string) error { return nil }

// TestSessionStateBounded: a channel left open for months delivers and
// acknowledges event after event; what the session remembers of settled
// deliveries (their request ids, the duplicate check) stays bounded
// instead of growing by every event, and a recent duplicate chat/ack
// still answers "duplicate".
func TestSessionStateBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := &cursorBackend{}
	s := newSession(ctx, discardConn{}, Options{Agent: "claude", Backend: b})
	s.initialized = true
	s.caps.Injection = map[string]bool{"immediate": true, "tool_mailbox": true}
	s.groups["default"] = &groupState{acked: map[string]bool{}}
	const events = 3 * 4096
	var last string
	for i := 1; i <= events; i++ {
		d := gateway.Delivery{Delivery: attention.Delivery{EventID: fmt.Sprintf("ev%06d", i), Seq: int64(i), Group: "default",
			Agent: "claude", Injection: attention.Immediate}, Kind: gateway.KindMessage}
		if err := s.onFeed(feedItem{group: "default", d: d}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // a second attempt for every other event
			if err := s.deliver(s.pending[d.EventID]); err != nil {
				t.Fatal(err)
			}
		}
		id, _ := json.Marshal(s.pending[d.EventID].id)
		if err := s.onResponse(Message{ID: id, Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		last = d.EventID
	}
	if b.acts != events {
		t.Fatalf("delivery cursor moved %d times, want %d", b.acts, events)
	}
	if len(s.ids) > 2*4096 || len(s.done) > 4096 || len(s.pending) != 0 {
		t.Errorf("after %d settled deliveries the session holds %d request ids, %d done, %d pending; want at most %d, %d, 0",
			events, len(s.ids), len(s.done), len(s.pending), 2*4096, 4096)
	}
	res, e := s.onRequest(Message{Method: "chat/ack", Params: json.RawMessage(`{"eventId":"` + last + `"}`)})
	if e != nil || fmt.Sprint(res) != fmt.Sprint(map[string]any{"eventId": last, "duplicate": true}) {
		t.Errorf("chat/ack of the last settled event = %v, %v; want a duplicate", res, e)
	}
}

// refusingBackend refuses every read as the relay refuses a token of
// another principal.
type refusingBackend struct{ c2a.Backend }

func (refusingBackend) Groups(context.Context) ([]ledger.Group, error) {
	return []ledger.Group{{ID: "default"}}, nil
}

func (refusingBackend) Cursor(context.Context, string, string) (int64, error) {
	return 0, &gateway.ActionError{Code: gateway.CodePermission, Reason: `principal "chatgpt" may not act as "claude"`}
}

// TestInitializeRefused: `crosstalk harness --relay` with another agent's
// token: the relay refuses to read the agent's cursors, and initialize
// answers -32003 permission denied with the relay's reason, not -32603 (an
// internal error, which the harness would retry).
func TestInitializeRefused(t *testing.T) {
	s := newSession(t.Context(), discardConn{}, Options{Agent: "claude", Backend: refusingBackend{}})
	defer s.cancel()
	_, e := s.onRequest(Message{Method: "initialize", Params: json.RawMessage(`{"protocolVersion":"2026-06-02"}`)})
	if e == nil || e.Code != CodePermissionDenied || !strings.Contains(e.Message, "may not act as") || e.Data["code"] != gateway.CodePermission {
		t.Errorf("initialize = %+v, want -32003 with the relay's reason and code", e)
	}
	if s.initialized {
		t.Error("the session counts as initialized")
	}
}
