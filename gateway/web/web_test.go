package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/signing"
)

const xssBody = `look: <script>window.__xss=1</script><img src=x onerror="window.__xss=2"> & "quotes"`

func TestPages(t *testing.T) {
	h := newHarness(t, nil)
	req := envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "deploy", "Please review the rollout plan.", func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}}}}
	})
	outs := h.ingest(req)
	orig := outs[0].Envelope
	reply := envelope.NewReply(orig, envelope.IntentRespond, "Looks good.")
	rb, _ := envelope.Marshal(reply)
	h.ingest(string(rb))
	thread := "/ui/groups/deploy/threads/" + orig.Thread

	for _, tc := range []struct {
		path  string
		code  int
		wants []string
	}{
		{"/", 200, []string{"Groups", `href="/ui/groups/deploy"`, "<th scope=\"row\">"}},
		{"/ui/groups/deploy", 200, []string{"Group <bdi>deploy</bdi>", "Please review the rollout plan.", "Looks good.", "↳ reply to", `data-group="deploy"`, "META: routing", "badge plain"}},
		{thread, 200, []string{"Thread", "d1", "copy fenced", "X-Priority"}},
		{"/ui/agents", 200, []string{"claude", "chatgpt", "gemini"}},
		{"/ui/agents/claude", 200, []string{"Agent <bdi>claude</bdi>", "must_respond", "to_me", "immediate", "Claim", "responded"}},
		{"/ui/paste", 200, []string{"Chat text", `name="csrf"`}},
		{"/ui/compose", 200, []string{"Make envelope", "HANDOFF"}},
		{"/ui/compose?reply=" + outs[0].Event.ID, 200, []string{"Reply", `value="CLAUDE"`, `value="CHATGPT"`, `value="` + orig.Message + `"`}},
		{"/ui/trust", 200, []string{"Trust", "No keys pinned yet."}},
		{"/ui/nope", 404, []string{"404 not_found"}},
		{"/ui/groups/none", 404, []string{"no group none"}},
		{"/ui/static/app.js", 200, []string{"EventSource"}},
		{"/ui/static/style.css", 200, []string{"--ok-bg"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, body := h.get(tc.path)
			if code != tc.code {
				t.Errorf("GET %s = %d, want %d\n%s", tc.path, code, tc.code, body)
			}
			mustContain(t, "GET "+tc.path, body, tc.wants...)
		})
	}
	res, _ := h.do(h.client, http.MethodGet, "/", nil)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want script-src 'self'", csp)
	}
	// The API is still there behind the same handler.
	res, body := h.do(h.client, http.MethodGet, "/v1/groups", nil)
	if res.StatusCode != 200 || !strings.Contains(body, `"deploy"`) {
		t.Errorf("GET /v1/groups = %d %s", res.StatusCode, body)
	}
}

func TestBodyIsText(t *testing.T) {
	h := newHarness(t, nil)
	outs := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "xss", xssBody, func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "x<b>", Fields: []envelope.Field{{Key: "K", Value: `<img src=x onerror=alert(1)>`}}}}
	}))
	if !outs[0].Accepted() {
		t.Fatalf("ingest refused: %v", outs[0].Reject)
	}
	for _, path := range []string{"/ui/groups/xss", "/ui/groups/xss/threads/" + outs[0].Envelope.Thread, "/ui/agents/claude"} {
		_, body := h.get(path)
		mustContain(t, path, body, "&lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;")
		mustNotContain(t, path, body, "<script>window", "<img src=x", "<b>")
	}
}

