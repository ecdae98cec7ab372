package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// harness is an in-process relay: a real API over a SQLite ledger in a
// temporary directory, served by httptest on loopback.
type harness struct {
	t     *testing.T
	srv   *httptest.Server
	relay *gateway.Relay
	store ledger.Store
}

// testBook is the address book of every test: two reviewers and a third
// agent without roles.
func testBook(t *testing.T) *gateway.AddressBook {
	t.Helper()
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatalf("NewAddressBook() = %v", err)
	}
	return book
}

func newHarness(t *testing.T, opts *api.Options, mounts ...func(*api.Server, ledger.Store)) *harness {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	relay := gateway.New(st, &gateway.Options{Book: testBook(t)})
	a := api.New(relay, opts)
	for _, mount := range mounts {
		mount(a, st)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		a.Close()
		srv.Close()
		st.Close()
	})
	return &harness{t: t, srv: srv, relay: relay, store: st}
}

// send sends a request and returns the response, its body unread.
// Header pairs are given as "Name", "value", ….
func (h *harness) send(method, path, body string, header ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatalf("NewRequest(%s %s) = %v", method, path, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s = %v", method, path, err)
	}
	return res
}

// do sends a request and returns the status and the body. Header pairs
// are given as "Name", "value", ….
func (h *harness) do(method, path, body string, header ...string) (int, []byte) {
	h.t.Helper()
	res := h.send(method, path, body, header...)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return res.StatusCode, b
}

