package hostile

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// corpusConfig has the principals and agents fixtures/hostile expects.
const corpusConfig = `
[[tokens]]
token = "claude-token-0123456789abcde"
principal = "claude"

[[tokens]]
token = "chatgpt-token-0123456789abc"
principal = "chatgpt"

[[tokens]]
token = "gemini-token-0123456789abcd"
principal = "gemini"

[[agents]]
id = "claude"
names = ["CLAUDE"]
roles = ["reviewer"]

[[agents]]
id = "chatgpt"
names = ["CHATGPT"]
roles = ["reviewer"]

[[agents]]
id = "gemini"
names = ["GEMINI"]
`

// TestCorpusHolds runs the hostile-input corpus of fixtures/hostile — bad
// Host and Origin, cross-site requests, wrong tokens, acks for another
// actor, forged senders, smuggled envelopes — against the relay as
// `crosstalk relay --config` assembles it (the web inbox in front of the
// API), so what held in-process (gateway/relaytest) keeps holding there.
func TestCorpusHolds(t *testing.T) {
	cases, err := fixtures.HostileCases()
	if err != nil || len(cases) == 0 {
		t.Fatalf("HostileCases() = %d, %v", len(cases), err)
	}
	r := startRelay(t, corpusConfig)
	r.reader = "claude"
	handoff := r.accepted("chatgpt", envText("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over the release"))
	plain := r.accepted("chatgpt", envText("CHATGPT", "CLAUDE", "REQUEST", "g", "a plain question"))
	subst := strings.NewReplacer("{handoff}", handoff.EventID, "{handoff.message}", handoff.Message,
		"{request}", plain.EventID, "{request.message}", plain.Message)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			r := r.in(t)
			req, err := http.NewRequest(c.Method, r.url+subst.Replace(c.Path), strings.NewReader(subst.Replace(string(c.Body))))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.Header {
				req.Header[k] = v
			}
			if c.Host != "" {
				req.Host = c.Host
			}
			switch c.Token {
			case "none", "":
			case "wrong":
				req.Header.Set("Authorization", "Bearer wrong-token-0123456789")
			default:
				req.Header.Set("Authorization", "Bearer "+tokens[c.Token])
			}
			before := r.events()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.Status || errorCode(body) != c.Code {
				t.Errorf("%s %s (%s) = %d %s, want %d %s\n%s", c.Method, req.URL.Path, c.Comment, res.StatusCode, errorCode(body), c.Status, c.Code, body)
			}
			var notices, recorded int
			for _, ev := range r.since(before) {
				if d, _ := gateway.ParseData(ev); ev.Kind == gateway.KindNotify && d.Kind == "error" && ev.By == "system" {
					notices++
					continue
				}
				recorded++
				if ev.By != c.Token || c.Kind != "" && ev.Kind != c.Kind {
					t.Errorf("recorded %s by %s, want %s by %s", ev.Kind, ev.By, c.Kind, c.Token)
				}
			}
			if notices != c.Notify || recorded != c.Recorded {
				t.Errorf("added %d notices and %d events, want %d and %d", notices, recorded, c.Notify, c.Recorded)
			}
			r.accepted("claude", envText("CLAUDE", "GEMINI", "REQUEST", "after", "still serving"))
		})
	}
}

// errorCode returns the error code of an answer: error.code of JSON, or
// the Code of the first ERROR envelope of a text answer.
func errorCode(body []byte) string {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return answer{body: body}.code()
	}
	rd := envelope.NewReader(bytes.NewReader(body))
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return ""
		}
		if err == nil && e.Intent == envelope.IntentError {
			code, _ := e.MetaValue("error", "Code")
			return code
		}
	}
}

// TestWebPagesHold: through the assembled relay, an envelope body with
// markup is shown as text under a script-only CSP, a cross-site form post
// is refused, and no path reaches outside the static files.
func TestWebPagesHold(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	const xss = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	r.accepted("alice", envText("ALICE", "BOB", "REQUEST", "web", xss))
	req, _ := http.NewRequest(http.MethodGet, r.url+"/ui/groups/web", nil)
	req.Header.Set("Authorization", "Bearer "+tokens["alice"])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || bytes.Contains(page, []byte("<script>alert")) || !bytes.Contains(page, []byte("&lt;script&gt;alert(1)")) {
		t.Errorf("GET /ui/groups/web = %d, want the body escaped as text", res.StatusCode)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want script-src 'self'", csp)
	}
	for _, tc := range []struct {
		method, path string
		header       http.Header
	}{
		{http.MethodPost, "/ui/paste", http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"application/x-www-form-urlencoded"}}},
		{http.MethodPost, "/ui/paste", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Content-Type": {"application/x-www-form-urlencoded"}}},
		{http.MethodPost, "/ui/trust/revoke", http.Header{"Origin": {"null"}, "Content-Type": {"application/x-www-form-urlencoded"}}},
	} {
		a := r.do(tc.method, tc.path, "alice", []byte("action=send&text="+url.QueryEscape(envText("ALICE", "BOB", "REQUEST", "csrf", "x"))+"&pkid=alice%40hostile.test&confirm=yes"), tc.header)
		if a.status != http.StatusForbidden {
			t.Errorf("%s %s with %v = %d, want 403", tc.method, tc.path, tc.header, a.status)
		}
	}
	for _, p := range []string{"/ui/static/../../go.mod", "/ui/static/..%2f..%2fgo.mod", "/ui/static/%2e%2e/%2e%2e/go.mod", "/ui/static/app.js/../../../relay.toml"} {
		a := r.do(http.MethodGet, p, "alice", nil, nil)
		if a.status == http.StatusOK && (bytes.Contains(a.body, []byte("module ")) || bytes.Contains(a.body, []byte("[[tokens]]"))) {
			t.Errorf("GET %s = 200 with a file outside the static files", p)
		}
	}
	var groups struct{ Groups []json.RawMessage }
	if a := r.do(http.MethodGet, "/v1/groups", "alice", nil, nil); json.Unmarshal(a.body, &groups) != nil || len(groups.Groups) != 1 {
		t.Errorf("groups after the attempts = %s, want only web (nothing from the cross-site posts)", a.body)
	}
}

// TestRateLimitHolds: one principal flooding the relay is refused with 429
// E-RATE once its burst is spent, records nothing more, and the other
// principal is still served. (bob's reads and post fit in his own burst.)
func TestRateLimitHolds(t *testing.T) {
	r := startRelay(t, baseConfig("rate_limit = 0.000001\nrate_burst = 3\n"))
	r.reader = "bob"
	for i := range 3 {
		r.accepted("alice", envText("ALICE", "BOB", "REQUEST", "rate", "within the burst "+string(rune('a'+i))))
	}
	for range 3 {
		if a := r.post("alice", envText("ALICE", "BOB", "REQUEST", "rate", "one too many")); a.status != http.StatusTooManyRequests || a.code() != "E-RATE" {
			t.Errorf("POST over the rate = %d %s, want 429 E-RATE", a.status, a.body)
		}
	}
	if evs := r.events(); len(evs) != 3 {
		t.Errorf("ledger = %s; want the three envelopes within the burst only", kindsBy(evs))
	}
	r.accepted("bob", envText("BOB", "ALICE", "REQUEST", "rate", "bob has a bucket of his own"))
}
