package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestHandoffBlockedForwardTools calls chat.handoff, chat.blocked and
// chat.forward over an in-memory MCP session against an in-process relay:
// the events carry BeadBoard §6.2's fields and CCCS §9's provenance, and
// a forward of something never delivered to the agent is refused.
func TestHandoffBlockedForwardTools(t *testing.T) {
	r := testrelay.Start(t, nil)
	srv, err := mcpserver.New(mcpserver.Options{Agent: "claude", Backend: &c2a.Local{Relay: r.Relay}})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func(name string, args map[string]any) (c2a.SendResult, string) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if res.IsError {
			return c2a.SendResult{}, text
		}
		var out c2a.SendResult
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || out.EventID == "" {
			t.Fatalf("%s: structured %s: %v", name, b, err)
		}
		return out, ""
	}
	data := func(id string) gateway.EventData {
		t.Helper()
		ev, err := r.Relay.Store().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := gateway.ParseData(ev)
		return d
	}

	h, _ := call("chat.handoff", map[string]any{"to": "CHATGPT", "subject": "auth", "summary": "half done", "nextAction": "finish it"})
	if p := data(h.EventID).Protocol; p == nil || p.EventType != gateway.ProtocolHandoff || p.NextAction != "finish it" {
		t.Errorf("handoff protocol = %+v", p)
	}
	b, _ := call("chat.blocked", map[string]any{"on": "CHATGPT", "subject": "db", "blocker": "no creds", "requestedAction": "share", "urgency": "high"})
	if p := data(b.EventID).Protocol; p == nil || p.EventType != gateway.ProtocolBlocked || p.Urgency != "high" {
		t.Errorf("blocked protocol = %+v", p)
	}
	if _, msg := call("chat.blocked", map[string]any{"on": "@reviewer", "subject": "db", "blocker": "b", "requestedAction": "r", "urgency": "high"}); !strings.Contains(msg, "one agent") {
		t.Errorf("blocked on a role = %q, want refused", msg)
	}
	if _, msg := call("chat.blocked", map[string]any{"on": "CHATGPT", "subject": "db", "blocker": "b", "requestedAction": "r", "urgency": "now"}); !strings.Contains(msg, "Urgency") {
		t.Errorf("blocked with urgency now = %q, want refused naming Urgency", msg)
	}

	src := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "please review the release checklist", "alpha", "")
	f, _ := call("chat.forward", map[string]any{"eventId": src.ID, "toGroup": "beta", "summary": "review the checklist"})
	if d := data(f.EventID); f.Group != "beta" || d.SrcGroupID != "alpha" || d.SrcEventID != src.ID || !d.Summarized || d.Text != "[Summarized] review the checklist" {
		t.Errorf("forward = %s %+v %q", f.Group, d.Provenance, d.Text)
	}
	other := r.Send(t, "CHATGPT", "GEMINI", "REQUEST", "not for claude", "alpha", "")
	if _, msg := call("chat.forward", map[string]any{"eventId": other.ID, "toGroup": "beta"}); msg == "" {
		t.Error("forwarding an event never delivered to claude succeeded")
	}
}
