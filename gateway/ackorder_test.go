package gateway_test

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestOneAckEnvelopeFirst: the other order of TestOneAckWhateverThePath —
// an ACK envelope, then the API's ack, then the API's ack again — still
// makes one chat.ack, and each later path answers duplicate with the
// first one's event (CCCS §6.2; issue #14 "the same event can be
// acknowledged twice").
func TestOneAckEnvelopeFirst(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	handoff := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"))[0].Event
	msgID := data(t, handoff).X.Envelope.Message
	outs := ingest(t, r, "", env("CLAUDE", "CHATGPT", "ACK", "g", "ok", func(e *envelope.Envelope) { e.Parent = msgID }))
	if outs[0].Duplicate || outs[0].Event.Kind != gateway.KindAck {
		t.Fatalf("ACK envelope = %s duplicate %v, want a new chat.ack", outs[0].Event.Kind, outs[0].Duplicate)
	}
	for range 2 {
		res, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: handoff.ID, Actor: "claude"})
		if err != nil || !res.Duplicate || res.Event.ID != outs[0].Event.ID {
			t.Errorf("API ack after the envelope = %+v, %v, want a duplicate of %s", res, err, outs[0].Event.ID)
		}
	}
	acks, err := r.Store().Range(ctx, "g", 0, []string{gateway.KindAck}, 0)
	if err != nil || len(acks) != 1 {
		t.Errorf("chat.ack events = %d, %v, want 1", len(acks), err)
	}
	if d := deliveryOf(t, r, "claude", handoff.ID); !d.Acked || d.Owes() || d.Settled() != "acknowledged" {
		t.Errorf("claude's delivery after the ack = acked %v owes %v settled %q, want acknowledged", d.Acked, d.Owes(), d.Settled())
	}
}
