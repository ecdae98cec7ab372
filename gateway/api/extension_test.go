package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

// TestExtensionOrigins: a browser extension's requests (Origin
// chrome-extension:// or moz-extension://) pass the cross-origin check
// only with a valid bearer token — configured or minted — and are refused
// without one, reads included; other foreign origins stay refused even
// with a token. A minted token for the local user keeps the local user's
// powers on a relay without configured tokens, token-less loopback use
// keeps working, and a token minted after the start counts at once.
func TestExtensionOrigins(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	local, _, err := store.New(api.LocalUser)
	if err != nil {
		t.Fatal(err)
	}
	claude, _, err := store.New("claude")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &api.Options{Minted: store})
	const chrome, firefox = "chrome-extension://abcdefghijklmnopabcdefghijklmnop", "moz-extension://0b7f9e0c-6c1e-4d8a-9a57-1b2c3d4e5f60"
	msg := func(from, to, body string) string { return env(from, to, "REQUEST", "ext", body) }
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		header []string
		want   int
	}{
		{"chrome extension with a minted local token", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "a"), []string{"Origin", chrome, "Sec-Fetch-Site", "none", "Authorization", "Bearer " + local}, 200},
		{"firefox extension with a minted local token", "POST", "/crosstalk/receive", msg("CHATGPT", "CLAUDE", "b"), []string{"Origin", firefox, "Authorization", "Bearer " + local}, 200},
		{"extension, token, cross-site fetch", "POST", "/crosstalk/receive", msg("GEMINI", "CLAUDE", "c"), []string{"Origin", chrome, "Sec-Fetch-Site", "cross-site", "Authorization", "Bearer " + local}, 200},
		{"extension without a token", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "d"), []string{"Origin", chrome}, 403},
		{"extension with a wrong token", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "e"), []string{"Origin", chrome, "Authorization", "Bearer " + local + "x"}, 403},
		{"extension reading without a token", "GET", "/v1/groups", "", []string{"Origin", firefox}, 403},
		{"extension reading with a token", "GET", "/v1/agents/chatgpt/deliveries", "", []string{"Origin", firefox, "Authorization", "Bearer " + local}, 200},
		{"web page with a valid token", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "f"), []string{"Origin", "https://evil.example", "Authorization", "Bearer " + local}, 403},
		{"lookalike extension origin", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "g"), []string{"Origin", "https://chrome-extension.example", "Authorization", "Bearer " + local}, 403},
		{"cross-site fetch with a token, no Origin", "POST", "/crosstalk/receive", msg("CLAUDE", "CHATGPT", "h"), []string{"Sec-Fetch-Site", "cross-site", "Authorization", "Bearer " + local}, 403},
		{"loopback CLI without a token", "POST", "/crosstalk/receive", msg("CLAUDE", "GEMINI", "i"), nil, 200},
		{"minted token of another principal sends as itself", "POST", "/crosstalk/receive", msg("CLAUDE", "GEMINI", "j"), []string{"Origin", chrome, "Authorization", "Bearer " + claude}, 200},
		{"minted token of another principal, as someone else", "POST", "/crosstalk/receive", msg("CHATGPT", "GEMINI", "k"), []string{"Origin", chrome, "Authorization", "Bearer " + claude}, 403},
		{"minted token of another principal reads another queue", "GET", "/v1/agents/chatgpt/deliveries", "", []string{"Authorization", "Bearer " + claude}, 403},
		{"local token reads any queue", "GET", "/v1/agents/gemini/deliveries", "", []string{"Authorization", "Bearer " + local}, 200},
		{"unknown token without configured tokens", "GET", "/v1/groups", "", []string{"Authorization", "Bearer ctk_revoked"}, 401},
		{"healthz needs no token", "GET", "/healthz", "", []string{"Authorization", "Bearer ctk_revoked"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := append([]string{"Accept", "application/json"}, tc.header...)
			status, body := h.do(tc.method, tc.path, tc.body, header...)
			if status != tc.want {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, status, body, tc.want)
			}
			if status >= 400 && !strings.Contains(string(body), "E-PERM") && !strings.Contains(string(body), "permission") {
				t.Errorf("refusal body = %s", body)
			}
		})
	}

	// Minted while the relay runs: accepted at once; revoked: refused at once.
	late, tok, err := tokens.Open(store.Path()).New(api.LocalUser)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := h.do("GET", "/v1/groups", "", "Origin", chrome, "Authorization", "Bearer "+late); status != 200 {
		t.Fatalf("a token minted after the start = %d %s", status, body)
	}
	if _, err := tokens.Open(store.Path()).Revoke(tok.ID); err != nil {
		t.Fatal(err)
	}
	if status, _ := h.do("GET", "/v1/groups", "", "Origin", chrome, "Authorization", "Bearer "+late); status != 403 {
		t.Fatalf("a revoked token = %d, want 403", status)
	}
}

