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

// bufferingAgents: claude merges fragments (quiet 1 min, window 10 min
// of the relay's clock) and takes hourly digests.
var bufferingAgents = []gateway.Agent{
	{ID: "claude", Names: []string{"CLAUDE"}, Buffer: &attention.Buffer{Quiet: time.Minute, MaxWindow: 10 * time.Minute}, DigestEvery: time.Hour},
	{ID: "chatgpt", Names: []string{"CHATGPT"}},
	{ID: "gemini", Names: []string{"GEMINI"}},
}

// TestChannelBufferedAndDigest: over the WebSocket channel a buffering
// agent gets consecutive fragments as one chat/deliver (one content part
// each), again after a reconnect when it did not acknowledge it (the
// delivery cursor moves only on acknowledgement, then to the last
// fragment, and every fragment is acknowledged); a run held when the
// connection drops comes on the next; an urgent follow-up flushes; and
// broadcasts come only as the hourly digest.
func TestChannelBufferedAndDigest(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: bufferingAgents})
	th := func(e *envelope.Envelope) { e.Thread = "01J9ZQ3K8Y5V4W3X2Z1A0B9C8D" }
	a := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "first half", th))
	b := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "second half", th))
	r.Ingest(t, testrelay.Envelope("GEMINI", "ALL", "BROADCAST", "", "nightly build green"))
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
	now := r.Clock.Now()
	r.Clock.Advance(now.Add(time.Hour).Truncate(time.Hour).Sub(now))
	m2, dg, ok := h3.delivery(10 * time.Second)
	if !ok || dg.Crosstalk.Kind != gateway.KindDigest || dg.Crosstalk.Digest == nil || dg.Crosstalk.Digest.Count != 1 ||
		dg.Injection.Mode != attention.Digest || dg.Attention.Policy != attention.MustNotRespond {
		t.Fatalf("after the hour: %+v %v, want claude's digest of the broadcast", dg, ok)
	}
	h3.ack(m2, map[string]any{})
	h3.close()
}
