package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Characters an envelope author may put in the values the parser does not
// hold to the identifier rule (intents, thread, message and parent ids,
// META values, notes): a right-to-left override and a zero-width space.
// Free text keeps emoji sequences, made of invisible characters too.
const rlo, zwsp, emoji = "\u202e", "\u200b", "\u26a0\ufe0f \U0001f469\u200d\U0001f4bb"

var (
	rawBlocks = regexp.MustCompile(`(?s)<(pre|textarea)\b[^>]*>.*?</(pre|textarea)>`)
	anyTag    = regexp.MustCompile(`(?s)<[^>]*>`)
	hrefs     = regexp.MustCompile(`(?i)\b(href|src|action)="([^"]*)"`)
)

// shownText is the text a reader sees on a page, without the byte-for-byte
// envelope text (<pre>, <textarea>) and without tags and their attributes.
func shownText(body string) string {
	return anyTag.ReplaceAllString(rawBlocks.ReplaceAllString(body, ""), "")
}

// TestHostileContentOnEveryPage records what a hostile envelope author
// controls — HTML and script in every field, javascript: and data: URLs,
// bidi overrides and zero-width characters in ids, META values and notes,
// names recorded before the identifier rule — and renders every page that
// shows it, the live stream included. Nothing is HTML, no link leaves the
// relay or runs script, no bidi control reaches the shown text raw, nor
// an invisible character of an identifier; free text keeps its emoji
// sequences; the raw envelope text alone keeps every byte.
func TestHostileContentOnEveryPage(t *testing.T) {
	h := newHarness(t, nil)
	const group = `<img src=x onerror=alert(1)>"'`
	body := "<script>alert(1)</script> javascript:alert(2) data:text/html,<script>alert(3)</script> " + strings.Repeat("W", 5000)
	first := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentHandoff, group, body, func(e *envelope.Envelope) {
		e.Thread = "th" + rlo + "read" + zwsp + `<b>"`
		e.Message = "m" + rlo + "sg" + zwsp
		e.Meta = []envelope.Meta{
			{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "urgent"}}},
			{Namespace: "handoff", Fields: []envelope.Field{{Key: "Subject", Value: "sub<i>ject"}, {Key: "Summary", Value: emoji}, {Key: "Next-Action", Value: "go"}}},
			{Namespace: "x-note", Fields: []envelope.Field{{Key: "K", Value: "v" + rlo + "alue<script>alert(4)</script>"}, {Key: "E", Value: emoji}}},
		}
	}))[0]
	if !first.Accepted() {
		t.Fatalf("first envelope refused: %v", first.Reject)
	}
	thread := first.Envelope.Thread
	reply := h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRespond, group, "ok", func(e *envelope.Envelope) {
		e.Thread, e.Parent = thread, first.Envelope.Message
	}))[0]
	orphan := h.ingest(envText(t, "CLAUDE", "CHATGPT", envelope.IntentRespond, group, "orphan", func(e *envelope.Envelope) {
		e.Thread, e.Parent = thread, "pa"+rlo+"rent"+zwsp
	}))[0]
	for _, o := range []gateway.Outcome{reply, orphan} {
		if !o.Accepted() {
			t.Fatalf("reply refused: %v", o.Reject)
		}
	}
	// An intent of the author's own (the lenient reader takes X- intents)
	// with a bidi override, owed by claude.
	ask := "[[CHATGPT→CLAUDE v1]]\nintent: X-AS" + rlo + "K<b>\ncontext: " + group + "\nmeta: obligation\nBlocks: halted\nDefault-Action: proceed<i>\nbody: |\n  an intent of my own\n[[END]]\n"
	if o := h.ingest(ask)[0]; !o.Accepted() {
		t.Fatalf("X- intent refused: %v", o.Reject)
	}
	// A note with a bidi override, by claude about the first envelope.
	if _, err := h.relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDefer, Group: group, EventID: first.Event.ID, Actor: "claude", Note: "later" + rlo + "now " + emoji}); err != nil {
		t.Fatal(err)
	}
	// A claim and a message by a name recorded before the identifier rule.
	old := "cla" + rlo + "ude" + zwsp
	env := envelope.New("CLA"+rlo+"UDE", "CHATGPT", envelope.IntentRequest, "old")
	env.Context, env.Thread, env.Parent, env.Message = group, thread, first.Envelope.Message, "old-message"
	msg, _ := json.Marshal(gateway.EventData{Text: "old", Format: "plain", Priority: "normal", To: []string{"chatgpt"},
		X: &gateway.XCrosstalk{Envelope: env, Sender: old, Transport: "test", Verification: gateway.StatusUnsigned}})
	claim, _ := json.Marshal(gateway.EventData{ActorID: old, EventID: first.Event.ID})
	if _, err := h.store.Append(t.Context(), []ledger.Record{
		{Kind: gateway.KindMessage, GroupID: group, By: old, Data: msg},
		{Kind: gateway.KindClaim, GroupID: group, By: old, Data: claim},
	}); err != nil {
		t.Fatal(err)
	}
	// A reply to the old name's message names it as the parent's sender.
	if o := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRespond, group, "to the old one", func(e *envelope.Envelope) {
		e.Thread, e.Parent = thread, "old-message"
	}))[0]; !o.Accepted() {
		t.Fatalf("reply to the old message refused: %v", o.Reject)
	}

	// A first use and a key change by a sender whose name is HTML, under
	// a key id holding HTML, for the trust page and its confirmations.
	const pkid = `k<i>"@example.com`
	k1, err := signing.GenerateKey(signing.Ed25519, pkid)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := signing.GenerateKey(signing.Ed25519, pkid)
	var changed string
	for i, k := range []*signing.PrivateKey{k1, k2} {
		signed, err := signing.Sign([]byte(envText(t, "<B>EVIL</B>", "CLAUDE", envelope.IntentRequest, group, "signed")), k, &signing.SignOptions{Announce: true})
		if err != nil {
			t.Fatal(err)
		}
		o := h.ingest(string(signed))[0]
		if want := []string{gateway.StatusFirstUse, gateway.StatusKeyChanged}[i]; o.Verification.Status != want {
			t.Fatalf("signed envelope %d: %+v, want %s", i, o.Verification, want)
		}
		changed = o.Event.ID
	}

	groupPath := "/ui/groups/" + url.PathEscape(group)
	threadPath := groupPath + "/threads/" + url.PathEscape(thread)
	pages := []string{"/", groupPath, threadPath, "/ui/agents", "/ui/agents/claude", "/ui/agents/chatgpt", "/ui/handoffs", "/ui/trust",
		"/ui/compose?reply=" + url.QueryEscape(first.Event.ID),
		"/ui/groups/" + url.PathEscape(group) + "/threads/" + url.PathEscape("no"+rlo+"such"),
	}
	check := func(what string, code int, body string, emojis bool) {
		t.Helper()
		if emojis && !strings.Contains(shownText(body), emoji) {
			t.Errorf("%s does not show the emoji sequence %q intact", what, emoji)
		}
		if code >= 500 {
			t.Errorf("%s = %d", what, code)
		}
		mustNotContain(t, what, body, "<script>alert", "<img src=x", "<b>", "<i>")
		for _, m := range hrefs.FindAllStringSubmatch(body, -1) {
			u := strings.ToLower(m[2])
			if !strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "#") || strings.HasPrefix(u, "//") {
				t.Errorf("%s: %s=%q leaves the relay", what, m[1], m[2])
			}
		}
		if txt := shownText(body); strings.ContainsAny(txt, rlo+zwsp) {
			for _, line := range strings.Split(txt, "\n") {
				if strings.ContainsAny(line, rlo+zwsp) {
					t.Errorf("%s shows a raw bidi or zero-width character: %q", what, strings.TrimSpace(line))
				}
			}
		}
	}
	for _, p := range pages {
		code, body := h.get(p)
		check("GET "+p, code, body, p == groupPath || p == threadPath || p == "/ui/handoffs" || strings.HasPrefix(p, "/ui/compose"))
	}
	// The live stream, at the URL the page's script builds
	// (encodeURIComponent, which leaves ' ( ) unescaped): every item as
	// the page shows it.
	evs := h.events(group)
	h.csrf() // a session
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	streamURL := h.srv.URL + "/ui/groups/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E%22'/stream?since_seq=0"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", streamURL, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var last string
	for last != strconv.FormatInt(evs[len(evs)-1].Seq, 10) && sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last = id
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var it struct{ HTML string }
			if err := json.Unmarshal([]byte(data), &it); err != nil {
				t.Fatalf("stream data %q: %v", data, err)
			}
			check("stream item "+last, 200, it.HTML, false)
		}
	}
	if last != strconv.FormatInt(evs[len(evs)-1].Seq, 10) {
		t.Fatalf("stream ended at item %q: %v", last, sc.Err())
	}
	cancel()

	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/ui/trust/pin", url.Values{"event": {changed}}},
		{"/ui/trust/revoke", url.Values{"pkid": {pkid}}},
	} {
		res, body := h.post(tc.path, tc.form)
		if res.StatusCode != http.StatusOK {
			t.Errorf("POST %s = %d, want the confirmation", tc.path, res.StatusCode)
		}
		check("POST "+tc.path, res.StatusCode, body, false)
	}

	chat := "pasted:\n" + envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, group, "<script>alert(5)</script>", func(e *envelope.Envelope) {
		e.Thread, e.Parent, e.Message = "t"+rlo+zwsp, "p"+rlo, "m2"+zwsp
		e.Meta = []envelope.Meta{{Namespace: "x-note", Fields: []envelope.Field{{Key: "K", Value: "v" + rlo}}}}
	}) + strings.ReplaceAll(ask, "context: "+group, "context: pasted")
	for _, op := range []string{"preview", "send"} {
		res, body := h.post("/ui/paste", url.Values{"op": {op}, "text": {chat}})
		check("POST /ui/paste op="+op, res.StatusCode, body, false)
	}
	if res, body := h.post("/ui/compose", url.Values{"from": {"CLAUDE"}, "to": {"CHATGPT"}, "intent": {"REQUEST"}, "context": {group}, "thread": {"t" + rlo}, "body": {"<script>alert(6)</script>"}}); res.StatusCode != http.StatusOK {
		t.Errorf("compose = %d\n%s", res.StatusCode, body)
	} else {
		check("POST /ui/compose", res.StatusCode, body, false)
	}
}

