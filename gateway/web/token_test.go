package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

var mintedToken = regexp.MustCompile(`<pre id="minted-token">([^<]+)</pre>`)

// TestMintToken: the trust page's button mints a token for the browser
// extension, shown once; it works on the API at once, from an extension's
// origin too; without the CSRF token, or for a principal that is not an
// admin, nothing is minted.
func TestMintToken(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	h := newHarness(t, &harnessOptions{minted: store})
	_, page := h.get("/ui/trust")
	mustContain(t, "trust page", page, `action="/ui/trust/token"`, "Mint a token for the extension")

	res, _ := h.post("/ui/trust/token", url.Values{"csrf": {"wrong"}})
	if list, _ := store.List(); res.StatusCode != http.StatusForbidden || len(list) != 0 {
		t.Fatalf("mint without the CSRF token = %d, %d tokens", res.StatusCode, len(list))
	}
	res, body := h.post("/ui/trust/token", url.Values{})
	m := mintedToken.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("mint = %d %q:\n%s", res.StatusCode, res.Header.Get("Cache-Control"), body)
	}
	secret := html.UnescapeString(m[1])
	if p, ok := store.Lookup(secret); !ok || p != api.LocalUser {
		t.Fatalf("minted token: Lookup = %q, %v", p, ok)
	}
	res, _ = h.do(h.newClient(), http.MethodGet, "/v1/groups", nil, "Origin", "chrome-extension://abcdefghijklmnopabcdefghijklmnop", "Authorization", "Bearer "+secret)
	if res.StatusCode != http.StatusOK {
		t.Errorf("the minted token on the API = %d", res.StatusCode)
	}

	// With configured tokens, only admins see and use the button.
	h2 := newHarness(t, &harnessOptions{tokens: map[string]string{"claude-token-0123456789": "claude"}, minted: store})
	_, page = h2.do(h2.newClient(), http.MethodGet, "/ui/trust", nil, "Authorization", "Bearer claude-token-0123456789")
	mustNotContain(t, "trust page of a non-admin", page, `action="/ui/trust/token"`)
	res, _ = h2.do(h2.newClient(), http.MethodPost, "/ui/trust/token", nil, "Authorization", "Bearer claude-token-0123456789")
	if list, _ := store.List(); res.StatusCode != http.StatusForbidden || len(list) != 1 {
		t.Errorf("mint by a non-admin = %d, %d tokens", res.StatusCode, len(list))
	}
}

// TestRevokedTokenEndsSession: a session logged in with a minted token
// ends when the token is revoked (docs/web.md "Tokens": a revoked token
// stops working at once) — it must not outlive the token for the twelve
// hours a session lasts after its last use.
func TestRevokedTokenEndsSession(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	secret, tok, err := store.New("claude")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &harnessOptions{tokens: map[string]string{"chatgpt-token-0123456789": "chatgpt"}, minted: store})
	h.get("/ui/agents/claude") // the login form, and a session for it
	res, _ := h.post("/ui/login", url.Values{"token": {secret}, "next": {"/ui/agents/claude"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", res.StatusCode)
	}
	if code, _ := h.get("/ui/agents/claude"); code != http.StatusOK {
		t.Fatalf("GET after login = %d, want 200", code)
	}
	// A live page's stream, opened by the session, ends with the token too.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/ui/groups/ops/stream", nil)
	stream, err := h.client.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET the group's stream = %v, %v; want 200", stream, err)
	}
	defer stream.Body.Close()
	if _, err := store.Revoke(tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, stream.Body); err != nil || ctx.Err() != nil {
		t.Errorf("the session's stream after the token was revoked: %v (context %v), want it ended by the relay", err, ctx.Err())
	}
	if code, body := h.get("/ui/agents/claude"); code != http.StatusUnauthorized || !regexp.MustCompile(`action="/ui/login"`).MatchString(body) {
		t.Errorf("GET after the token was revoked = %d, want 401 and the login form", code)
	}
	res, body := h.post("/ui/agents/claude/act", url.Values{"action": {"ack"}, "group": {"ops"}, "event": {"x"}})
	if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusForbidden {
		t.Errorf("POST after the token was revoked = %d, want it refused\n%s", res.StatusCode, body)
	}
}
