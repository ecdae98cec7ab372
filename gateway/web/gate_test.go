package web_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

var (
	scriptTags  = regexp.MustCompile(`(?is)<script\b[^>]*>`)
	inlineEvent = regexp.MustCompile(`(?i)<[^>]*\son[a-z]+\s*=`)
	styleAttr   = regexp.MustCompile(`(?i)<[^>]*\sstyle\s*=`)
)

// TestHeadersOnEveryResponse: every page — found or not, refused or not,
// a redirect, the login form, a stream — carries the headers that keep
// it from running another script, being framed, sniffed, cached or
// leaking its URL, and holds no inline script, handler or style the CSP
// would have to allow; the static files are served with their types and
// nosniff.
func TestHeadersOnEveryResponse(t *testing.T) {
	h := newHarness(t, nil)
	outs := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "hdr", "hello"))
	thread := outs[0].Envelope.Thread
	csrf := h.csrf()
	post := func(path string, form url.Values) (*http.Response, string) {
		return h.do(h.client, http.MethodPost, path, strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	}
	check := func(what string, res *http.Response, body string) {
		t.Helper()
		hd := res.Header
		csp := hd.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", what, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q allows unsafe sources", what, csp)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
			if got := hd.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", what, k, got, v)
			}
		}
		for _, tag := range scriptTags.FindAllString(body, -1) {
			if !strings.Contains(tag, `src="/ui/static/`) {
				t.Errorf("%s: inline script %q", what, tag)
			}
		}
		if m := inlineEvent.FindString(body); m != "" {
			t.Errorf("%s: inline event handler in %q", what, m)
		}
		if m := styleAttr.FindString(body); m != "" {
			t.Errorf("%s: style attribute the CSP refuses in %q", what, m)
		}
	}
	for _, p := range []string{"/", "/ui/groups/hdr", "/ui/groups/hdr/threads/" + thread, "/ui/groups/hdr?before=x", "/ui/agents", "/ui/agents/claude",
		"/ui/reservations", "/ui/handoffs", "/ui/paste", "/ui/compose", "/ui/compose?reply=" + outs[0].Event.ID, "/ui/trust", "/ui/nothing", "/ui/events/nothing",
		"/ui/events/" + outs[0].Event.ID, "/ui/agents?agent=claude"} {
		res, body := h.do(h.client, http.MethodGet, p, nil)
		check("GET "+p, res, body)
	}
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/ui/paste", url.Values{"op": {"preview"}, "text": {"x"}}},
		{"/ui/paste", url.Values{"op": {"preview"}, "text": {"x"}, "csrf": {csrf}}},
		{"/ui/viewas", url.Values{"agent": {"claude"}, "back": {"/"}, "csrf": {csrf}}},
		{"/ui/groups/hdr/read", url.Values{"csrf": {csrf}}},
		{"/ui/trust/nothing", url.Values{"csrf": {csrf}}},
	} {
		res, body := post(tc.path, tc.form)
		check("POST "+tc.path, res, body)
	}
	res, body := h.do(h.newClient(), http.MethodGet, "/ui/agents", nil, "Sec-Fetch-Site", "cross-site")
	check("cross-site GET", res, body)

	lh := newHarness(t, &harnessOptions{tokens: map[string]string{"claude-token-0123456789": "claude"}})
	res, body = lh.do(lh.client, http.MethodGet, "/ui/agents/claude", nil)
	check("login form", res, body)
	res, body = lh.post("/ui/login", url.Values{"token": {"wrong-token-0123456789"}})
	check("failed login", res, body)

	for _, tc := range []struct{ path, ctype string }{{"/ui/static/app.js", "text/javascript; charset=utf-8"}, {"/ui/static/style.css", "text/css; charset=utf-8"}} {
		res, _ := h.do(h.client, http.MethodGet, tc.path, nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tc.ctype || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s = %d %q nosniff %q", tc.path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"))
		}
	}
}