// json sends a request, checks the status and decodes the JSON answer
// into v (when v is not nil).
func (h *harness) json(method, path, body string, wantStatus int, v any, header ...string) {
	h.t.Helper()
	status, b := h.do(method, path, body, header...)
	if status != wantStatus {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, status, b, wantStatus)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

// post posts envelope text to /crosstalk/receive asking for JSON and
// returns the one result.
func (h *harness) post(text string, header ...string) api.Result {
	h.t.Helper()
	var out struct{ Results []api.Result }
	h.json("POST", "/crosstalk/receive", text, http.StatusOK, &out, append([]string{"Accept", "application/json"}, header...)...)
	if len(out.Results) != 1 {
		h.t.Fatalf("POST /crosstalk/receive = %d results, want 1", len(out.Results))
	}
	return out.Results[0]
}

// env composes an envelope text (testrelay.Envelope).
var env = testrelay.Envelope

func TestReceiveText(t *testing.T) {
	h := newHarness(t, nil)
	text := env("CHATGPT", "CLAUDE", "REQUEST", "topic", "please review")
	status, body := h.do("POST", "/crosstalk/receive", "chat text before\n\n"+text+"\nand after\n", "Content-Type", "text/plain; charset=utf-8")
	if status != http.StatusOK {
		t.Fatalf("POST /crosstalk/receive = %d %s, want 200", status, body)
	}
	receipt, err := envelope.Unmarshal(body)
	if err != nil {
		t.Fatalf("Unmarshal(receipt %q) = %v", body, err)
	}
	orig, _ := envelope.Unmarshal([]byte(text))
	if receipt.Intent != envelope.IntentAck || receipt.Parent != orig.Message || receipt.From != "SYSTEM" || receipt.To != "CHATGPT" {
		t.Errorf("receipt = %s %s→%s parent %s, want ACK SYSTEM→CHATGPT parent %s", receipt.Intent, receipt.From, receipt.To, receipt.Parent, orig.Message)
	}
	for key, want := range map[string]string{"Group": "topic", "Seq": "1", "Duplicate": "false", "Verification": "unsigned"} {
		if got, _ := receipt.MetaValue("receipt", key); got != want {
			t.Errorf("receipt %s = %q, want %q", key, got, want)
		}
	}
	id, _ := receipt.MetaValue("receipt", "Event-ID")
	ev, err := h.store.Get(t.Context(), id)
	if err != nil || ev.Kind != gateway.KindMessage || ev.By != "chatgpt" {
		t.Errorf("Get(%s) = %s by %s, %v, want chat.message by chatgpt", id, ev.Kind, ev.By, err)
	}

	// The same text again: a duplicate receipt naming the same event.
	_, body = h.do("POST", "/crosstalk/receive", text)
	again, err := envelope.Unmarshal(body)
	if err != nil {
		t.Fatalf("Unmarshal(second receipt) = %v", err)
	}
	if got, _ := again.MetaValue("receipt", "Event-ID"); got != id {
		t.Errorf("second receipt Event-ID = %s, want %s", got, id)
	}
	if got, _ := again.MetaValue("receipt", "Duplicate"); got != "true" {
		t.Errorf("second receipt Duplicate = %s, want true", got)
	}
}

func TestReceiveJSON(t *testing.T) {
	h := newHarness(t, nil)
	a := env("CHATGPT", "CLAUDE", "REQUEST", "topic", "one")
	b := env("CLAUDE", "CHATGPT", "RESPOND", "topic", "two")
	var out struct{ Results []api.Result }
	h.json("POST", "/crosstalk/receive", a+"\nsome chat\n"+b, http.StatusOK, &out, "Accept", "application/json")
	if len(out.Results) != 2 {
		t.Fatalf("results = %+v, want 2", out.Results)
	}
	for i, r := range out.Results {
		if r.EventID == "" || r.GroupID != "topic" || r.Seq != int64(i+1) || r.Duplicate || r.Status != "unsigned" || r.Message == "" {
			t.Errorf("result %d = %+v, want a new unsigned event in topic at seq %d", i, r, i+1)
		}
	}
	again := h.post(a)
	if !again.Duplicate || again.EventID != out.Results[0].EventID || again.Seq != 1 {
		t.Errorf("repeat = %+v, want duplicate of %s", again, out.Results[0].EventID)
	}
}

func TestHealthz(t *testing.T) {
	h := newHarness(t, &api.Options{Tokens: map[string]string{"0123456789abcdef": "claude"}})
	var out map[string]string
	h.json("GET", "/healthz", "", http.StatusOK, &out) // no token needed
	if out["status"] != "ok" || out["store"] != "ok" {
		t.Errorf("GET /healthz = %v, want status ok, store ok", out)
	}
}

func TestGroupsAndEvents(t *testing.T) {
	h := newHarness(t, nil)
	var groups struct{ Groups []ledger.Group }
	h.json("GET", "/v1/groups", "", http.StatusOK, &groups)
	if groups.Groups == nil || len(groups.Groups) != 0 {
		t.Errorf("GET /v1/groups on an empty ledger = %+v, want []", groups.Groups)
	}
	req := h.post(env("CHATGPT", "CLAUDE", "HANDOFF", "alpha", "take over"))
	h.post(env("CLAUDE", "CHATGPT", "NACK", "alpha", "no", func(e *envelope.Envelope) { e.Parent = req.Message }))
	h.post(env("CLAUDE", "CHATGPT", "REQUEST", "alpha", "question"))
	h.post(env("GEMINI", "ALL", "BROADCAST", "", "status: green"))

	h.json("GET", "/v1/groups", "", http.StatusOK, &groups)
	want := []ledger.Group{{ID: "alpha", LastSeq: 3}, {ID: "default", LastSeq: 1}}
	if fmt.Sprint(groups.Groups) != fmt.Sprint(want) {
		t.Errorf("GET /v1/groups = %v, want %v", groups.Groups, want)
	}

	type page struct {
		Events  []ledger.Event
		NextSeq int64 `json:"next_seq"`
	}
	tests := []struct {
		query string
		seqs  []int64
		next  int64
	}{
		{"", []int64{1, 2, 3}, 3},
		{"?since_seq=1", []int64{2, 3}, 3},
		{"?limit=2", []int64{1, 2}, 2},
		{"?since_seq=2&limit=2", []int64{3}, 3},
		{"?kinds=chat.message", []int64{1, 3}, 3},
		{"?kinds=chat.reaction,chat.ack", []int64{2}, 2},
		{"?since_seq=3", nil, 3},
	}
	for _, tt := range tests {
		var p page
		h.json("GET", "/v1/groups/alpha/events"+tt.query, "", http.StatusOK, &p)
		var seqs []int64
		for _, ev := range p.Events {
			seqs = append(seqs, ev.Seq)
			if ev.GroupID != "alpha" || ev.V != 1 || ev.ID == "" {
				t.Errorf("events%s: event %+v not a CCCS event of alpha", tt.query, ev)
			}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tt.seqs) || p.NextSeq != tt.next {
			t.Errorf("GET events%s = seqs %v next %d, want %v next %d", tt.query, seqs, p.NextSeq, tt.seqs, tt.next)
		}
	}
	var p page
	h.json("GET", "/v1/groups/nosuch/events", "", http.StatusOK, &p)
	if p.Events == nil || len(p.Events) != 0 || p.NextSeq != 0 {
		t.Errorf("GET events of an unknown group = %+v, want [] next 0", p)
	}
	h.json("GET", "/v1/groups/alpha/events?since_seq=-1", "", http.StatusBadRequest, nil)
}

// sseEvent is one Server-Sent Event, or a comment when Comment is set.
type sseEvent struct {
	ID, Name, Data, Comment string
}

// sseStream reads a Server-Sent Events response.
type sseStream struct {
	t      *testing.T
	res    *http.Response
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

// stream opens an SSE request. The stream ends with the test or after a
// minute at most, so a missing event fails the test instead of hanging it.
func (h *harness) stream(path string, header ...string) *sseStream {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 3*time.Minute)
	req, err := http.NewRequestWithContext(ctx, "GET", h.srv.URL+path, nil)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("GET %s = %v", path, err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		h.t.Fatalf("GET %s = %d %s %s, want 200 text/event-stream", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: h.t, res: res, sc: bufio.NewScanner(res.Body), cancel: cancel}
	h.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event or comment.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	seen := false
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if seen {
				return ev
			}
			continue
		}
		seen = true
		switch k, v, _ := strings.Cut(line, ":"); k {
		case "":
			ev.Comment = strings.TrimSpace(v)
		case "id":
			ev.ID = strings.TrimSpace(v)
		case "event":
			ev.Name = strings.TrimSpace(v)
		case "data":
			ev.Data += strings.TrimPrefix(v, " ")
		}
	}
	s.t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

// nextEvent skips comments (connected, heartbeats) and returns the next
// event.
func (s *sseStream) nextEvent() sseEvent {
	s.t.Helper()
	for {
		if ev := s.next(); ev.Comment == "" {
			return ev
		}
	}
}

func TestGroupStream(t *testing.T) {
	h := newHarness(t, &api.Options{Heartbeat: 20 * time.Millisecond})
	for i := range 2 {
		h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", fmt.Sprintf("stored %d", i)))
	}
	s := h.stream("/v1/groups/g/stream?since_seq=0")
	if c := s.next(); c.Comment != "connected" {
		t.Errorf("first SSE item = %+v, want the connected comment", c)
	}
	check := func(s *sseStream, wantSeq int64) {
		t.Helper()
		ev := s.nextEvent()
		var le ledger.Event
		if err := json.Unmarshal([]byte(ev.Data), &le); err != nil {
			t.Fatalf("SSE data %q: %v", ev.Data, err)
		}
		if ev.Name != "event" || ev.ID != fmt.Sprint(wantSeq) || le.Seq != wantSeq || le.GroupID != "g" {
			t.Errorf("SSE event = %s id %s seq %d, want event id %d", ev.Name, ev.ID, le.Seq, wantSeq)
		}
	}
	check(s, 1)
	check(s, 2)
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "live"))
	check(s, 3)
	// With nothing new, the stream sends heartbeats.
	if c := s.next(); c.Comment != "heartbeat" {
		t.Errorf("idle SSE item = %+v, want a heartbeat comment", c)
	}
	s.close()

	// Last-Event-ID resumes after the last event seen, over since_seq.
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "while away"))
	r := h.stream("/v1/groups/g/stream?since_seq=0", "Last-Event-ID", "2")
	check(r, 3)
	check(r, 4)

	h.json("GET", "/v1/groups/g/stream", "", http.StatusBadRequest, nil, "Last-Event-ID", "x")
}

