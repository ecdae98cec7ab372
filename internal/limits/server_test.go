package limits

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// TestServerWiresLimits starts the relay as `crosstalk relay` assembles it
// (gateway/server) with small bounds, and checks that each reaches the
// running relay: max_envelopes, stream_limit and read_timeout.
func TestServerWiresLimits(t *testing.T) {
	opts := &server.Options{
		DataDir:      t.TempDir(),
		Agents:       []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}},
		Tokens:       map[string]string{tokens["claude"]: "claude", tokens["chatgpt"]: "chatgpt"},
		MaxEnvelopes: 2, StreamLimit: 1, MaxStreams: 4,
		Timeouts: api.Timeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond},
	}
	srv, err := server.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("server.Open() = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		srv.Shutdown(ctx)
	})
	addr := srv.URL()[len("http://"):]
	r := &relay{t: t, url: srv.URL(), addr: addr, store: srv.Store(), relay: srv.Relay()}

	if status, code := r.post("chatgpt", envelopes(t, 3, nil)); status != http.StatusRequestEntityTooLarge || code != "E-TOO-LARGE" {
		t.Errorf("POST of 3 envelopes with max_envelopes 2 = %d %q, want 413 E-TOO-LARGE", status, code)
	}
	if n := r.count(); n != 0 {
		t.Errorf("ledger holds %d events, want 0", n)
	}
	if _, status, _ := r.open("claude", "/v1/agents/claude/stream"); status != http.StatusOK {
		t.Fatalf("first stream = %d, want 200", status)
	}
	if _, status, code := r.open("claude", "/v1/agents/claude/stream"); status != http.StatusTooManyRequests || code != "E-RATE" {
		t.Errorf("second stream with stream_limit 1 = %d %q, want 429 E-RATE", status, code)
	}
	c := rawConn(t, r, "POST /crosstalk/receive HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 100\r\n\r\n")
	closedByRelay(t, c)
}
