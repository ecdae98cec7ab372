package httpx

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// TestAnswerWithoutEnvelope: a receiver acknowledges with envelopes — one
// receipt per envelope sent (docs/transports.md), or the spec's answer
// envelope — so a 2xx whose body holds none is not a delivery: a captive
// portal's login page, a web server at a mistyped URL, a 204. Such an
// answer fails (retried: a captive portal goes away) with an error that
// says what came back, instead of counting the envelope delivered while
// nobody received it. A 2xx carrying an envelope (200, or 202) is a
// delivery.
func TestAnswerWithoutEnvelope(t *testing.T) {
	ack := envelope.New("RELAY", "CLAUDE", envelope.IntentAck, "recorded")
	ack.Parent = "01M80ZE85N0YRPSJ6Z7H0NVPCX"
	b, err := envelope.Marshal(ack)
	if err != nil {
		t.Fatal(err)
	}
	receipt := string(b)
	for _, c := range []struct {
		name        string
		status      int
		ctype, body string
		ok          bool
	}{
		{"200 receipt", 200, "text/plain; charset=utf-8", receipt, true},
		{"202 receipt", 202, "text/plain; charset=utf-8", receipt, true},
		{"200 captive portal", 200, "text/html", "<html><body>Please log in to the hotel Wi-Fi</body></html>", false},
		{"200 empty", 200, "text/plain", "", false},
		{"204", 204, "", "", false},
		{"200 JSON", 200, "application/json", `{"ok":true}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.ctype != "" {
					w.Header().Set("Content-Type", c.ctype)
				}
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer rcv.Close()
			cl := &Client{Retries: -1}
			resp, err := cl.Post(context.Background(), rcv.URL+"/crosstalk/receive", []byte("text"), "")
			if c.ok {
				if err != nil || !resp.OK() {
					t.Fatalf("Post = %+v, %v; want delivered", resp, err)
				}
				return
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Status != c.status || resp == nil || resp.OK() {
				t.Fatalf("Post = %+v, %v; want a StatusError %d", resp, err, c.status)
			}
			if !strings.Contains(err.Error(), "no envelope") {
				t.Errorf("error %q does not say the answer held no envelope", err)
			}
			if c.ctype != "" && !strings.Contains(err.Error(), c.ctype) {
				t.Errorf("error %q does not name the answer's Content-Type", err)
			}
			err = Sender{Client: cl}.Send(context.Background(), rcv.URL+"/crosstalk/receive", "01M80ZE85N0YRPSJ6Z7H0NVPCX", []byte("text"))
			if err == nil || errors.Is(err, transports.ErrPermanent) {
				t.Errorf("Send = %v, want a retryable error", err)
			}
		})
	}
}
