package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestIdempotencyKeys: the relay records an Idempotency-Key of at most
// 255 printable ASCII characters and refuses others with 400; the client
// sends any key it is given in a form the relay takes, the same form for
// every retry.
func TestIdempotencyKeys(t *testing.T) {
	r := testrelay.Start(t, nil)
	text := testrelay.Envelope("CLAUDE", "CHATGPT", "REQUEST", "keys", "hello")
	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"uuid", "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", http.StatusOK},
		{"with spaces", "c2a:my key 1", http.StatusOK},
		{"too long", strings.Repeat("k", 256), http.StatusBadRequest},
		{"not ASCII", "c2a:clé", http.StatusBadRequest},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", r.URL+"/crosstalk/receive", strings.NewReader(text))
		req.Header.Set("Idempotency-Key", tc.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: POST with Idempotency-Key %q = %d, want %d", tc.name, tc.key, res.StatusCode, tc.status)
		}
	}
	c := &client.Client{URL: r.URL}
	for _, key := range []string{"c2a:clé", strings.Repeat("k", 300), "c2a:plain"} {
		var out struct {
			Results []struct {
				EventID string `json:"event_id"`
			}
		}
		err := c.Do(context.Background(), client.Request{Method: "POST", Path: "/crosstalk/receive", Body: []byte(testrelay.Envelope("CLAUDE", "CHATGPT", "REQUEST", "keys", key)),
			ContentType: "text/plain; charset=utf-8", IdempotencyKey: key}, &out)
		if err != nil || len(out.Results) != 1 {
			t.Fatalf("client with key %.20q: %v, %+v", key, err, out)
		}
		ev, err := r.Store.Get(context.Background(), out.Results[0].EventID)
		if err != nil {
			t.Fatal(err)
		}
		var d gateway.EventData
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.X == nil || d.X.IdempotencyKey == "" || len(d.X.IdempotencyKey) > 255 {
			t.Errorf("key %.20q recorded as %+v (%v)", key, d.X, err)
		}
	}
}