func TestCSRFAndOrigin(t *testing.T) {
	h := newHarness(t, nil)
	text := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "csrf", "should never be recorded")
	form := func(csrf string) url.Values {
		v := url.Values{"op": {"send"}, "text": {text}}
		if csrf != "-" {
			v.Set("csrf", csrf)
		}
		return v
	}
	good := h.csrf()
	other := newHarness(t, nil)
	for _, tc := range []struct {
		name   string
		form   url.Values
		header []string
		code   int
	}{
		{"no token", form("-"), nil, 403},
		{"empty token", form(""), nil, 403},
		{"wrong token", form(good + "x"), nil, 403},
		{"another session's token", form(other.csrf()), nil, 403},
		{"cross-origin", form(good), []string{"Origin", "http://evil.example"}, 403},
		{"cross-site fetch", form(good), []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"null origin", form(good), []string{"Origin", "null"}, 403},
		{"foreign host", form(good), []string{"Host", "evil.example"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.srv.URL+"/ui/paste", strings.NewReader(tc.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			if tc.name == "foreign host" {
				req.Host = "evil.example"
			}
			res, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.code || !strings.Contains(buf.String(), "E-PERM") {
				t.Errorf("POST /ui/paste (%s) = %d, want %d with E-PERM\n%s", tc.name, res.StatusCode, tc.code, buf.String())
			}
		})
	}
	if evs := h.events("csrf"); len(evs) != 0 {
		t.Fatalf("refused posts recorded %d events", len(evs))
	}
	t.Run("no session cookie", func(t *testing.T) {
		res, body := h.do(h.newClient(), http.MethodPost, "/ui/paste", strings.NewReader(form(good).Encode()), "Content-Type", "application/x-www-form-urlencoded")
		if res.StatusCode != 403 || !strings.Contains(body, "E-PERM") {
			t.Errorf("POST without a session = %d, want 403 E-PERM", res.StatusCode)
		}
	})
	t.Run("right token", func(t *testing.T) {
		res, body := h.post("/ui/paste", form(good))
		if res.StatusCode != 200 {
			t.Fatalf("POST /ui/paste = %d\n%s", res.StatusCode, body)
		}
		if evs := h.events("csrf"); len(evs) != 1 {
			t.Errorf("events = %d, want 1", len(evs))
		}
	})
}

func TestSessionCookie(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			h := newHarness(t, &harnessOptions{tls: tls})
			res, _ := h.do(h.client, http.MethodGet, "/", nil)
			var c *http.Cookie
			for _, ck := range res.Cookies() {
				if ck.Name == "crosstalk_session" {
					c = ck
				}
			}
			if c == nil {
				t.Fatalf("GET / set no session cookie: %v", res.Header["Set-Cookie"])
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tls || c.Path != "/" {
				t.Errorf("cookie = %+v, want HttpOnly, SameSite=Strict, Secure=%v, Path=/", c, tls)
			}
			// A second page keeps the session.
			res, _ = h.do(h.client, http.MethodGet, "/ui/paste", nil)
			if len(res.Cookies()) != 0 {
				t.Errorf("second page set cookies again: %v", res.Header["Set-Cookie"])
			}
		})
	}
	t.Run("cross-site navigation", func(t *testing.T) {
		h := newHarness(t, nil)
		res, body := h.do(h.newClient(), http.MethodGet, "/", nil, "Sec-Fetch-Site", "cross-site")
		if len(res.Cookies()) != 0 || !strings.Contains(body, `http-equiv="refresh"`) {
			t.Errorf("cross-site navigation without cookie = cookies %v, body %q; want a reload and no new session", res.Cookies(), body)
		}
	})
}

