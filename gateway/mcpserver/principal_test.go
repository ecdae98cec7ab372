package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
	"github.com/crosstalk-go/crosstalk/signing"
)

// TestToolsActOnlyForTheTokensPrincipal: `crosstalk mcp --relay` with
// claude's token but --agent chatgpt may neither read chatgpt's inbox
// nor act on its events nor send in its name: every tool is a tool error
// naming the refusal, and the ledger is unchanged.
func TestToolsActOnlyForTheTokensPrincipal(t *testing.T) {
	st := memory.New(time.Now)
	srv, err := server.Open(t.Context(), &server.Options{DataDir: t.TempDir(), Store: st, Agents: testrelay.Agents, RateLimit: -1,
		Tokens: map[string]string{"tok-claude": "claude"}, Verifier: gateway.NewTrustVerifier(&signing.Verifier{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	outs, err := srv.Relay().Ingest(t.Context(), gateway.Intake{Transport: "test",
		Data: strings.NewReader(testrelay.Envelope("CLAUDE", "CHATGPT", "REQUEST", "deploy", "review PR 7"))})
	if err != nil || len(outs) != 1 || outs[0].Reject != nil {
		t.Fatalf("Ingest() = %+v, %v", outs, err)
	}
	ev := outs[0].Event
	before, _ := st.Range(t.Context(), ev.GroupID, 0, nil, 0)

	cs := session(t, &c2a.Remote{URL: srv.URL(), Token: "tok-claude", Retries: -1}, "chatgpt")
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"chat.list_events", map[string]any{}},
		{"chat.list_events", map[string]any{"eventId": ev.ID}},
		{"chat.read_thread", map[string]any{"eventId": ev.ID}},
		{"chat.owe", map[string]any{}},
		{"chat.waiting", map[string]any{}},
		{"chat.react", map[string]any{"eventId": ev.ID, "signal": "agree"}},
		{"chat.claim", map[string]any{"eventId": ev.ID}},
		{"chat.resolve", map[string]any{"eventId": ev.ID}},
		{"chat.defer", map[string]any{"eventId": ev.ID, "reason": "later"}},
		{"chat.discharge", map[string]any{"eventId": ev.ID}},
		{"chat.send_message", map[string]any{"to": "GEMINI", "directedness": "to_me", "intent": "REQUEST", "body": "as chatgpt"}},
		{"chat.send_message", map[string]any{"inReplyTo": ev.ID, "to": "CLAUDE", "directedness": "to_me", "intent": "RESPOND", "body": "done"}},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Errorf("%s(%v): %v", tc.tool, tc.args, err)
			continue
		}
		if !res.IsError || !strings.Contains(text(res), `principal "claude" may not`) {
			t.Errorf("%s(%v) as chatgpt with claude's token = %.300s, want a tool error naming the refusal", tc.tool, tc.args, text(res))
		}
	}
	after, _ := st.Range(t.Context(), ev.GroupID, 0, nil, 0)
	if len(after) != len(before) {
		t.Errorf("the ledger has %d events after the refused calls, %d before", len(after), len(before))
	}
	// The same token for its own agent works.
	own := session(t, &c2a.Remote{URL: srv.URL(), Token: "tok-claude", Retries: -1}, "claude")
	if res, err := own.CallTool(t.Context(), &mcp.CallToolParams{Name: "chat.waiting", Arguments: map[string]any{}}); err != nil || res.IsError ||
		!strings.Contains(text(res), ev.ID) && !strings.Contains(text(res), "waits on") {
		t.Errorf("chat.waiting as claude = %v, %v", res, err)
	}
}
