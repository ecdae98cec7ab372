package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// Two token holders of one relay: claude (alice's token) and chatgpt
// (bob's).
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

// twoPrincipals opens a relay with the two tokens, the agents endpoints,
// reservations and the pages, as `crosstalk relay --config` serves them.
func twoPrincipals(t *testing.T, o server.Options) *server.Server {
	t.Helper()
	o.DataDir, o.DNSServer = t.TempDir(), server.DNSServerNone
	o.Tokens = map[string]string{aliceToken: "claude", bobToken: "chatgpt"}
	o.Agents = []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}, {ID: "gemini", Names: []string{"GEMINI"}}}
	s, err := server.Open(t.Context(), &o)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { shutdown(t, s) })
	return s
}

// call sends a request with header pairs ("Host" sets the Host header)
// and returns the status and the body, which it reads only when the
// answer is not a stream.
func call(t *testing.T, s *server.Server, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res.StatusCode, ""
	}
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestAnotherPrincipalsAgent: alice's token, whatever endpoint names
// bob's agent (path, query, body or X-Crosstalk-Agent), reads nothing of
// chatgpt's and records nothing as chatgpt: 403 permission_denied — the
// same answer for an agent that does not exist, so the refusal tells
// nothing of who exists (docs/security.md, "What a token holder can and
// cannot do").
func TestAnotherPrincipalsAgent(t *testing.T) {
	s := twoPrincipals(t, server.Options{})
	alice := []string{"Authorization", "Bearer " + aliceToken}
	bob := []string{"Authorization", "Bearer " + bobToken, "Accept", "application/json"}
	status, body := call(t, s, "POST", "/crosstalk/receive", "[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\ncontext: proj\nbody: |\n  for chatgpt\n[[END]]\n", append(alice, "Accept", "application/json")...)
	if status != http.StatusOK {
		t.Fatalf("alice's post = %d %s", status, body)
	}
	id := body[strings.Index(body, `"event_id":"`)+12:]
	id = id[:strings.IndexByte(id, '"')]
	for _, agent := range []string{"chatgpt", "CHATGPT", "nobody"} {
		for _, tc := range []struct{ method, path, body, hint string }{
			{"GET", "/v1/agents/" + agent + "/deliveries", "", ""},
			{"GET", "/v1/agents/" + agent + "/deliveries?event_id=" + id, "", ""},
			{"GET", "/v1/agents/" + agent + "/cursors?resume=1", "", ""},
			{"GET", "/v1/agents/" + agent + "/owe", "", ""},
			{"GET", "/v1/agents/" + agent + "/waiting", "", ""},
			{"GET", "/v1/agents/" + agent + "/stream", "", ""},
			{"GET", "/v1/agents/" + agent + "/channel", "", ""},
			{"POST", "/v1/agents/" + agent + "/heartbeat", "", ""},
			{"POST", "/v1/agents/" + agent + "/notify", `{"group":"proj","kind":"delivery_failed"}`, ""},
			{"POST", "/v1/groups/proj/events/" + id + "/ack", "", agent},
			{"POST", "/v1/groups/proj/events/" + id + "/read", "", agent},
			{"POST", "/v1/groups/proj/events/" + id + "/claim", "", agent},
			{"POST", "/v1/groups/proj/events/" + id + "/resolve", "", agent},
			{"POST", "/v1/send", `{"from":"` + agent + `","to":"GEMINI","intent":"INFORM","body":"x"}`, ""},
			{"POST", "/v1/forward", `{"event_id":"` + id + `","to_group":"elsewhere"}`, agent},
			{"POST", "/v1/reservations", `{"agent":"` + agent + `","scopes":["src/*"]}`, ""},
			{"DELETE", "/v1/reservations?agent=" + agent + "&scope=src/*", "", ""},
		} {
			h := alice
			if tc.hint != "" {
				h = append(h, "X-Crosstalk-Agent", tc.hint)
			}
			status, body := call(t, s, tc.method, tc.path, tc.body, h...)
			want := fmt.Sprintf(`{"error":{"code":"permission_denied","message":"principal \"claude\" may not %s \"%s\""}}`, map[bool]string{true: "send as", false: "act as"}[tc.path == "/v1/send"], agent)
			if status != http.StatusForbidden || strings.TrimSpace(body) != want {
				t.Errorf("alice: %s %s (hint %q) = %d %s, want 403 %s", tc.method, tc.path, tc.hint, status, body, want)
			}
		}
	}
	// Nothing was recorded: proj holds alice's post only, and no group
	// "elsewhere" exists.
	_, events := call(t, s, "GET", "/v1/groups/proj/events", "", bob...)
	if n := strings.Count(events, `"kind"`); n != 1 {
		t.Errorf("proj holds %d events after the refusals, want alice's post only:\n%s", n, events)
	}
	if _, groups := call(t, s, "GET", "/v1/groups", "", bob...); strings.Contains(groups, "elsewhere") || strings.Contains(groups, "default") {
		t.Errorf("groups after the refusals = %s, want proj only", groups)
	}
}