// deliveries decodes GET /v1/agents/{agent}/deliveries.
type deliveries struct {
	Agent      string
	Deliveries []gateway.Delivery
}

func TestAgentDeliveries(t *testing.T) {
	h := newHarness(t, nil)
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "direct question"))
	h.post(env("CHATGPT", "@reviewer", "REQUEST", "g", "role question"))
	h.post(env("CLAUDE", "CHATGPT", "REQUEST", "g", "my own"))
	h.post(env("CHATGPT", "CLAUDE", "ESCALATE", "h", "urgent"))

	var out deliveries
	h.json("GET", "/v1/agents/CLAUDE/deliveries", "", http.StatusOK, &out)
	want := []struct {
		group     string
		seq       int64
		policy    attention.Policy
		injection attention.Injection
		content   string
	}{
		{"g", 1, attention.MustRespond, attention.Buffered, "direct question"},
		{"g", 2, attention.MayRespond, attention.Notify, ""}, // role mention: may_respond after claim
		{"h", 1, attention.MustRespond, attention.Immediate, "urgent"},
	}
	if out.Agent != "claude" || len(out.Deliveries) != len(want) {
		t.Fatalf("deliveries = agent %q %+v, want claude and %d deliveries (own event silent)", out.Agent, out.Deliveries, len(want))
	}
	for i, w := range want {
		d := out.Deliveries[i]
		if d.Group != w.group || d.Seq != w.seq || d.Policy != w.policy || d.Injection != w.injection || d.Content != w.content || d.Agent != "claude" {
			t.Errorf("delivery %d = %s/%d %s %s %q, want %s/%d %s %s %q", i, d.Group, d.Seq, d.Policy, d.Injection, d.Content, w.group, w.seq, w.policy, w.injection, w.content)
		}
	}
	if k := out.Deliveries[1].Knock; k == nil || strings.Contains(k.Topic, "role question") {
		t.Errorf("knock = %+v, want one without the body", k)
	}

	h.json("GET", "/v1/agents/claude/deliveries?group=g&since_seq=1", "", http.StatusOK, &out)
	if len(out.Deliveries) != 1 || out.Deliveries[0].Seq != 2 {
		t.Errorf("deliveries in g since 1 = %+v, want seq 2 only", out.Deliveries)
	}
	h.json("GET", "/v1/agents/claude/deliveries?limit=1", "", http.StatusOK, &out)
	if len(out.Deliveries) != 1 || out.Deliveries[0].Seq != 1 {
		t.Errorf("deliveries limit 1 = %+v, want seq 1 only", out.Deliveries)
	}
}

