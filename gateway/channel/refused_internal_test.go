package channel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// refusingBackend refuses every read as the relay refuses a token of
// another principal.
type refusingBackend struct{ c2a.Backend }

func (refusingBackend) Groups(context.Context) ([]ledger.Group, error) {
	return []ledger.Group{{ID: "default"}}, nil
}

func (refusingBackend) Cursor(context.Context, string, string) (int64, error) {
	return 0, &gateway.ActionError{Code: gateway.CodePermission, Reason: `principal "chatgpt" may not act as "claude"`}
}

func (b refusingBackend) Cursors(ctx context.Context, agent string) (map[string]int64, error) {
	_, err := b.Cursor(ctx, agent, "")
	return nil, err
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
