package attention_test

import (
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

func ExampleDecide() {
	now := time.Date(2026, 6, 2, 19, 10, 0, 0, time.UTC)
	ev := attention.Event{
		ID: "01JX7Q0000000000000000000A", Seq: 42, Group: "ops", Kind: "chat.message",
		From: "gemini", To: []string{"@backend"}, Intent: attention.IntentRequest,
		Thread: "01JX7P0000000000000000000T", Context: "rollback step", CreatedAt: now,
	}
	agents := []attention.Agent{
		{ID: "claude", Roles: []string{"backend"}},
		{ID: "codex", Roles: []string{"backend"}},
		{ID: "chatgpt"},
	}
	var st attention.State

	// Before anyone claims the role event, backend agents get a knock.
	for _, a := range agents {
		d := attention.Decide(ev, a, st, now)
		fmt.Println(a.ID, d.Directedness, d.Policy, d.Reason, d.Injection)
	}
	k := attention.Decide(ev, agents[0], st, now).Knock
	fmt.Printf("knock: %s in %s: %q, pull with %s\n", k.From, k.Where, k.Topic, k.PullWith)

	// claude claims first; codex's claim a moment later is denied.
	for _, a := range []string{"claude", "codex"} {
		c := attention.DecideClaim(st, attention.ClaimRequest{Agent: a, Event: ev.ID, Thread: ev.Thread}, now)
		st.Claims = attention.ApplyClaim(st.Claims, c)
		fmt.Println("claim by", a, c.Outcome)
	}
	for _, a := range agents[:2] {
		d := attention.Decide(ev, a, st, now)
		fmt.Println(a.ID, d.Policy, d.Reason, d.Injection, d.IdempotencyKey)
	}
	// Output:
	// claude to_my_role may_respond claim_required notify
	// codex to_my_role may_respond claim_required notify
	// chatgpt to_other must_not_respond addressed_to_other tool_mailbox
	// knock: gemini in thread:01JX7P0000000000000000000T: "request about rollback step", pull with chat.read_thread
	// claim by claude granted
	// claim by codex denied
	// claude may_respond claimed buffered 01JX7Q0000000000000000000A:claude
	// codex must_not_respond claimed_by_other tool_mailbox 01JX7Q0000000000000000000A:codex
}

func ExampleMerge() {
	t0 := time.Date(2026, 6, 2, 19, 10, 0, 0, time.UTC)
	frag := func(id string, at time.Duration) attention.Fragment {
		return attention.Fragment{Agent: "claude", Thread: "T", Author: "will", EventID: id, At: t0.Add(at)}
	}
	pending := []attention.Fragment{frag("when", 0), frag("someone", time.Second), frag("types", 2*time.Second)}

	ready, rest, wake := attention.Merge(pending, t0.Add(4*time.Second))
	fmt.Println(len(ready), len(rest), wake.Sub(t0))
	ready, rest, _ = attention.Merge(rest, wake)
	fmt.Println(ready[0].EventIDs, len(rest))
	// Output:
	// 0 3 5s
	// [when someone types] 0
}

func ExampleLivenessOf() {
	seen := time.Date(2026, 6, 2, 19, 0, 0, 0, time.UTC)
	for _, m := range []time.Duration{14, 15, 29, 30} {
		age := m * time.Minute
		fmt.Println(age, attention.LivenessOf(seen, seen.Add(age)))
	}
	// Output:
	// 14m0s active
	// 15m0s stale
	// 29m0s stale
	// 30m0s evicted
}