func TestAgentStream(t *testing.T) {
	h := newHarness(t, &api.Options{Heartbeat: 20 * time.Millisecond})
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "first"))
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "h", "second"))

	s := h.stream("/v1/agents/claude/stream")
	got := map[string]string{}
	var lastID string
	for range 2 {
		ev := s.nextEvent()
		var d gateway.Delivery
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatalf("SSE data %q: %v", ev.Data, err)
		}
		if ev.Name != "delivery" || d.Agent != "claude" || d.Policy != attention.MustRespond {
			t.Errorf("SSE item = %s %+v, want a must_respond delivery to claude", ev.Name, d)
		}
		got[d.Group] = d.Content
		lastID = ev.ID
	}
	if got["g"] != "first" || got["h"] != "second" {
		t.Errorf("stored deliveries = %v, want g:first h:second", got)
	}
	// The id is the ledger position: one number, growing.
	first, err := strconv.ParseInt(lastID, 10, 64)
	if err != nil || first <= 0 {
		t.Fatalf("SSE id after both = %q, want a ledger position", lastID)
	}
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "live"))
	ev := s.nextEvent()
	live, err := strconv.ParseInt(ev.ID, 10, 64)
	if err != nil || live <= first || !strings.Contains(ev.Data, `"live"`) {
		t.Errorf("live SSE item = %+v, want an id after %d with content live", ev, first)
	}
	s.close()

	// Resume from the position: only what came after it.
	h.post(env("CHATGPT", "CLAUDE", "REQUEST", "h", "while away"))
	r := h.stream("/v1/agents/claude/stream", "Last-Event-ID", ev.ID)
	if ev := r.nextEvent(); !strings.Contains(ev.Data, `"while away"`) {
		t.Errorf("resumed SSE item = %+v, want content while away", ev)
	}
	// One group only, from since_seq: the id is the group's seq.
	o := h.stream("/v1/agents/claude/stream?group=h&since_seq=1")
	if ev := o.nextEvent(); ev.ID != "2" {
		t.Errorf("group stream item = %+v, want id 2", ev)
	}
	h.json("GET", "/v1/agents/claude/stream", "", http.StatusBadRequest, nil, "Last-Event-ID", "nonsense")
	// The old cursor vector is refused with a clear error, not misread.
	var bad struct{ Error struct{ Message string } }
	h.json("GET", "/v1/agents/claude/stream", "", http.StatusBadRequest, &bad, "Last-Event-ID", "g:2,h:1")
	if !strings.Contains(bad.Error.Message, "since_pos") {
		t.Errorf("old Last-Event-ID refused with %q, want a pointer to since_pos", bad.Error.Message)
	}
}

