package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

// session connects an in-memory MCP client to a server for agent.
func session(t *testing.T, backend c2a.Backend, agent string) *mcp.ClientSession {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Options{Agent: agent, Backend: backend, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := t.Context()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call[T any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (T, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out T
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, b)
	}
	return out, res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestScopeTools drives scope.reserve, scope.reservations, scope.release
// and agent.heartbeat for two agents, with a 1 s TTL and a stale
// holder's takeover on a fake clock.
func TestScopeTools(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC))
	st := memory.New(clk.Now)
	relay := gateway.New(st, &gateway.Options{Now: clk.Now, StaleAfter: time.Minute})
	svc, err := reserve.NewService(context.Background(), st, reserve.Options{Now: clk.Now, Policy: relay.ReservePolicy()})
	if err != nil {
		t.Fatal(err)
	}
	backend := &c2a.Local{Relay: relay, Transport: "mcp", Scopes: svc}
	claude, gpt := session(t, backend, "claude"), session(t, backend, "chatgpt")

	hb, _ := call[gateway.Presence](t, claude, "agent.heartbeat", nil)
	if hb.Liveness != attention.Active || hb.ID != "claude" {
		t.Fatalf("heartbeat = %+v", hb)
	}
	ans, _ := call[gateway.ReserveAnswer](t, claude, "scope.reserve", map[string]any{"scopes": []string{"src/auth/*"}, "reason": "login", "ttlSeconds": 3600})
	if !ans.Granted || ans.Reservations[0].Scope != "src/auth/*" {
		t.Fatalf("reserve = %+v", ans)
	}
	ans, res := call[gateway.ReserveAnswer](t, gpt, "scope.reserve", map[string]any{"scopes": []string{"src/auth/login.go"}, "takeoverStale": true})
	if ans.Granted || !res.IsError || len(ans.Conflicts) != 1 || ans.Conflicts[0].Holder != "claude" || ans.Conflicts[0].Class != reserve.Partial ||
		!strings.Contains(text(res), "held by claude as src/auth/*") {
		t.Fatalf("overlap with an active holder = %+v %q", ans, text(res))
	}
	held, res := call[mcpserver.ReservationsOut](t, gpt, "scope.reservations", map[string]any{"path": "src/auth/login.go"})
	if len(held.Reservations) != 1 || held.Reservations[0].Agent != "claude" || held.Reservations[0].HolderLiveness != attention.Active || !strings.Contains(text(res), "login") {
		t.Fatalf("who is touching src/auth/login.go = %+v", held)
	}
	// A 1 s reservation lapses after a second.
	if ans, _ = call[gateway.ReserveAnswer](t, gpt, "scope.reserve", map[string]any{"scopes": []string{"docs"}, "ttlSeconds": 1}); !ans.Granted {
		t.Fatalf("1 s reservation = %+v", ans)
	}
	clk.Add(time.Second)
	if held, _ = call[mcpserver.ReservationsOut](t, claude, "scope.reservations", map[string]any{"path": "docs/a.md"}); len(held.Reservations) != 0 {
		t.Fatalf("1 s reservation still held after 1 s: %+v", held)
	}
	// claude goes quiet for a minute: stale, taken over.
	clk.Add(time.Minute)
	if ans, _ = call[gateway.ReserveAnswer](t, gpt, "scope.reserve", map[string]any{"scopes": []string{"src/auth/login.go"}, "takeoverStale": true}); !ans.Granted {
		t.Fatalf("takeover of a stale holder = %+v", ans)
	}
	rel, _ := call[mcpserver.ReleaseOut](t, gpt, "scope.release", map[string]any{"scopes": []string{"src/auth/login.go"}})
	if len(rel.Released) != 1 {
		t.Fatalf("release = %+v", rel)
	}
	// Refusals are tool errors naming the cause.
	for _, tc := range []struct {
		tool, scope, want string
	}{
		{"scope.release", "src/auth/login.go", "does not hold"},
		{"scope.reserve", "../etc", "root"},
	} {
		res, err := gpt.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"scopes": []string{tc.scope}}})
		if err != nil || !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Fatalf("%s %s = %q, %v; want a tool error with %q", tc.tool, tc.scope, text(res), err, tc.want)
		}
	}
}