// TestLoginGuessesBounded: the login form checks tokens as the gate does,
// counting unknown ones against the caller's address, so it cannot be
// used to guess tokens at the pages' rate (1000 at once, then 500/s):
// past api.TokenGuessBurst every login, with the right token too, is 429
// with the same message and no session, until the bucket refills. A
// wrong token's error never says whether a token exists.
func TestLoginGuessesBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	toks := map[string]string{"claude-token-0123456789": "claude"}
	h := newHarness(t, &harnessOptions{tokens: toks, now: clock})
	login := func(token string) (int, string) {
		res, body := h.post("/ui/login", url.Values{"token": {token}, "next": {"/"}})
		return res.StatusCode, body
	}
	for i := range api.TokenGuessBurst {
		if code, body := login(fmt.Sprintf("guess-%d-0123456789", i)); code != http.StatusUnauthorized || !strings.Contains(body, "unknown token") {
			t.Fatalf("guess %d = %d, want 401 unknown token\n%s", i, code, body)
		}
	}
	var shown []string
	for _, token := range []string{"guess-x-0123456789", "claude-token-0123456789"} {
		code, body := login(token)
		if code != http.StatusTooManyRequests {
			t.Fatalf("login with %s past the bound = %d, want 429\n%s", token, code, body)
		}
		shown = append(shown, between(t, body, `<p class="error" role="alert">`, `</p>`))
	}
	if shown[0] != shown[1] || shown[0] == "unknown token" {
		t.Errorf("past the bound a wrong token shows %q, the right one %q: want the same, saying nothing of the token", shown[0], shown[1])
	}
	if code, _ := h.get("/ui/agents/claude"); code != http.StatusUnauthorized {
		t.Errorf("GET after a refused login = %d, want 401 (no session)", code)
	}
	clockMu.Lock()
	now = now.Add(time.Duration(float64(time.Second) / api.TokenGuessRate))
	clockMu.Unlock()
	if code, body := login("claude-token-0123456789"); code != http.StatusSeeOther {
		t.Errorf("login after the refill = %d, want 303\n%s", code, body)
	}
}
