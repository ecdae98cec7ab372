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
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// TestIdempotencyKeys: the relay records an Idempotency-Key of at most
// 255 printable ASCII characters as it is, and any other as "sha256:" and
// its hash (httpx.HeaderKey), so that no header makes every event of its
// request carry kilobytes or bytes that are not text; the client sends
// any key in that form, which HTTP clients can send.
func TestIdempotencyKeys(t *testing.T) {
	r := testrelay.Start(t, nil)
	recorded := func(id string) string {
		t.Helper()
		ev, err := r.Store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var d gateway.EventData
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.X == nil {
			t.Fatalf("event %s: %v", id, err)
		}
		return d.X.IdempotencyKey
	}
	type results struct {
		Results []struct {
			EventID string `json:"event_id"`
		}
	}
	for i, key := range []string{"9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", "c2a:my key 1", strings.Repeat("k", 256), "c2a:clé", strings.Repeat("é", 30000)} {
		want := key
		if i >= 2 {
			want = httpx.HeaderKey(key)
			if !strings.HasPrefix(want, "sha256:") || len(want) != 71 {
				t.Fatalf("HeaderKey(%.20q) = %q", key, want)
			}
		}
		text := testrelay.Envelope("CLAUDE", "CHATGPT", "REQUEST", "keys", "raw "+key[:min(len(key), 40)])
		req, _ := http.NewRequestWithContext(t.Context(), "POST", r.URL+"/crosstalk/receive", strings.NewReader(text))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out results
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || len(out.Results) != 1 {
			t.Fatalf("POST with Idempotency-Key %.20q = %d, %v", key, res.StatusCode, err)
		}
		if got := recorded(out.Results[0].EventID); got != want {
			t.Errorf("Idempotency-Key %.20q recorded as %.80q, want %.80q", key, got, want)
		}

		out = results{}
		c := &client.Client{URL: r.URL}
		if err := c.Do(context.Background(), client.Request{Method: "POST", Path: "/crosstalk/receive",
			Body:        []byte(testrelay.Envelope("CLAUDE", "CHATGPT", "REQUEST", "keys", "client "+key[:min(len(key), 40)])),
			ContentType: "text/plain; charset=utf-8", IdempotencyKey: key + "\n"}, &out); err != nil || len(out.Results) != 1 {
			t.Fatalf("client with key %.20q: %v, %+v", key, err, out)
		}
		if got := recorded(out.Results[0].EventID); got != httpx.HeaderKey(key+"\n") {
			t.Errorf("client's key %.20q recorded as %.80q", key, got)
		}
	}
}
