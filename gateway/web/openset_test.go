package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// openSetItems is the page of each open-set list (web.openSetItems).
const openSetItems = 50

var (
	oweAttr     = regexp.MustCompile(`data-owe="([^"]+)"`)
	waitingAttr = regexp.MustCompile(`data-waiting="([^"]+)"`)
	moreHref    = regexp.MustCompile(`<a rel="next" href="([^"]+)">more →`)
)

// walkOpenSet follows an open-set list's "more" links (the ones setting
// param) from path and
// returns the ids of every row, failing on a row shown twice or a page
// over the bounds.
func walkOpenSet(t *testing.T, h *harness, path, param string, attr *regexp.Regexp) []string {
	t.Helper()
	var all []string
	seen := map[string]bool{}
	for pages := 0; path != ""; pages++ {
		if pages > 20 {
			t.Fatalf("more than 20 pages from %s", path)
		}
		code, body := h.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", path, code, body)
		}
		ms := attr.FindAllStringSubmatch(body, -1)
		if len(ms) > openSetItems || len(body) > maxPageHTML {
			t.Errorf("GET %s = %d rows, %d bytes; want ≤ %d rows and ≤ %d bytes", path, len(ms), len(body), openSetItems, maxPageHTML)
		}
		for _, m := range ms {
			if seen[m[1]] {
				t.Errorf("GET %s: row %s is on two pages", path, m[1])
			}
			seen[m[1]] = true
			all = append(all, m[1])
		}
		path = ""
		for _, m := range moreHref.FindAllStringSubmatch(body, -1) {
			if p := html.UnescapeString(m[1]); strings.Contains(p, param+"=") {
				path = p
			}
		}
	}
	return all
}

// TestAgentPageOpenSets: an agent's page lists what it owes and what it
// waits on in pages of at most openSetItems, with names isolated and the
// author's words escaped; the author discharges from its page, and the
// discharged obligation shows again only with ?settled=1 (issue #14).
func TestAgentPageOpenSets(t *testing.T) {
	h := newHarness(t, nil)
	const n = openSetItems + 7
	var ids []string
	var group string
	for range n {
		out := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "ops", "review PR", func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"},
				{Key: "Default-Action", Value: "<script>alert(1)</script> ship " + strings.Repeat("x", 400)}}}}
		}))[0]
		if !out.Accepted() {
			t.Fatalf("obligation refused: %+v", out.Reject)
		}
		ids, group = append(ids, out.Event.ID), out.Event.GroupID
	}
	if got := walkOpenSet(t, h, "/ui/agents/claude", "owe_after", oweAttr); len(got) != n {
		t.Errorf("claude's owe pages list %d rows, want %d", len(got), n)
	}
	if got := walkOpenSet(t, h, "/ui/agents/chatgpt", "waiting_after", waitingAttr); len(got) != n {
		t.Errorf("chatgpt's waiting pages list %d rows, want %d", len(got), n)
	}
	_, body := h.get("/ui/agents/chatgpt")
	mustContain(t, "chatgpt's page", body, "What <bdi>chatgpt</bdi> waits on (50+)", `<bdi class="clip" title="ops">ops</bdi> #1</a>`,
		"&lt;script&gt;alert(1)&lt;/script&gt; ship", `value="discharge">Discharge</button>`, "nobody yet")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, strings.Repeat("x", 200)) {
		t.Errorf("chatgpt's page shows the default action unescaped or whole")
	}
	_, body = h.get("/ui/agents/claude")
	mustContain(t, "claude's page", body, "What <bdi>claude</bdi> owes (50+)", "must_respond (obligation)", "halted", "<bdi>claude</bdi> waits on nothing")

	// The recipient may not discharge; the author does, from its page.
	if res, _ := h.post("/ui/agents/claude/act", url.Values{"action": {"discharge"}, "group": {group}, "event": {ids[0]}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("claude's discharge = %d, want 403", res.StatusCode)
	}
	if res, body := h.post("/ui/agents/chatgpt/act", url.Values{"action": {"discharge"}, "group": {group}, "event": {ids[0]}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("chatgpt's discharge = %d\n%s", res.StatusCode, body)
	}
	for _, tc := range []struct {
		path, attr string
		shown      bool
	}{
		{"/ui/agents/claude", "data-owe", false},
		{"/ui/agents/claude?settled=1", "data-owe", true},
		{"/ui/agents/chatgpt", "data-waiting", false},
		{"/ui/agents/chatgpt?settled=1", "data-waiting", true},
	} {
		_, body := h.get(tc.path)
		if got := strings.Contains(body, tc.attr+`="`+ids[0]+`"`); got != tc.shown {
			t.Errorf("GET %s lists the discharged obligation: %v, want %v", tc.path, got, tc.shown)
		}
	}
	_, body = h.get("/ui/agents/chatgpt?settled=1")
	mustContain(t, "chatgpt's page with settled", body, "discharged by <bdi>chatgpt</bdi>", "Hide what is settled")
}
