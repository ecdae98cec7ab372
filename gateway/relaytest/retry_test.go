package relaytest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// dresses are the forms chat UIs and mail give one envelope. Every dress
// of an envelope has the same de-duplication key (docs/design.md §3.1, §5.3).
var dresses = []struct {
	name string
	wear func(text string) string
}{
	{"plain", func(s string) string { return s }},
	{"crlf", func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }},
	{"lone-cr", func(s string) string { return strings.ReplaceAll(s, "\n", "\r") }},
	{"fenced", func(s string) string { return "Here it is:\n\n```text\n" + s + "```\n\nAnything else?\n" }},
	{"quoted", func(s string) string {
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		for i, l := range lines {
			if l == "" {
				lines[i] = ">"
			} else {
				lines[i] = "> " + l
			}
		}
		return "On Monday you wrote:\n" + strings.Join(lines, "\n") + "\nThanks!\n"
	}},
	{"noise-and-bom", func(s string) string { return "\ufeffchat text before\n\n" + s + "\nchat text after\n" }},
}

// retryEnvelopes are the envelopes sent again and again: v1.1 with ids,
// and v1.0 without a message id (de-duplicated by payload hash).
func retryEnvelopes() map[string]string {
	return map[string]string{
		"v1.1": envText("CHATGPT", "CLAUDE", "REQUEST", "retry", "Please review\nthe release notes.", func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}}}}
		}),
		"v1.1-handoff":  envText("CLAUDE", "GEMINI", "HANDOFF", "retry", "Over to you."),
		"v1.0-response": "[[CHATGPT→CLAUDE v1]]\nuser: kalle\nsession: 2025-10-09T16Z abc123\ncontext: retry\nresponse: |\n  Here is my answer.\n  Second line.\nsig: none\n[[END]]\n",
		"v1.0-question": "[[CLAUDE→CHATGPT v1]]\nuser: kalle\nsession: 2025-10-09T16Z abc123\ncontext: retry\nintent: QUESTION\n\nbody: |\n  Did the build pass?\nsig: none\n[[END]]\n",
	}
}

// TestRetries sends every envelope three times one after the other and
// three times at once, in every dress: each envelope is one event, and
// every answer names that event.
func TestRetries(t *testing.T) {
	r := newRelay(t, nil, nil)
	for name, text := range retryEnvelopes() {
		t.Run(name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				results []api.Result
			)
			post := func(dress, body string) {
				res := r.do(request{path: "/crosstalk/receive", body: []byte(body), header: http.Header{"Accept": {"application/json"}}})
				var out struct{ Results []api.Result }
				if err := json.Unmarshal(res.body, &out); res.status != http.StatusOK || err != nil || len(out.Results) != 1 {
					t.Errorf("POST %s (%s) = %d %s, want 200 with one result", name, dress, res.status, res.body)
					return
				}
				mu.Lock()
				results = append(results, out.Results[0])
				mu.Unlock()
			}
			for _, d := range dresses {
				for range 3 {
					post(d.name, d.wear(text))
				}
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, d := range dresses {
				for range 3 {
					wg.Go(func() {
						<-start
						post(d.name, d.wear(text))
					})
				}
			}
			close(start)
			wg.Wait()

			if want := 2 * 3 * len(dresses); len(results) != want {
				t.Fatalf("%d answers, want %d", len(results), want)
			}
			fresh := 0
			for _, res := range results {
				if res.EventID != results[0].EventID || res.Seq != results[0].Seq || res.Message != results[0].Message {
					t.Errorf("answer = event %s seq %d message %s, want event %s seq %d message %s (the first)",
						res.EventID, res.Seq, res.Message, results[0].EventID, results[0].Seq, results[0].Message)
				}
				if !res.Duplicate {
					fresh++
				}
			}
			if fresh != 1 {
				t.Errorf("%d answers were not duplicates, want exactly 1", fresh)
			}
		})
	}
	// One event per envelope, seq dense.
	evs, err := r.store.Range(t.Context(), "retry", 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(retryEnvelopes()) {
		t.Errorf("events in group retry = %d %v, want %d", len(evs), kinds(evs), len(retryEnvelopes()))
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d seq = %d, want %d", i, ev.Seq, i+1)
		}
	}
	if all := r.events(); len(all) != len(evs) {
		t.Errorf("events in the ledger = %d %v, want only the %d of group retry", len(all), kinds(all), len(evs))
	}
}

// TestRetriesV10Variants checks that v1.0 envelopes without a message id
// that differ in content are not merged: the payload hash is the key, not
// the sender or the session.
func TestRetriesV10Variants(t *testing.T) {
	r := newRelay(t, nil, nil)
	base := retryEnvelopes()["v1.0-response"]
	texts := []string{
		base,
		strings.Replace(base, "Here is my answer.", "Here is my other answer.", 1),
		strings.Replace(base, "abc123", "abc124", 1),
	}
	ids := map[string]bool{}
	for _, text := range texts {
		res := r.post("", text)
		if res.Duplicate {
			t.Errorf("POST of a distinct v1.0 envelope = duplicate of %s, want a new event", res.EventID)
		}
		ids[res.EventID] = true
	}
	if len(ids) != len(texts) {
		t.Errorf("%d distinct events for %d distinct envelopes", len(ids), len(texts))
	}
}

// flakyFront stands before a relay and breaks the first try of every
// request: either the relay records the envelope and the answer is lost
// (the connection is closed), or the relay is not reached and the answer
// is 503.
type flakyFront struct {
	relay    http.Handler
	loseAck  bool
	mu       sync.Mutex
	attempts map[string]int
}

func (f *flakyFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.attempts[key]++
	n := f.attempts[key]
	f.mu.Unlock()
	if n > 1 {
		f.relay.ServeHTTP(w, r)
		return
	}
	if !f.loseAck {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "relay restarting", http.StatusServiceUnavailable)
		return
	}
	f.relay.ServeHTTP(httptest.NewRecorder(), r) // recorded, and the answer lost:
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// TestRetriesHTTPClient posts through transports/httpx to a relay whose
// first answers are lost: the client retries with the same
// Idempotency-Key, and the envelope is one event.
func TestRetriesHTTPClient(t *testing.T) {
	for _, loseAck := range []bool{true, false} {
		name := "503"
		if loseAck {
			name = "lost-answer"
		}
		t.Run(name, func(t *testing.T) {
			r := newRelay(t, nil, nil)
			front := httptest.NewServer(&flakyFront{relay: r.srv.Config.Handler, loseAck: loseAck, attempts: map[string]int{}})
			defer front.Close()
			c := &httpx.Client{HTTP: front.Client(), Retries: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
			text := envText("CHATGPT", "CLAUDE", "REQUEST", "httpx", "sent once, delivered once")
			res, err := c.Post(t.Context(), front.URL+"/crosstalk/receive", []byte(text), "")
			if err != nil {
				t.Fatalf("Post() = %v", err)
			}
			if res.Attempts != 2 || len(res.Envelopes) != 1 || res.Envelopes[0].Intent != envelope.IntentAck {
				t.Fatalf("Post() = %d attempts, receipts %v, want 2 attempts and one ACK", res.Attempts, res.Envelopes)
			}
			dup, _ := res.Envelopes[0].MetaValue("receipt", "Duplicate")
			if want := map[bool]string{true: "true", false: "false"}[loseAck]; dup != want {
				t.Errorf("receipt Duplicate = %s, want %s", dup, want)
			}
			evs := r.events()
			if len(evs) != 1 || evs[0].Kind != gateway.KindMessage {
				t.Errorf("ledger = %v, want one chat.message", kinds(evs))
			}
		})
	}
}
