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
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 3); len(evs) != 3 {
		t.Fatalf("delivery records = %d, want 3", len(evs))
	}
	if len(old.texts) != 2 || len(cur.texts) != 1 {
		t.Fatalf("old got %d, new got %d envelopes", len(old.texts), len(cur.texts))
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
	for _, text := range old.texts {
		e, err := envelope.Unmarshal([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		got, err := peer.Parse([]byte(text))
		if err != nil || got.From != "GEMINI" || got.Session != e.Session || got.Response != e.Body {
			t.Errorf("v1.0 parser: %+v, %v\n%s", got, err, text)
		}
	}
}
