package mcpserver_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestListEventsBufferedAndDigest: over MCP (a real client session,
// in memory, on a real relay), chat.list_events shows a buffering
// agent's consecutive fragments as one event listing them, and its
// broadcasts only in its digest; an event merged or digested is still
// pulled alone by its id (the digest's links).
func TestListEventsBufferedAndDigest(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: testrelay.InjectionAgents})
	ctx := t.Context()
	a, b, bc := r.Fragments(t)
	until := r.EndHour()
	if _, err := r.Relay.WriteDigests(ctx, "claude", until); err != nil { // as the relay's loop does at the hour
		t.Fatal(err)
	}

	srv, err := mcpserver.New(mcpserver.Options{Agent: "claude", Backend: &c2a.Local{Relay: r.Relay}})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list := func(args map[string]any) []mcpserver.EventView {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat.list_events", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("chat.list_events(%v) = %+v, %v", args, res, err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Events []mcpserver.EventView `json:"events"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out.Events
	}
	evs := list(map[string]any{})
	if len(evs) != 2 {
		t.Fatalf("chat.list_events = %+v, want the merged fragments and the digest", evs)
	}
	if m := evs[0]; m.EventID != b.ID || !slices.Equal(m.Fragments, []string{a.ID, b.ID}) ||
		m.UntrustedContent != "first half\n\nsecond half" || m.Policy != attention.MustRespond {
		t.Errorf("first event = %+v, want %s merging %s, %s with both texts, must_respond", m, b.ID, a.ID, b.ID)
	}
	if d := evs[1]; d.Kind != gateway.KindDigest || d.Digest == nil || d.Digest.Count != 1 ||
		!slices.Equal(d.Digest.Entries[0].EventIDs, []string{bc.ID}) || d.Injection != attention.Digest {
		t.Errorf("second event = %+v, want claude's digest of %s", d, bc.ID)
	}
	// Each is still pulled alone by its id.
	for _, id := range []string{a.ID, bc.ID} {
		got := list(map[string]any{"eventId": id})
		if len(got) != 1 || got[0].EventID != id || got[0].UntrustedContent == "" {
			t.Errorf("chat.list_events eventId %s = %+v, want that event with its content", id, got)
		}
	}
}
