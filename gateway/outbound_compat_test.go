package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/internal/v10peer"
	"github.com/crosstalk-go/crosstalk/transports"
)

// TestOutboundCompatV10 checks that an agent marked compat = "v1.0"
// receives the v1.0 form — v1.0 grammar, and read by the original v1.0
// parser where node is available — while a v1.1 agent receives the
// envelope as sent.
func TestOutboundCompatV10(t *testing.T) {
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "old", Names: []string{"OLDBOT"}, Transport: "folder", Address: "old-out", Compat: gateway.CompatV10},
		{ID: "new", Names: []string{"NEWBOT"}, Transport: "mail", Address: "new@example.test"},
		{ID: "gemini", Names: []string{"GEMINI"}},
		{ID: "dead", Names: []string{"DEADBOT"}, Transport: "http", Address: "http://unreachable.test/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book})
	old, cur := &recordingSender{}, &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders:    map[string]transports.Sender{"folder": old, "mail": cur},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	})
	defer stop()
	noSession := func(e *envelope.Envelope) {
		e.Session = ""
		e.Meta = []envelope.Meta{{Namespace: "privacy", Fields: []envelope.Field{{Key: "PII", Value: "none"}}}}
	}
	ingest(t, r, "", env("GEMINI", "OLDBOT", "REQUEST", "g", "question for the old bot", noSession))
	ingest(t, r, "", env("GEMINI", "ALL", "CLOSE", "g", "done here"))
	// No http transport here: the delivery fails for good and the ERROR
	// envelope bounces back to the v1.0 sender, in the v1.0 form too.
	ingest(t, r, "", env("OLDBOT", "DEADBOT", "REQUEST", "h", "anyone there?"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 4); len(evs) != 4 {
		t.Fatalf("delivery records = %d, want 4 (old ×2, new, dead)", len(evs))
	}
	if evs := waitEvents(t, r, "h", gateway.KindDelivery, 1); len(evs) != 1 {
		t.Fatalf("delivery records in h = %d, want 1", len(evs))
	}
	old.mu.Lock()
	var bounce string
	var texts []string
	for _, text := range old.texts {
		if strings.Contains(text, "intent: ERROR") {
			bounce = text
		} else {
			texts = append(texts, text)
		}
	}
	old.texts = texts
	old.mu.Unlock()
	if len(old.texts) != 2 || len(cur.texts) != 1 {
		t.Fatalf("old got %d, new got %d envelopes", len(old.texts), len(cur.texts))
	}
	if bounce == "" || strings.Contains(bounce, "meta:") || !strings.Contains(bounce, "\nsession: ") || !strings.Contains(bounce, "could not deliver to dead") {
		t.Errorf("the v1.0 sender's bounce:\n%s", bounce)
	}
	if !strings.Contains(cur.texts[0], "intent: CLOSE") || !strings.Contains(cur.texts[0], "meta: routing") {
		t.Errorf("the v1.1 agent got\n%s", cur.texts[0])
	}
	q, closing := old.texts[0], old.texts[1]
	if strings.Contains(q, "intent: CLOSE") {
		q, closing = closing, q
	}
	if err := v10peer.CheckGrammar([]byte(q)); err != nil {
		t.Errorf("v1.0 grammar: %v\n%s", err, q)
	}
	if !strings.Contains(q, "intent: QUESTION\n") || strings.Contains(q, "meta:") || !strings.Contains(q, "\nsession: ") {
		t.Errorf("the v1.0 agent got\n%s", q)
	}
	// CLOSE has no v1.0 form; the relay keeps it rather than refuse the
	// delivery, since v1.0 parsers do not check the intent.
	if !strings.Contains(closing, "intent: CLOSE\n") || strings.Contains(closing, "meta:") {
		t.Errorf("the v1.0 agent got\n%s", closing)
	}

	peer := v10peer.Setup(t)
	for _, text := range append(old.texts, bounce) {
		e, err := envelope.Unmarshal([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		got, err := peer.Parse([]byte(text))
		if err != nil || got.From != e.From || got.Session != e.Session || got.Response != e.Body {
			t.Errorf("v1.0 parser: %+v, %v\n%s", got, err, text)
		}
	}
}