// TestHostilePage: a page in the user's browser cannot post to the relay
// with a simple request (text/plain, no preflight) from another origin or
// from an opaque one (Origin: null), cannot reach it under another name
// (DNS rebinding), and cannot open an agent channel WebSocket from
// another origin — even with the token, which a page would not have
// (docs/security.md, "Parties"; docs/web.md). Each refusal is a 403 with
// an error body, and nothing is recorded.
func TestHostilePage(t *testing.T) {
	s := twoPrincipals(t, server.Options{})
	alice := []string{"Authorization", "Bearer " + aliceToken}
	port := s.URL()[strings.LastIndexByte(s.URL(), ':')+1:]
	env := "[[CLAUDE→CHATGPT v1]]\nintent: INFORM\ncontext: proj\nbody: |\n  from a page\n[[END]]\n"
	for _, tc := range []struct {
		name, method, path string
		header             []string
		want               string
	}{
		{"simple POST from another site", "POST", "/crosstalk/receive", []string{"Origin", "https://evil.example", "Content-Type", "text/plain"}, "cross-origin request refused"},
		{"simple POST from an opaque origin", "POST", "/crosstalk/receive", []string{"Origin", "null", "Content-Type", "text/plain"}, "cross-origin request refused"},
		{"POST with Sec-Fetch-Site only", "POST", "/v1/send", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}, "cross-origin request refused"},
		{"read from another site", "GET", "/v1/groups/proj/events", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, "cross-site request refused"},
		{"rebound name", "GET", "/v1/groups", []string{"Host", "evil.example:" + port}, "is not one of the relay's names"},
		{"rebound name posing as localhost", "POST", "/crosstalk/receive", []string{"Host", "localhost.evil.example:" + port}, "is not one of the relay's names"},
		{"same name, another port", "POST", "/crosstalk/receive", []string{"Origin", "http://localhost:1", "Host", "localhost:" + port}, "cross-origin request refused"},
		{"preflight", "OPTIONS", "/v1/send", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, "cross-origin request refused"},
		{"channel from another origin", "GET", "/v1/agents/claude/channel", []string{"Origin", "https://evil.example", "Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}, "not authorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = env
			}
			status, got := call(t, s, tc.method, tc.path, body, append(alice, tc.header...)...)
			if status != http.StatusForbidden || !strings.Contains(got, tc.want) {
				t.Errorf("%s %s = %d %s, want 403 %q", tc.method, tc.path, status, got, tc.want)
			}
		})
	}
	if _, groups := call(t, s, "GET", "/v1/groups", "", alice...); strings.Contains(groups, "proj") {
		t.Errorf("groups after the refusals = %s, want nothing recorded", groups)
	}
}

// rawRequest writes req on a new connection and returns the status line
// of the answer.
func rawRequest(t *testing.T, s *server.Server, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, req) // the relay may answer before reading it all
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestGreedyRequests: a body over the intake or JSON bound, declared or
// chunked, gets 413; 10 000 headers or a query string of 1 MB get 431
// (request headers, 64 KiB, docs/security.md "Limits"); none is a 500 or
// a hang.
func TestGreedyRequests(t *testing.T) {
	s := twoPrincipals(t, server.Options{MaxBody: 4096})
	host := strings.TrimPrefix(s.URL(), "http://")
	head := "Host: " + host + "\r\nAuthorization: Bearer " + aliceToken + "\r\nAccept: application/json\r\nConnection: close\r\n"
	envelope := "[[CLAUDE→CHATGPT v1]]\nintent: INFORM\ncontext: big\nbody: |\n  " + strings.Repeat("x", 5000) + "\n[[END]]\n"
	jsonBody := `{"to":"GEMINI","intent":"INFORM","body":"` + strings.Repeat("b", 3<<20) + `"}`
	chunked := func(b string) string {
		return fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(b), b)
	}
	declared := func(b string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(b), b) }
	var many strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	for _, tc := range []struct{ name, req, want string }{
		{"intake over max_body, declared", "POST /crosstalk/receive HTTP/1.1\r\n" + head + declared(envelope), "413"},
		{"intake over max_body, chunked", "POST /crosstalk/receive HTTP/1.1\r\n" + head + chunked(envelope), "413"},
		{"JSON over 2 MiB, declared", "POST /v1/send HTTP/1.1\r\n" + head + declared(jsonBody), "413"},
		{"JSON over 2 MiB, chunked", "POST /v1/send HTTP/1.1\r\n" + head + chunked(jsonBody), "413"},
		{"10 000 headers", "GET /v1/groups HTTP/1.1\r\n" + head + many.String() + "\r\n", "431"},
		{"1 MB query", "GET /v1/groups?q=" + strings.Repeat("q", 1<<20) + " HTTP/1.1\r\n" + head + "\r\n", "431"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rawRequest(t, s, tc.req); !strings.HasPrefix(got, "HTTP/1.1 "+tc.want) {
				t.Errorf("answer %q, want %s", got, tc.want)
			}
		})
	}
}