func TestLogin(t *testing.T) {
	tokens := map[string]string{"claude-token-0123456789": "claude", "admin-token-0123456789": "kalle"}
	h := newHarness(t, &harnessOptions{tokens: tokens, admins: []string{"kalle"}})
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "take over the deploy"))

	code, body := h.get("/ui/agents/claude")
	if code != 401 || !strings.Contains(body, `action="/ui/login"`) {
		t.Fatalf("anonymous GET = %d, want 401 with the login form\n%s", code, body)
	}
	old := h.client.Jar.Cookies(mustURL(t, h.srv.URL))
	res, body := h.post("/ui/login", url.Values{"token": {"wrong-token-0123456789"}, "next": {"/ui/agents/claude"}})
	if res.StatusCode != 401 || !strings.Contains(body, "unknown token") {
		t.Fatalf("login with a wrong token = %d\n%s", res.StatusCode, body)
	}
	res, _ = h.post("/ui/login", url.Values{"token": {"claude-token-0123456789"}, "next": {"//evil.example/x"}})
	if res.StatusCode != 303 || res.Header.Get("Location") != "/" {
		t.Fatalf("login = %d to %q, want 303 to / (never off-site)", res.StatusCode, res.Header.Get("Location"))
	}
	now := h.client.Jar.Cookies(mustURL(t, h.srv.URL))
	if len(old) != 1 || len(now) != 1 || old[0].Value == now[0].Value {
		t.Errorf("session id did not change on login: %v → %v", old, now)
	}
	if strings.Contains(now[0].Value, "claude-token") {
		t.Errorf("the cookie holds the token")
	}
	code, body = h.get("/ui/agents/claude")
	if code != 200 {
		t.Fatalf("GET after login = %d\n%s", code, body)
	}
	mustContain(t, "agent page", body, "Signed in as <strong><bdi>claude</bdi></strong>", `value="ack"`)
	mustNotContain(t, "agent page", body, "Viewing as")

	// Another agent's queue is not ours to read, as on the API.
	if code, body := h.get("/ui/agents/chatgpt"); code != 403 || !strings.Contains(body, "E-PERM") {
		t.Errorf("GET another agent's page = %d, want 403 E-PERM", code)
	}
	// Acting as another agent is refused; acting as itself works.
	ev := h.events("ops")[0]
	res, body = h.post("/ui/agents/chatgpt/act", url.Values{"action": {"claim"}, "group": {"ops"}, "event": {ev.ID}})
	if res.StatusCode != 403 || !strings.Contains(body, "E-PERM") {
		t.Errorf("acting as chatgpt = %d, want 403 E-PERM", res.StatusCode)
	}
	res, _ = h.post("/ui/agents/claude/act", url.Values{"action": {"ack"}, "group": {"ops"}, "event": {ev.ID}})
	if res.StatusCode != 303 {
		t.Errorf("ack as claude = %d, want 303", res.StatusCode)
	}
	// Pasting as another sender is refused: a principal sends as itself.
	res, body = h.post("/ui/paste", url.Values{"op": {"send"}, "text": {envText(t, "GEMINI", "CLAUDE", "REQUEST", "ops", "hi")}})
	if res.StatusCode != 422 || !strings.Contains(body, "may not send as") {
		t.Errorf("paste as gemini = %d, want 422 refused\n%s", res.StatusCode, body)
	}
	// Only admins change trust.
	res, body = h.post("/ui/trust/revoke", url.Values{"pkid": {"x@example.com"}})
	if res.StatusCode != 403 {
		t.Errorf("trust change by a non-admin = %d, want 403\n%s", res.StatusCode, body)
	}
	// A bearer token works on pages too, without CSRF (browsers never send it by themselves).
	res, _ = h.do(h.newClient(), http.MethodGet, "/ui/agents/claude", nil, "Authorization", "Bearer claude-token-0123456789")
	if res.StatusCode != 200 {
		t.Errorf("bearer GET = %d", res.StatusCode)
	}
	res, _ = h.do(h.newClient(), http.MethodGet, "/", nil, "Authorization", "Bearer nope")
	if res.StatusCode != 401 {
		t.Errorf("wrong bearer = %d, want 401", res.StatusCode)
	}
	// Logout ends the session.
	res, _ = h.post("/ui/logout", url.Values{})
	if res.StatusCode != 303 {
		t.Errorf("logout = %d", res.StatusCode)
	}
	if code, _ := h.get("/ui/agents/claude"); code != 401 {
		t.Errorf("GET after logout = %d, want 401", code)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPasteAndSend(t *testing.T) {
	h := newHarness(t, nil)
	a := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "pasted", "first")
	b := envText(t, "CHATGPT", "CLAUDE", envelope.IntentRespond, "pasted", "second")
	chat := "Sure! Here it is:\n\n```\n" + a + "```\nquoted:\n> " + strings.ReplaceAll(strings.TrimSuffix(b, "\n"), "\n", "\n> ") + "\n\nand a broken one:\n[[CLAUDE→GEMINI v1]]\nintent: REQUEST\nbody: |\n  never ended\n"
	res, body := h.post("/ui/paste", url.Values{"op": {"preview"}, "text": {chat}})
	if res.StatusCode != 200 {
		t.Fatalf("preview = %d\n%s", res.StatusCode, body)
	}
	mustContain(t, "preview", body, "Found 2 envelopes and 1 error", "line 4", "line 17", "line 30", "first", "second", "E-FORMAT", `id="send-button"`)
	if evs, _ := h.store.Groups(t.Context()); len(evs) != 0 {
		t.Fatalf("preview recorded something: %v", evs)
	}
	res, body = h.post("/ui/paste", url.Values{"op": {"send"}, "text": {chat}})
	if res.StatusCode != 422 { // one was refused
		t.Fatalf("send = %d\n%s", res.StatusCode, body)
	}
	mustContain(t, "send", body, "recorded", `<bdi class="clip" title="pasted">pasted</bdi> #1`, `<bdi class="clip" title="pasted">pasted</bdi> #2`, "E-FORMAT")
	evs := h.events("pasted")
	if len(evs) != 2 {
		t.Fatalf("events = %d, want 2", len(evs))
	}
	d, _ := gateway.ParseData(evs[0])
	if d.X == nil || d.X.Transport != "web" {
		t.Errorf("transport = %+v, want web", d.X)
	}
}