// actResult decodes an action's answer.
type actResult struct {
	Event     ledger.Event
	Duplicate bool
	Claim     *ledger.Claim
	Cursor    *ledger.Cursor
}

func TestActions(t *testing.T) {
	h := newHarness(t, nil)
	handoff := h.post(env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"))
	role := h.post(env("GEMINI", "@reviewer", "REQUEST", "g", "review please"))
	path := func(r api.Result, action string) string {
		return "/v1/groups/g/events/" + r.EventID + "/" + action
	}
	as := func(agent string) []string { return []string{"X-Crosstalk-Agent", agent} }

	var res actResult
	h.json("POST", path(handoff, "ack"), "", http.StatusOK, &res, as("claude")...)
	if res.Event.Kind != gateway.KindAck || res.Event.By != "claude" || res.Duplicate {
		t.Errorf("ack = %s by %s duplicate %v, want a new chat.ack by claude", res.Event.Kind, res.Event.By, res.Duplicate)
	}
	ackID := res.Event.ID
	h.json("POST", path(handoff, "ack"), "", http.StatusOK, &res, as("claude")...)
	if !res.Duplicate || res.Event.ID != ackID {
		t.Errorf("second ack = %s duplicate %v, want duplicate of %s", res.Event.ID, res.Duplicate, ackID)
	}

	h.json("POST", path(handoff, "read"), "", http.StatusOK, &res, as("claude")...)
	if res.Event.Kind != gateway.KindRead || res.Cursor == nil || res.Cursor.Seq != handoff.Seq || res.Cursor.Actor != "claude" {
		t.Errorf("read = %s cursor %+v, want chat.read with cursor at seq %d", res.Event.Kind, res.Cursor, handoff.Seq)
	}

	h.json("POST", path(handoff, "react"), `{"signal":"agree"}`, http.StatusOK, &res, as("claude")...)
	if d, _ := gateway.ParseData(res.Event); res.Event.Kind != gateway.KindReaction || d.Signal != "agree" || d.EventID != handoff.EventID {
		t.Errorf("react = %s %+v, want chat.reaction agree on %s", res.Event.Kind, d, handoff.EventID)
	}
	h.json("POST", path(handoff, "react"), `{"signal":"shrug"}`, http.StatusBadRequest, nil, as("claude")...)

	h.json("POST", path(role, "claim"), "", http.StatusOK, &res, as("claude")...)
	if res.Event.Kind != gateway.KindClaim || res.Claim == nil || res.Claim.Actor != "claude" {
		t.Errorf("claim = %s %+v, want x.crosstalk.claim held by claude", res.Event.Kind, res.Claim)
	}
	var conflict struct{ Error struct{ Code string } }
	h.json("POST", path(role, "claim"), "", http.StatusConflict, &conflict, as("chatgpt")...)
	if conflict.Error.Code != gateway.CodeConflict {
		t.Errorf("second claim = %+v, want conflict", conflict)
	}

	for _, action := range []string{"defer", "resolve"} {
		h.json("POST", path(role, action), `{"note":"later\nplease"}`, http.StatusOK, &res, as("claude")...)
		d, _ := gateway.ParseData(res.Event)
		if res.Event.Kind != gateway.KindDisposition || d.Disposition == "" || d.Note != "later please" || res.Event.By != "claude" {
			t.Errorf("%s = %s %+v, want an x.crosstalk.disposition by claude with the note on one line", action, res.Event.Kind, d)
		}
	}

	h.json("POST", path(role, "wibble"), "", http.StatusBadRequest, nil, as("claude")...)
	h.json("POST", "/v1/groups/g/events/nosuch/ack", "", http.StatusNotFound, nil, as("claude")...)
	h.json("POST", path(role, "read"), `{"unknown":1}`, http.StatusBadRequest, nil, as("claude")...)
}

func TestActionsWithToken(t *testing.T) {
	const tok = "claude-token-0123456789"
	h := newHarness(t, &api.Options{Tokens: map[string]string{tok: "claude", "chatgpt-token-0123456789": "chatgpt"}})
	auth := []string{"Authorization", "Bearer " + tok}
	handoff := h.post(env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"), "Authorization", "Bearer chatgpt-token-0123456789")
	var res actResult
	h.json("POST", "/v1/groups/g/events/"+handoff.EventID+"/ack", "", http.StatusOK, &res, auth...)
	if res.Event.Kind != gateway.KindAck || res.Event.By != "claude" {
		t.Errorf("ack with claude's token = %s by %s, want chat.ack by claude", res.Event.Kind, res.Event.By)
	}
	var out deliveries
	h.json("GET", "/v1/agents/claude/deliveries", "", http.StatusOK, &out, auth...)
	if len(out.Deliveries) != 1 || !out.Deliveries[0].Acked {
		t.Errorf("claude's deliveries = %+v, want the handoff, acked", out.Deliveries)
	}
}

func TestSend(t *testing.T) {
	h := newHarness(t, nil)
	req := `{"from":"CLAUDE","to":"CHATGPT","intent":"request","context":"topic","body":"composed by the relay","message":"01JA0000000000000000000000"}`
	var out struct{ Results []api.Result }
	h.json("POST", "/v1/send", req, http.StatusOK, &out)
	if len(out.Results) != 1 || out.Results[0].GroupID != "topic" || out.Results[0].Duplicate || out.Results[0].Message != "01JA0000000000000000000000" {
		t.Fatalf("POST /v1/send = %+v, want one new event in topic", out.Results)
	}
	ev, err := h.store.Get(t.Context(), out.Results[0].EventID)
	if err != nil {
		t.Fatalf("Get(%s) = %v", out.Results[0].EventID, err)
	}
	d, _ := gateway.ParseData(ev)
	if ev.Kind != gateway.KindMessage || ev.By != "claude" || d.Text != "composed by the relay" || d.X.Transport != "api" || d.X.Envelope.Intent != envelope.IntentRequest {
		t.Errorf("sent event = %s by %s %+v, want chat.message by claude over api", ev.Kind, ev.By, d)
	}
	// A retry with the same message id is a duplicate.
	h.json("POST", "/v1/send", req, http.StatusOK, &out)
	if !out.Results[0].Duplicate || out.Results[0].EventID != ev.ID {
		t.Errorf("retried send = %+v, want duplicate of %s", out.Results[0], ev.ID)
	}
	// X-Crosstalk-Agent stands for "from" without a token.
	h.json("POST", "/v1/send", `{"to":"CLAUDE","intent":"RESPOND","body":"hi"}`, http.StatusOK, &out, "X-Crosstalk-Agent", "chatgpt")
	if ev, _ := h.store.Get(t.Context(), out.Results[0].EventID); ev.By != "chatgpt" {
		t.Errorf("send as X-Crosstalk-Agent: by = %q, want chatgpt", ev.By)
	}
	h.json("POST", "/v1/send", `{"to":"CLAUDE","intent":"RESPOND","body":"hi"}`, http.StatusBadRequest, nil)
	h.json("POST", "/v1/send", `{"from":"CLAUDE","intent":"RESPOND","body":"no receiver"}`, http.StatusBadRequest, nil)
}
