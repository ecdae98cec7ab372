package server_test

import (
	"net/http"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// TestA2A: the relay serves the A2A card of an agent that opted in,
// behind the API's tokens, and none for the others (docs/agents.md, "A2A").
func TestA2A(t *testing.T) {
	s, err := server.Open(t.Context(), &server.Options{
		DataDir: t.TempDir(),
		Tokens:  map[string]string{"tok-chatgpt-0123456789": "chatgpt"},
		Agents:  []gateway.Agent{{ID: "claude", A2A: true}, {ID: "chatgpt", Transport: "a2a", Address: "http://127.0.0.1:1/"}},
	})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer shutdown(t, s)
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/a2a/claude/.well-known/agent-card.json", "tok-chatgpt-0123456789", 200},
		{"/a2a/claude/.well-known/agent-card.json", "", 401},
		{"/a2a/chatgpt/.well-known/agent-card.json", "tok-chatgpt-0123456789", 404},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (token %q) = %d, want %d", tc.path, tc.token, resp.StatusCode, tc.want)
		}
	}
}
