package server_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

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