func TestAgentActions(t *testing.T) {
	h := newHarness(t, nil)
	outs := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, "ops", "take over"))
	ev := outs[0].Event
	_, body := h.get("/ui/agents/claude")
	mustContain(t, "agent page", body, "Waiting for <bdi>claude</bdi> (1)", `value="ack"`, "take over")
	// The groups page counts it as claude's attention item once viewing as claude.
	res, _ := h.post("/ui/viewas", url.Values{"agent": {"CLAUDE"}, "back": {"/"}})
	if res.StatusCode != 303 {
		t.Fatalf("viewas = %d", res.StatusCode)
	}
	_, body = h.get("/")
	mustContain(t, "groups page", body, "viewing as claude", "Needs attention from <bdi>claude</bdi> (1)", `<span class="count attn">1</span>`, `<span class="count">1</span>`)

	for _, action := range []string{"ack", "claim", "defer"} {
		res, body := h.post("/ui/agents/claude/act", url.Values{"action": {action}, "group": {"ops"}, "event": {ev.ID}})
		if res.StatusCode != 303 {
			t.Fatalf("%s = %d\n%s", action, res.StatusCode, body)
		}
	}
	_, body = h.get("/ui/agents/claude")
	mustContain(t, "agent page after ack", body, "Waiting for <bdi>claude</bdi> (0)", "acked", "claimed by", ": defer on #1 recorded")
	kinds := map[string]bool{}
	for _, e := range h.events("ops") {
		kinds[e.Kind] = true
	}
	for _, k := range []string{gateway.KindAck, gateway.KindClaim, gateway.KindDisposition} {
		if !kinds[k] {
			t.Errorf("no %s event after the buttons", k)
		}
	}
	// Refusals show their CCCS code.
	res, body = h.post("/ui/agents/gemini/act", url.Values{"action": {"ack"}, "group": {"ops"}, "event": {ev.ID}})
	if res.StatusCode != 403 || !strings.Contains(body, "permission_denied") {
		t.Errorf("gemini ack = %d, want 403 permission_denied\n%s", res.StatusCode, body)
	}
	res, _ = h.post("/ui/agents/claude/act", url.Values{"action": {"explode"}, "group": {"ops"}, "event": {ev.ID}})
	if res.StatusCode != 400 {
		t.Errorf("unknown action = %d, want 400", res.StatusCode)
	}
	// Mark read clears the unread count.
	res, _ = h.post("/ui/groups/ops/read", url.Values{})
	if res.StatusCode != 303 {
		t.Errorf("mark read = %d", res.StatusCode)
	}
	_, body = h.get("/ui/groups/ops")
	mustContain(t, "group page", body, "0 unread for <bdi>claude</bdi>", "claude acknowledged #1", "claude claimed #1")
}

