package gateway_test

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestAgentsListsActors checks that Agents lists every actor of the
// ledger, not only the address book and live ones: bob has mail but no
// liveness and no book entry. Owes follows replies and resolutions, and
// the index picks up events appended after its first scan.
func TestAgentsListsActors(t *testing.T) {
	ctx := context.Background()
	r := newRelay(t, nil)
	req := ingest(t, r, "", env("CHATGPT", "CLAUDE", envelope.IntentRequest, "g", "review please"))[0]
	toBob := ingest(t, r, "", env("CHATGPT", "BOB", envelope.IntentRequest, "g", "your turn"))[0]

	byID := func() map[string]gateway.AgentStatus {
		t.Helper()
		as, err := r.Agents(ctx)
		if err != nil {
			t.Fatalf("Agents() = %v", err)
		}
		m := map[string]gateway.AgentStatus{}
		for _, a := range as {
			m[a.ID] = a
		}
		return m
	}
	got := byID()
	for _, id := range []string{"claude", "chatgpt", "gemini"} {
		if _, ok := got[id]; !ok {
			t.Errorf("Agents() lacks the address book's %s: %v", id, got)
		}
	}
	bob, ok := got["bob"]
	if !ok {
		t.Fatalf("Agents() lacks bob, who has mail: %v", got)
	}
	if bob.Addressed != 1 || bob.Owes != 1 || bob.Liveness == "" {
		t.Errorf("bob = %+v, want addressed 1, owes 1, a liveness", bob)
	}
	if c := got["chatgpt"]; c.Events != 2 || c.Owes != 0 {
		t.Errorf("chatgpt = %+v, want 2 events, owes 0", c)
	}
	if c := got["claude"]; c.Owes != 1 {
		t.Errorf("claude = %+v, want owes 1", c)
	}

	// claude answers; bob resolves: neither owes any more.
	reply := envelope.NewReply(req.Envelope, envelope.IntentRespond, "done")
	b, _ := envelope.Marshal(reply)
	ingest(t, r, "", string(b))
	if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionResolve, Group: toBob.Event.GroupID, EventID: toBob.Event.ID, Actor: "bob"}); err != nil {
		t.Fatalf("Act(resolve) = %v", err)
	}
	got = byID()
	if c := got["claude"]; c.Owes != 0 || c.Events != 1 {
		t.Errorf("claude after replying = %+v, want owes 0, 1 event", c)
	}
	if b := got["bob"]; b.Owes != 0 || b.Events != 1 {
		t.Errorf("bob after resolving = %+v, want owes 0, 1 event", b)
	}
}
