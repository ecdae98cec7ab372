package channel_test

import (
	"slices"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestChannelBufferedAndDigest: over the WebSocket channel a buffering
// agent gets consecutive fragments as one chat/deliver (one content part
// each), again after a reconnect when it did not acknowledge it (the
// delivery cursor moves only on acknowledgement, then to the last
// fragment, and every fragment is acknowledged); a run held when the
// connection drops comes on the next; an urgent follow-up flushes; and
// broadcasts come only as the hourly digest.
func TestChannelBufferedAndDigest(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: testrelay.InjectionAgents})
	th := func(e *envelope.Envelope) { e.Thread = testrelay.InjectionThread }
	a, b, _ := r.Fragments(t)
	r.Clock.Advance(2 * time.Minute)

	merged := func(h *wsClient) channel.Message {
		t.Helper()
		m, ev, ok := h.delivery(10 * time.Second)
		if !ok {
			t.Fatal("no delivery")
		}
		var parts []string
		for _, c := range ev.Content {
			parts = append(parts, c.Text)
		}
		if ev.EventID != b.ID || !slices.Equal(ev.Crosstalk.Fragments, []string{a.ID, b.ID}) ||
			!slices.Equal(parts, []string{"first half", "second half"}) || ev.Attention.Policy != attention.MustRespond {
			t.Fatalf("delivery = %s fragments %v parts %q policy %s, want %s merging %s, %s, must_respond",
				ev.EventID, ev.Crosstalk.Fragments, parts, ev.Attention.Policy, b.ID, a.ID, b.ID)
		}
		return m
	}
	h := dial(t, r, "claude")
	h.initialize()
	merged(h)
	h.close() // not acknowledged
	if c := cursor(t, r, "claude", "default"); c != 0 {
		t.Fatalf("delivery cursor = %d after an unacknowledged delivery, want 0", c)
	}

	h2 := dial(t, r, "claude")
	h2.initialize()
	m := merged(h2)
	// Acknowledge: the cursor moves to the last fragment.
	h2.ack(m, map[string]any{"disposition": "acknowledged"})
	waitFor(t, func() bool { return cursor(t, r, "claude", "default") == b.Seq }, "the delivery cursor at the last fragment")

	// Live: a run held when the connection drops is not lost.
	c := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "third", th))
	h2.close()
	r.Clock.Advance(2 * time.Minute)
	h3 := dial(t, r, "claude")
	h3.initialize()
	mc, ev, ok := h3.delivery(10 * time.Second)
	if !ok || ev.EventID != c.ID {
		t.Fatalf("after reconnecting: %s %v, want the held fragment %s", ev.EventID, ok, c.ID)
	}
	h3.ack(mc, map[string]any{})

	// An urgent follow-up flushes the run it follows.
	d := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "fourth", th))
	u := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "stop!", th, func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "urgent"}}})
	}))
	for _, want := range []string{d.ID, u.ID} {
		m, ev, ok := h3.delivery(10 * time.Second)
		if !ok || ev.EventID != want {
			t.Fatalf("live delivery = %s %v, want %s (the run, then the urgent follow-up)", ev.EventID, ok, want)
		}
		h3.ack(m, map[string]any{})
	}

	// The broadcast comes as the digest once the hour ends (the relay's
	// digest loop), never alone.
	r.EndHour()
	m2, dg, ok := h3.delivery(10 * time.Second)
	if !ok || dg.Crosstalk.Kind != gateway.KindDigest || dg.Crosstalk.Digest == nil || dg.Crosstalk.Digest.Count != 1 ||
		dg.Injection.Mode != attention.Digest || dg.Attention.Policy != attention.MustNotRespond {
		t.Fatalf("after the hour: %+v %v, want claude's digest of the broadcast", dg, ok)
	}
	h3.ack(m2, map[string]any{})
	h3.close()
}