func TestCompose(t *testing.T) {
	h := newHarness(t, nil)
	res, body := h.post("/ui/compose", url.Values{"from": {"CLAUDE"}, "to": {"CHATGPT"}, "intent": {"request"}, "context": {"code"}, "priority": {"high"}, "body": {"Here:\n```go\nx := 1\n```\n\n"}})
	if res.StatusCode != 200 {
		t.Fatalf("compose = %d\n%s", res.StatusCode, body)
	}
	canon := between(t, body, `<pre id="canonical" class="envelope">`, "</pre>")
	env, err := envelope.Unmarshal([]byte(canon))
	if err != nil {
		t.Fatalf("the canonical text does not parse: %v\n%s", err, canon)
	}
	b, _ := envelope.Marshal(env)
	if string(b) != canon {
		t.Errorf("canonical = %q, want Marshal's %q", canon, b)
	}
	if env.Intent != "REQUEST" || env.Body != "Here:\n```go\nx := 1\n```" {
		t.Errorf("envelope = %+v", env)
	}
	if p, _ := env.MetaValue("routing", "X-Priority"); p != "high" {
		t.Errorf("X-Priority = %q", p)
	}
	fencedText := between(t, body, `<pre id="fenced" hidden>`, "</pre>")
	if !strings.HasPrefix(fencedText, "````\n[[CLAUDE→CHATGPT v1]]") || !strings.HasSuffix(fencedText, "\n````\n") {
		t.Errorf("fenced = %q, want a 4-backtick fence", fencedText)
	}
	res, body = h.post("/ui/compose", url.Values{"from": {"CLAUDE"}, "to": {""}, "intent": {"REQUEST"}})
	if res.StatusCode != 400 || !strings.Contains(body, "required") {
		t.Errorf("compose without to = %d", res.StatusCode)
	}
}

// between returns the unescaped text between two markers of a page.
func between(t *testing.T, body, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, start)
	if !ok {
		t.Fatalf("no %q in\n%s", start, body)
	}
	s, _, _ := strings.Cut(rest, end)
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&")
	return r.Replace(s)
}

func TestStreamResume(t *testing.T) {
	h := newHarness(t, nil)
	for i := 1; i <= 3; i++ {
		h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "live", fmt.Sprintf("message %d", i)))
	}
	h.csrf() // a session
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/ui/groups/live/stream?since_seq=1", nil)
	req.Header.Set("Last-Event-ID", "2")
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	next := func() (id string, data map[string]any) {
		t.Helper()
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &data); err != nil {
					t.Fatalf("bad data %q: %v", line, err)
				}
			case line == "" && id != "":
				return id, data
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return
	}
	// Last-Event-ID wins over since_seq: the first item is #3.
	if id, d := next(); id != "3" || !strings.Contains(d["html"].(string), "message 3") {
		t.Fatalf("first item = %s %v, want #3", id, d)
	}
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRespond, "live", "live <b>one</b>"))
	id, d := next()
	if id != "4" || !strings.Contains(d["html"].(string), "live &lt;b&gt;one&lt;/b&gt;") {
		t.Fatalf("live item = %s %v", id, d)
	}
}