// TestStateChangesNeedCSRFPost tries every state-changing form of the
// pages without the CSRF token, with another session's, and as a GET (and
// other methods): each is refused and changes nothing — no ledger event,
// no trust change, no token, no session change.
func TestStateChangesNeedCSRFPost(t *testing.T) {
	store := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	h := newHarness(t, &harnessOptions{minted: store})
	outs := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "take over"))
	ev := outs[0].Event
	other := h.newClient()
	_, page := h.do(other, http.MethodGet, "/ui/paste", nil)
	otherCSRF := csrfMeta.FindStringSubmatch(page)[1]
	h.csrf()
	text := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "ops", "forged")
	forms := []struct {
		path string
		form url.Values
	}{
		{"/ui/paste", url.Values{"op": {"send"}, "text": {text}}},
		{"/ui/groups/ops/read", url.Values{}},
		{"/ui/agents/claude/act", url.Values{"action": {"ack"}, "group": {"ops"}, "event": {ev.ID}}},
		{"/ui/agents/claude/act", url.Values{"action": {"claim"}, "group": {"ops"}, "event": {ev.ID}}},
		{"/ui/agents/chatgpt/act", url.Values{"action": {"discharge"}, "group": {"ops"}, "event": {ev.ID}}},
		{"/ui/trust/token", url.Values{}},
		{"/ui/trust/revoke", url.Values{"pkid": {"k@example.com"}, "confirm": {"yes"}}},
		{"/ui/viewas", url.Values{"agent": {"chatgpt"}, "back": {"/"}}},
		{"/ui/logout", url.Values{}},
	}
	before := len(h.events("ops"))
	for _, f := range forms {
		for _, tc := range []struct {
			name, method, csrf string
		}{
			{"no token", http.MethodPost, ""},
			{"another session's token", http.MethodPost, otherCSRF},
			{"GET", http.MethodGet, ""},
			{"PUT", http.MethodPut, ""},
			{"DELETE", http.MethodDelete, ""},
		} {
			form := url.Values{}
			for k, v := range f.form {
				form[k] = v
			}
			if tc.csrf != "" {
				form.Set("csrf", tc.csrf)
			}
			path := f.path
			var res *http.Response
			var body string
			if tc.method == http.MethodGet {
				res, body = h.do(h.client, tc.method, path+"?"+form.Encode(), nil)
			} else {
				res, body = h.do(h.client, tc.method, path, strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
			}
			// A GET may answer a page (GET /ui/paste is the paste box);
			// it must change nothing, checked below.
			if tc.method != http.MethodGet && res.StatusCode < 400 {
				t.Errorf("%s %s (%s) = %d, want refused\n%s", tc.method, path, tc.name, res.StatusCode, body)
			}
		}
	}
	if n := len(h.events("ops")); n != before {
		t.Errorf("refused forms recorded %d events", n-before)
	}
	if list, _ := store.List(); len(list) != 0 {
		t.Errorf("refused forms minted %d tokens", len(list))
	}
	// The session survived (logout refused) and still views as the local user.
	if _, body := h.get("/"); !strings.Contains(body, `name="agent" list="agent-names" value="user"`) {
		t.Errorf("a refused form changed the session's viewer or ended it")
	}
}

// TestSessionEndsServerSide: logging out, or logging in, ends the old
// session id on the relay, not only in the browser: a copy of the cookie
// replayed later is a stranger's. So a session id planted before the
// login (fixation) is never logged in.
func TestSessionEndsServerSide(t *testing.T) {
	h := newHarness(t, &harnessOptions{tokens: map[string]string{"claude-token-0123456789": "claude"}})
	cookie := func() string {
		cs := h.client.Jar.Cookies(mustURL(t, h.srv.URL))
		if len(cs) != 1 {
			t.Fatalf("cookies = %v, want one", cs)
		}
		return cs[0].Value
	}
	replay := func(id string) int {
		res, _ := h.do(h.newClient(), http.MethodGet, "/ui/agents/claude", nil, "Cookie", "crosstalk_session="+id)
		return res.StatusCode
	}
	h.get("/ui/agents/claude")
	planted := cookie()
	if res, _ := h.post("/ui/login", url.Values{"token": {"claude-token-0123456789"}, "next": {"/"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d", res.StatusCode)
	}
	loggedIn := cookie()
	if code := replay(planted); code != http.StatusUnauthorized {
		t.Errorf("the session id from before the login = %d, want 401", code)
	}
	if code := replay(loggedIn); code != http.StatusOK {
		t.Fatalf("the logged-in session id = %d, want 200", code)
	}
	if res, _ := h.post("/ui/logout", url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d", res.StatusCode)
	}
	if code := replay(loggedIn); code != http.StatusUnauthorized {
		t.Errorf("the session id replayed after logout = %d, want 401", code)
	}
}

// TestSecureCookieBehindProxy: with web.Options.Secure (a TLS-terminating
// proxy in front) the session cookie is Secure on plain HTTP too, the
// login's new one and the logout's clearing one alike.
func TestSecureCookieBehindProxy(t *testing.T) {
	h := newHarness(t, &harnessOptions{secure: true, tokens: map[string]string{"claude-token-0123456789": "claude"}})
	res, _ := h.do(h.client, http.MethodGet, "/", nil)
	login, _ := h.post("/ui/login", url.Values{"token": {"claude-token-0123456789"}, "next": {"/"}})
	if login.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", login.StatusCode)
	}
	logout, _ := h.post("/ui/logout", url.Values{})
	if logout.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d, want 303", logout.StatusCode)
	}
	for name, r := range map[string]*http.Response{"first page": res, "login": login, "logout": logout} {
		var c *http.Cookie
		for _, ck := range r.Cookies() {
			if ck.Name == "crosstalk_session" {
				c = ck
			}
		}
		if c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Errorf("%s: session cookie %+v, want Secure, HttpOnly, SameSite=Strict, Path=/", name, c)
		}
	}
}
