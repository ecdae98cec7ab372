package main

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelayA2A: `crosstalk relay` serves the A2A card of an agent with
// a2a = true, behind the API's tokens, and none for the others.
func TestRelayA2A(t *testing.T) {
	dir := t.TempDir()
	cfg, err := decodeConfig("test.toml", []byte(`
listen = "127.0.0.1:0"
log_level = "error"
[[tokens]]
token = "tok-chatgpt-0123456789"
principal = "chatgpt"
[[agents]]
id = "claude"
a2a = true
[[agents]]
id = "chatgpt"
transport = "a2a"
address = "http://127.0.0.1:1/"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.TrustFile = dir, filepath.Join(dir, "known_keys")
	cfg.Folder.Disabled = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := startRelay(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer r.shutdown()
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/a2a/claude/.well-known/agent-card.json", "tok-chatgpt-0123456789", 200},
		{"/a2a/claude/.well-known/agent-card.json", "", 401},
		{"/a2a/chatgpt/.well-known/agent-card.json", "tok-chatgpt-0123456789", 404},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, r.url+tc.path, nil)
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

// TestConfigA2ATransport: transport a2a needs an http(s) URL.
func TestConfigA2ATransport(t *testing.T) {
	for address, ok := range map[string]bool{
		"https://agent.example.org/":                        true,
		"http://127.0.0.1:9999/.well-known/agent-card.json": true,
		"":                         false,
		"agent.example.org":        false,
		"ftp://agent.example.org/": false,
	} {
		cfg := DefaultConfig()
		cfg.Agents = []AgentConfig{{ID: "remote", Transport: "a2a", Address: address}}
		err := cfg.Validate()
		if (err == nil) != ok {
			t.Errorf("Validate() with address %q = %v, want ok %v", address, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "remote") {
			t.Errorf("Validate() = %v, want the agent named", err)
		}
	}
}