func TestTrust(t *testing.T) {
	h := newHarness(t, nil)
	k1, err := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	sign := func(k *signing.PrivateKey, body string) string {
		text := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "keys", body)
		out, err := signing.Sign([]byte(text), k, &signing.SignOptions{Announce: true})
		if err != nil {
			t.Fatalf("Sign() = %v", err)
		}
		return string(out)
	}
	if o := h.ingest(sign(k1, "first")); o[0].Verification.Status != "first-use" {
		t.Fatalf("first envelope: %+v", o[0].Verification)
	}
	if o := h.ingest(sign(k2, "changed")); o[0].Verification.Status != "key-changed" {
		t.Fatalf("second envelope: %+v", o[0].Verification)
	}
	_, body := h.get("/ui/trust")
	mustContain(t, "trust page", body, "claude@example.com", htmlText(k1.Public().Fingerprint()), "first-use", "key-changed", "Re-pin to this key", "Revoke…", htmlText(k2.Public().Fingerprint()))
	_, body = h.get("/ui/groups/keys")
	mustContain(t, "group page", body, "badge warn", "badge bad", "Refused by the relay")

	evs := h.events("keys")
	changed := evs[len(evs)-1]
	res, body := h.post("/ui/trust/pin", url.Values{"event": {changed.ID}})
	if res.StatusCode != 200 || !strings.Contains(body, "Yes, re-pin") {
		t.Fatalf("pin without confirm = %d\n%s", res.StatusCode, body)
	}
	if e, _, _ := h.trust.Lookup("claude@example.com"); !e.Key.Equal(k1.Public()) {
		t.Fatalf("the key changed before confirmation")
	}
	res, _ = h.post("/ui/trust/pin", url.Values{"event": {changed.ID}, "confirm": {"yes"}})
	if res.StatusCode != 303 {
		t.Fatalf("confirmed pin = %d", res.StatusCode)
	}
	if e, _, _ := h.trust.Lookup("claude@example.com"); !e.Key.Equal(k2.Public()) {
		t.Fatalf("the key was not re-pinned")
	}
	if o := h.ingest(sign(k2, "now trusted")); o[0].Verification.Status != "verified" {
		t.Errorf("after re-pin: %+v", o[0].Verification)
	}
	res, body = h.post("/ui/trust/revoke", url.Values{"pkid": {"claude@example.com"}})
	if res.StatusCode != 200 || !strings.Contains(body, "Yes, revoke") {
		t.Fatalf("revoke without confirm = %d", res.StatusCode)
	}
	res, _ = h.post("/ui/trust/revoke", url.Values{"pkid": {"claude@example.com"}, "confirm": {"yes"}})
	if e, _, _ := h.trust.Lookup("claude@example.com"); res.StatusCode != 303 || !e.Revoked {
		t.Fatalf("revoke = %d, revoked %v", res.StatusCode, e.Revoked)
	}
	_, body = h.get("/ui/trust")
	mustContain(t, "trust page", body, "revoked")
}

// htmlText is s as html/template writes it in text.
func htmlText(s string) string { return strings.ReplaceAll(s, "+", "&#43;") }

func TestChanges(t *testing.T) {
	h := newHarness(t, nil)
	h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "c", "one"))
	_, body := h.get("/")
	v := between(t, body, `<div id="changes" data-version="`, `"`)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/ui/changes?v="+v, nil)
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	select {
	case l := <-lines:
		if l != ": connected" {
			t.Fatalf("first line = %q", l)
		}
	case <-ctx.Done():
		t.Fatal("no connection")
	}
	quiet := time.After(1500 * time.Millisecond)
wait:
	for {
		select {
		case l := <-lines:
			if strings.HasPrefix(l, "event: changed") {
				t.Fatalf("changed before anything changed")
			}
		case <-quiet:
			break wait
		}
	}
	h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "c", "two"))
	for {
		select {
		case l := <-lines:
			if l == "event: changed" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no changed event after an append")
		}
	}
}

func TestOddNames(t *testing.T) {
	h := newHarness(t, nil)
	outs := h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "deploy/v2 #1?", "odd group"))
	_, body := h.get("/")
	href := between(t, body, `<th scope="row"><a href="`, `"`)
	if href != "/ui/groups/deploy%2Fv2%20%231%3F" {
		t.Errorf("group link = %q", href)
	}
	for _, p := range []string{href, "/ui/groups/deploy%2Fv2%20%231%3F/threads/" + outs[0].Envelope.Thread} {
		if code, body := h.get(p); code != 200 || !strings.Contains(body, "odd group") {
			t.Errorf("GET %s = %d", p, code)
		}
	}
}

