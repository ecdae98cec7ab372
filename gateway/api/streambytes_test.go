package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// TestAgentStreamWritesJSONMarshalBytes reads deliveries from both forms
// of the agent stream (the log, and ?group=) and checks that each event's
// data is, byte for byte, json.Marshal of the relay's delivery of that
// event: the stream encodes with Delivery.AppendJSON into a buffer it
// reuses, which must write what encoding/json writes, and a large
// delivery between small ones must leave nothing behind.
func TestAgentStreamWritesJSONMarshalBytes(t *testing.T) {
	h := newHarness(t, &api.Options{Heartbeat: time.Hour})
	deadline := func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: "30m"}, {Key: "X-Priority", Value: "high"}}})
	}
	bodies := []string{
		"small",
		"<b>&amp; \"quoted\" \\ back\tslash \u2028 \u2029 é 😀 \ufffd",
		strings.Repeat(strings.Repeat("large <&> ", 100)+"\n", 100), // past the buffer a stream keeps
		"small again",
	}
	for _, b := range bodies {
		h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", b, deadline))
	}
	h.post(env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"))
	want := map[string]gateway.Delivery{}
	ds, err := h.relay.Deliveries(gateway.PerEvent(t.Context()), "claude", "g", 0, 0)
	if err != nil || len(ds) != len(bodies)+1 {
		t.Fatalf("Deliveries = %d, %v; want %d", len(ds), err, len(bodies)+1)
	}
	for _, d := range ds {
		want[d.EventID] = d
	}
	for _, path := range []string{"/v1/agents/claude/stream", "/v1/agents/claude/stream?group=g"} {
		s := h.stream(path)
		s.sc.Buffer(nil, 1<<20) // the large delivery's line
		for range ds {
			ev := s.nextEvent()
			var got gateway.Delivery
			if err := json.Unmarshal([]byte(ev.Data), &got); err != nil {
				t.Fatalf("%s: data %q: %v", path, ev.Data, err)
			}
			w, ok := want[got.EventID]
			if !ok {
				t.Fatalf("%s: delivery of an unknown event: %s", path, ev.Data)
			}
			// What is the stream's own: where it is in the log, and the
			// agent's liveness when it was read.
			w.Position, w.Liveness = got.Position, got.Liveness
			b, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Data != string(b) {
				t.Errorf("%s: data\n%.400s\nwant json.Marshal's\n%.400s", path, ev.Data, b)
			}
		}
		s.close()
	}
}
