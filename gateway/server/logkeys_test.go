package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// syncBuffer is a bytes.Buffer that the relay's goroutines may write
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogComponentOnce: every log line names the part that wrote it with
// one component key (docs/operations.md "Logs"). The relay's parts logged
// component=relay component=liveness (and outbound, returns), the delivery
// channel component=api component=channel, which a logfmt reader takes as
// two values of one key.
func TestLogComponentOnce(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := server.Open(t.Context(), &server.Options{DataDir: t.TempDir(), Logger: log,
		Agents: []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?"))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, s.URL(), string(b)); code != http.StatusOK {
		t.Fatalf("POST = %d %q", code, body)
	}
	res, err := http.Post(s.URL()+"/v1/agents/chatgpt/heartbeat", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	// The delivery channel logs each delivery at debug.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL(), "http")+"/v1/agents/chatgpt/channel", nil)
	if err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocolVersion":"2026-06-02","clientInfo":{"name":"t","version":"1"},"capabilities":{}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
		t.Fatal(err)
	}
	for {
		_, m, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("no chat/deliver on the channel: %v", err)
		}
		if strings.Contains(string(m), `"chat/deliver"`) {
			break
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	shutdown(t, s)

	want := map[string]string{`msg="envelope recorded"`: "relay", `msg="liveness transition"`: "liveness", `msg=delivering`: "channel"}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if n := strings.Count(line, " component="); n > 1 {
			t.Errorf("%d component keys: %s", n, line)
		}
		for msg, comp := range want {
			if strings.Contains(line, msg+" ") {
				seen[msg] = true
				if !strings.Contains(line, " component="+comp+" ") && !strings.HasSuffix(line, " component="+comp) {
					t.Errorf("want component=%s: %s", comp, line)
				}
			}
		}
	}
	for msg := range want {
		if !seen[msg] {
			t.Errorf("no %s line logged", msg)
		}
	}
}
