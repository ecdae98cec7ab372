package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestUnreadCountsCountedOnce: the groups page, drawn again each second
// the ledger changes, counted every group's unread messages each time,
// decoding up to 400 of others' messages per group for an agent viewer
// (100 groups of them: ~200 ms a draw). A group whose last seq and the
// viewer's cursor did not move is now not read again; one that changed
// is, and its count follows.
func TestUnreadCountsCountedOnce(t *testing.T) {
	var rc *readCounter
	h := newHarness(t, &harnessOptions{
		tokens: map[string]string{"claude-token-0123456789": "claude"},
		wrap:   func(st ledger.Store) ledger.Store { rc = &readCounter{Store: st}; return rc },
	})
	msg := func(group, to string, i int) ledger.Record {
		env := envelope.New("CHATGPT", to, envelope.IntentRequest, fmt.Sprintf("hello %d", i))
		b, err := json.Marshal(gateway.EventData{Text: env.Body, To: []string{h.relay.Book().ActorID(to)},
			X: &gateway.XCrosstalk{Envelope: env, Transport: "test", Sender: "chatgpt", Verification: gateway.StatusUnsigned}})
		if err != nil {
			t.Fatal(err)
		}
		return ledger.Record{Kind: gateway.KindMessage, GroupID: group, By: "chatgpt", Data: b}
	}
	var recs []ledger.Record
	for g := range 5 {
		for i := range 50 {
			recs = append(recs, msg(fmt.Sprintf("grp-%d", g), "GEMINI", i))
		}
		recs = append(recs, msg(fmt.Sprintf("grp-%d", g), "CLAUDE", 0), msg(fmt.Sprintf("grp-%d", g), "CLAUDE", 1))
	}
	if _, err := rc.Store.Append(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.post("/ui/login", url.Values{"token": {"claude-token-0123456789"}, "next": {"/"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %s", res.Status)
	}
	unread := regexp.MustCompile(`href="/ui/groups/(grp-\d)">.*?</a></th><td>\d+</td><td>(?:<span class="count">)?(\d+)`)
	counts := func() map[string]string {
		t.Helper()
		code, body := h.get("/")
		if code != http.StatusOK {
			t.Fatalf("GET / = %d", code)
		}
		out := map[string]string{}
		for _, m := range unread.FindAllStringSubmatch(body, -1) {
			out[m[1]] = m[2]
		}
		return out
	}
	if got := counts(); len(got) != 5 || got["grp-0"] != "2" || got["grp-4"] != "2" {
		t.Fatalf("unread counts = %v, want 2 in each of 5 groups", got)
	}
	rc.ranged.Store(0)
	if got := counts(); got["grp-3"] != "2" {
		t.Fatalf("unread counts drawn again = %v, want 2 each", got)
	}
	if n := rc.ranged.Load(); n != 0 {
		t.Errorf("drawing the page again, nothing changed, read %d events of groups; want 0", n)
	}
	if _, err := rc.Store.Append(t.Context(), []ledger.Record{msg("grp-1", "CLAUDE", 2)}); err != nil {
		t.Fatal(err)
	}
	rc.ranged.Store(0)
	if got := counts(); got["grp-1"] != "3" || got["grp-0"] != "2" {
		t.Errorf("unread counts after a new message in grp-1 = %v, want 3 there, 2 elsewhere", got)
	}
	if n := rc.ranged.Load(); n == 0 || n > 53 {
		t.Errorf("after one group changed, the page read %d events of groups; want grp-1's 53 at most", n)
	}
}
