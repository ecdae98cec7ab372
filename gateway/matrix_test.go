package gateway_test

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// deliveryOf returns agent's delivery of event id in group g, failing when
// there is none.
func deliveryOf(t *testing.T, r *gateway.Relay, agent, id string) gateway.Delivery {
	t.Helper()
	ds, err := r.Deliveries(context.Background(), agent, "g", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.EventID == id {
			return d
		}
	}
	t.Fatalf("%s has no delivery of %s among %d", agent, id, len(ds))
	return gateway.Delivery{}
}

// TestAckNackAreDirectedAnswers: an ACK or NACK envelope answers the asker
// (the author of parent): to_me, ack_only, notify for it; to_other for
// everyone else; the reaction glyphs are C2A's (issue #14).
func TestAckNackAreDirectedAnswers(t *testing.T) {
	r := newRelay(t, nil)
	ask := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "can you review?"))[0].Event
	parent := func(e *envelope.Envelope) { e.Parent = data(t, ask).X.Envelope.Message }
	tests := []struct {
		intent, signal, glyph string
	}{
		{"ACK", "agree", "👍"},
		{"NACK", "declined", "🙅"},
	}
	for _, tt := range tests {
		t.Run(tt.intent, func(t *testing.T) {
			ev := ingest(t, r, "", env("CLAUDE", "CHATGPT", tt.intent, "g", "answer "+tt.intent, parent))[0].Event
			d := data(t, ev)
			if ev.Kind != gateway.KindReaction || d.Signal != tt.signal || d.Emoji != tt.glyph || d.EventID != ask.ID {
				t.Errorf("%s = %s signal %q glyph %q about %s, want chat.reaction %q %q about %s", tt.intent, ev.Kind, d.Signal, d.Emoji, d.EventID, tt.signal, tt.glyph, ask.ID)
			}
			if len(d.To) != 1 || d.To[0] != "chatgpt" {
				t.Errorf("%s to = %q, want the asker [chatgpt]", tt.intent, d.To)
			}
			got := deliveryOf(t, r, "chatgpt", ev.ID)
			if got.Directedness != attention.ToMe || got.Policy != attention.AckOnly || got.Injection != attention.Notify {
				t.Errorf("asker's delivery of %s = %s/%s/%s, want to_me/ack_only/notify", tt.intent, got.Directedness, got.Policy, got.Injection)
			}
			got = deliveryOf(t, r, "gemini", ev.ID)
			if got.Directedness != attention.ToOther || got.Policy != attention.MustNotRespond {
				t.Errorf("bystander's delivery of %s = %s/%s, want to_other/must_not_respond", tt.intent, got.Directedness, got.Policy)
			}
		})
	}
}

// TestOneAckWhateverThePath: an API ack then an ACK envelope for the same
// attention message make one chat.ack (CCCS §6.2 idempotency).
func TestOneAckWhateverThePath(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	handoff := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"))[0].Event
	res, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: handoff.ID, Actor: "claude"})
	if err != nil || res.Duplicate {
		t.Fatalf("API ack = %+v, %v", res, err)
	}
	msgID := data(t, handoff).X.Envelope.Message
	outs := ingest(t, r, "", env("CLAUDE", "CHATGPT", "ACK", "g", "ok", func(e *envelope.Envelope) { e.Parent = msgID }))
	if !outs[0].Duplicate || outs[0].Event.ID != res.Event.ID {
		t.Errorf("ACK envelope after the API ack = duplicate %v event %s, want the API's %s", outs[0].Duplicate, outs[0].Event.ID, res.Event.ID)
	}
	acks, err := r.Store().Range(ctx, "g", 0, []string{gateway.KindAck}, 0)
	if err != nil || len(acks) != 1 {
		t.Errorf("chat.ack events = %d, %v, want 1", len(acks), err)
	}
	if d := data(t, acks[0]); len(d.To) != 1 || d.To[0] != "chatgpt" {
		t.Errorf("API chat.ack to = %q, want the asker", d.To)
	}
}

// TestRoleAndAllMentions: before any claim a role mention is may_respond
// for every holder, and @all is to_my_role for every member (C2A "Role or
// group mention").
func TestRoleAndAllMentions(t *testing.T) {
	r := newRelay(t, nil)
	role := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", "anyone?"))[0].Event
	all := ingest(t, r, "", env("GEMINI", "@all", "REQUEST", "g", "everyone?"))[0].Event
	for _, agent := range []string{"claude", "chatgpt"} {
		for _, id := range []string{role.ID, all.ID} {
			d := deliveryOf(t, r, agent, id)
			if d.Directedness != attention.ToMyRole || d.Policy != attention.MayRespond || d.Injection != attention.Notify {
				t.Errorf("%s's delivery of %s = %s/%s/%s, want to_my_role/may_respond/notify", agent, id, d.Directedness, d.Policy, d.Injection)
			}
		}
	}
	if _, err := r.Act(context.Background(), gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: all.ID, Actor: "claude"}); err != nil {
		t.Fatal(err)
	}
	if d := deliveryOf(t, r, "chatgpt", all.ID); d.Policy != attention.MustNotRespond || d.Reason != attention.ReasonClaimedByOther {
		t.Errorf("chatgpt's delivery of @all after claude's claim = %s (%s), want must_not_respond (claimed_by_other)", d.Policy, d.Reason)
	}
}

// TestNoticeRequiresAck: a relay notice for one agent asks for
// system.notify_ack, only that agent can give it, and it closes the notice
// (CCCS §7.1, §7.2).
func TestNoticeRequiresAck(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	ask := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "q"))[0].Event
	if err := r.NotifyAgent(ctx, "claude", "g", ask.ID, "claim_released", "your claim lapsed"); err != nil {
		t.Fatal(err)
	}
	notes, err := r.Store().Range(ctx, "g", 0, []string{gateway.KindNotify}, 0)
	if err != nil || len(notes) != 1 || !data(t, notes[0]).RequiresAck {
		t.Fatalf("notices = %+v, %v, want one with requires_ack", notes, err)
	}
	note := notes[0]
	d := deliveryOf(t, r, "claude", note.ID)
	if d.Policy != attention.AckOnly || d.Acked {
		t.Errorf("notice delivery = %s acked %v, want ack_only, not acked", d.Policy, d.Acked)
	}
	act := func(actor string) (gateway.ActionResult, error) {
		return r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: note.ID, Actor: actor})
	}
	if _, err := act("chatgpt"); !isCode(err, gateway.CodePermission) {
		t.Errorf("ack of claude's notice by chatgpt = %v, want permission_denied", err)
	}
	res, err := act("claude")
	if err != nil || res.Event.Kind != ledger.KindNotifyAck || data(t, res.Event).NotifyEventID != note.ID {
		t.Fatalf("notify ack = %+v, %v", res, err)
	}
	if again, err := act("claude"); err != nil || !again.Duplicate {
		t.Errorf("second notify ack = %+v, %v, want a duplicate", again, err)
	}
	if d := deliveryOf(t, r, "claude", note.ID); !d.Acked {
		t.Errorf("notice after system.notify_ack: acked = false, want true")
	}
}