// TestExtensionWithConfiguredTokens: with tokens in the config, minted
// tokens are accepted alongside them, for extensions too.
func TestExtensionWithConfiguredTokens(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	minted, _, err := store.New("chatgpt")
	if err != nil {
		t.Fatal(err)
	}
	opts := &api.Options{Tokens: map[string]string{"config-secret": "claude"}, Minted: store}
	h := newHarness(t, opts)
	const origin = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"config token", []string{"Authorization", "Bearer config-secret"}, 200},
		{"config token from an extension", []string{"Origin", origin, "Authorization", "Bearer config-secret"}, 200},
		{"minted token", []string{"Authorization", "Bearer " + minted}, 200},
		{"no token", nil, 401},
		{"extension without a token", []string{"Origin", origin}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := h.do("GET", "/v1/groups", "", tc.header...); status != tc.want {
				t.Fatalf("GET /v1/groups = %d %s, want %d", status, body, tc.want)
			}
		})
	}
	a := api.New(h.relay, opts)
	defer a.Close()
	if p, ok := a.TokenPrincipal(minted); !ok || p != "chatgpt" {
		t.Errorf("TokenPrincipal(minted) = %q, %v", p, ok)
	}
}

// TestAgentHintOutsideLatin1: a browser refuses a header value outside
// Latin-1 (fetch throws) and sends a Latin-1 one as its bytes, so the
// extension sends X-Crosstalk-Agent as RFC 8187's percent-encoded
// UTF-8. The relay reads that form, the raw UTF-8 of other clients (the
// Go client, curl) and the Latin-1 bytes of an older extension, and
// refuses a malformed encoding with 400 instead of acting for a garbled
// name.
func TestAgentHintOutsideLatin1(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	local, _, err := store.New(api.LocalUser)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &api.Options{Minted: store}, func(s *api.Server, _ ledger.Store) { s.MountAgents(nil) })
	const chrome = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
	for i, tc := range []struct {
		name, agent, header string
		want                int
	}{
		{"percent-encoded UTF-8", "ÇLAUDE-助手", "UTF-8''%C3%87LAUDE-%E5%8A%A9%E6%89%8B", 200},
		{"percent-encoded, lower-case charset", "ÇLAUDE-助手", "utf-8''%c3%87LAUDE-%e5%8a%a9%e6%89%8b", 200},
		{"percent-encoded NFD", "ÇLAUDE-助手", "UTF-8''C%CC%A7LAUDE-%E5%8A%A9%E6%89%8B", 200},
		{"raw UTF-8 (Go client)", "ÇLAUDE-助手", "ÇLAUDE-助手", 200},
		{"Latin-1 bytes (older extension)", "ÇA-VA", "\xc7A-VA", 200},
		{"plain ASCII", "GEMINI", "GEMINI", 200},
		{"malformed percent-encoding", "ÇLAUDE-助手", "UTF-8''%C3%8", 400},
		{"percent-encoding of invalid UTF-8", "ÇLAUDE-助手", "UTF-8''%C3%28", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := fmt.Sprintf("hint-%d", i)
			res := h.post(env("CHATGPT", tc.agent, "REQUEST", group, "for "+tc.agent))
			path := "/v1/groups/" + group + "/events/" + res.EventID + "/read"
			status, body := h.do("POST", path, "", "Origin", chrome, "Authorization", "Bearer "+local, "X-Crosstalk-Agent", tc.header)
			if status != tc.want {
				t.Fatalf("POST %s with X-Crosstalk-Agent %q = %d %s, want %d", path, tc.header, status, body, tc.want)
			}
			var cur struct{ Cursors map[string]int64 }
			status, body = h.do("GET", "/v1/agents/"+url.PathEscape(tc.agent)+"/cursors", "", "Authorization", "Bearer "+local)
			if err := json.Unmarshal(body, &cur); status != http.StatusOK || err != nil {
				t.Fatalf("GET cursors of %s = %d %s (%v)", tc.agent, status, body, err)
			}
			want := res.Seq
			if tc.want != 200 {
				want = 0
			}
			if cur.Cursors[group] != want {
				t.Errorf("%s's read cursor in %s = %d, want %d (cursors %v)", tc.agent, group, cur.Cursors[group], want, cur.Cursors)
			}
		})
	}
	// The envelope endpoint answers a malformed hint with an ERROR envelope.
	status, body := h.do("POST", "/crosstalk/receive", env("CHATGPT", "GEMINI", "REQUEST", "hint-env", "x"), "X-Crosstalk-Agent", "UTF-8''%ZZ")
	if e, err := envelope.Unmarshal(body); status != http.StatusBadRequest || err != nil || e.Intent != envelope.IntentError {
		t.Errorf("POST /crosstalk/receive with a malformed X-Crosstalk-Agent = %d %s (%v), want 400 and an ERROR envelope", status, body, err)
	}
}