// TestPagesIsolateNames renders an event recorded before identifiers were
// checked (issue 12 item 3): a sender with RLO and a group with ZWSP. Every
// name shown is isolated in <bdi> with the invisible characters written as
// code points; only the envelope's raw text (kept byte for byte, to copy)
// and the attributes the page's requests use hold them raw.
func TestPagesIsolateNames(t *testing.T) {
	h := newHarness(t, nil)
	const from, group = "CLA\u202eUDE", "pro\u200bj"
	env := envelope.New(from, "GEMINI", "REQUEST", "hello")
	env.Context = group
	d := gateway.EventData{Text: "hello", Format: "plain", Priority: "normal", To: []string{"gemini"},
		X: &gateway.XCrosstalk{Envelope: env, Sender: "cla\u202eude", Transport: "test", Verification: gateway.StatusUnsigned}}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Append(t.Context(), []ledger.Record{{Kind: gateway.KindMessage, GroupID: group, By: "cla\u202eude", Data: data}}); err != nil {
		t.Fatal(err)
	}
	// html/template writes "+" as &#43;.
	const shownGroup, shownFrom = "<bdi>pro⟨U&#43;200B⟩j</bdi>", "<bdi>CLA⟨U&#43;202E⟩UDE</bdi>"
	const clippedGroup = `<bdi class="clip" title="pro⟨U&#43;200B⟩j">pro⟨U&#43;200B⟩j</bdi>`
	for _, tc := range []struct {
		path  string
		wants []string
	}{
		{"/ui/groups/" + url.PathEscape(group), []string{"<title>pro⟨U&#43;200B⟩j", "<h1>Group " + shownGroup, `<span class="from">` + shownFrom}},
		{"/ui/agents/gemini", []string{clippedGroup + " #1", `<span class="from"><bdi>cla⟨U&#43;202E⟩ude</bdi>`}},
		{"/", []string{`<a href="/ui/groups/pro%E2%80%8Bj">` + clippedGroup}},
	} {
		code, body := h.get(tc.path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", tc.path, code, body)
		}
		mustContain(t, "GET "+tc.path, body, tc.wants...)
		for _, line := range strings.Split(body, "\n") {
			if strings.ContainsAny(line, "\u202e\u200b") && (strings.Contains(line, "<bdi>") || strings.Contains(line, "<h1>") || strings.Contains(line, "<title>")) {
				t.Errorf("GET %s shows a name with a raw RLO or ZWSP: %q", tc.path, line)
			}
		}
	}
}

// TestAgentPageObligation: an obligation stays waiting on the addressee's
// page after its reply and its defer (evidence, not discharge), leaves it
// once the author discharges it, and an ACK answering the author is not
// an item the author owes (issue #14).
func TestAgentPageObligation(t *testing.T) {
	h := newHarness(t, nil)
	ob := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "ops", "review before I ship", func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}}}
	}))[0].Event
	msg := func() string { d, _ := gateway.ParseData(ob); return d.X.Envelope.Message }()
	h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentAck, "ops", "on it", func(e *envelope.Envelope) { e.Parent = msg }))
	if res, body := h.post("/ui/agents/claude/act", url.Values{"action": {"defer"}, "group": {"ops"}, "event": {ob.ID}}); res.StatusCode != 303 {
		t.Fatalf("defer = %d\n%s", res.StatusCode, body)
	}
	_, body := h.get("/ui/agents/claude")
	mustContain(t, "claude's page after reply and defer", body, "Waiting for <bdi>claude</bdi> (1)")
	_, body = h.get("/ui/agents/chatgpt")
	mustContain(t, "chatgpt's page with claude's ACK", body, "Waiting for <bdi>chatgpt</bdi> (0)")
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentAck, "ops", "thanks, done", func(e *envelope.Envelope) { e.Parent = msg }))
	_, body = h.get("/ui/agents/claude")
	mustContain(t, "claude's page after the discharge", body, "Waiting for <bdi>claude</bdi> (0)")
}
