package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

// TestMintedTokens: the relay accepts the tokens minted in its data dir
// (crosstalk token new), from a browser extension's origin too, and one
// minted while it runs.
func TestMintedTokens(t *testing.T) {
	dir := t.TempDir()
	s, err := server.Open(t.Context(), &server.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer shutdown(t, s)
	secret, _, err := tokens.Open(filepath.Join(dir, tokens.FileName)).New(api.LocalUser)
	if err != nil {
		t.Fatal(err)
	}
	post := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/crosstalk/receive", strings.NewReader("[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  from the extension\n[[END]]\n"))
		req.Header.Set("Origin", "chrome-extension://abcdefghijklmnopabcdefghijklmnop")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(secret); got != http.StatusOK {
		t.Errorf("extension POST with a minted token = %d, want 200", got)
	}
	if got := post(""); got != http.StatusForbidden {
		t.Errorf("extension POST without a token = %d, want 403", got)
	}
}

// TestRevokedTokenEndsStreams: revoking a minted token ends the streams
// opened with it (docs/web.md "Tokens": a revoked token stops working at
// once) — an SSE stream or an agent channel must not go on delivering to
// whoever held it.
func TestRevokedTokenEndsStreams(t *testing.T) {
	dir := t.TempDir()
	s, err := server.Open(t.Context(), &server.Options{
		DataDir: dir, RateLimit: -1, Heartbeat: 50 * time.Millisecond,
		Tokens: map[string]string{"bob-token-0123456789": "bob"},
		Agents: []gateway.Agent{{ID: "alice", Names: []string{"ALICE"}}, {ID: "bob", Names: []string{"BOB"}}},
	})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer shutdown(t, s)
	store := tokens.Open(filepath.Join(dir, tokens.FileName))
	for _, path := range []string{"/v1/groups/ops/stream", "/v1/agents/alice/stream"} {
		t.Run(path, func(t *testing.T) {
			secret, tok, err := store.New("alice")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+path, nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200", path, res.StatusCode)
			}
			br := bufio.NewReader(res.Body)
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			if _, err := store.Revoke(tok.ID); err != nil {
				t.Fatal(err)
			}
			// The stream ends: the body reaches its end (EOF), not the
			// test's deadline.
			_, err = io.Copy(io.Discard, br)
			if err != nil || ctx.Err() != nil {
				t.Errorf("stream after its token was revoked: %v (context %v), want it ended by the relay", err, ctx.Err())
			}
		})
	}
}
