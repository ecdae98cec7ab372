package web_test

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// maxPageHTML is the most HTML any page may carry (issue 13).
const maxPageHTML = 200 << 10

var (
	seqAttr    = regexp.MustCompile(`data-seq="(\d+)"`)
	eventAttr  = regexp.MustCompile(`data-event="([^"]+)"`)
	olderHref  = regexp.MustCompile(`<a rel="next" href="([^"]+)">older`)
	newerHref  = regexp.MustCompile(`<a rel="prev" href="([^"]+)">← newer`)
	pageBounds = []int{100, maxPageHTML}
)

// walkPages follows the "older" links from path and returns every match
// of attr over all pages, checking that each page has at most 100 of
// them and at most maxPageHTML bytes, and that each page's "newer" link
// leads back to a page with the same first item.
func walkPages(t *testing.T, h *harness, path string, attr *regexp.Regexp) []string {
	t.Helper()
	var all []string
	seen := map[string]bool{}
	for pages := 0; path != ""; pages++ {
		if pages > 200 {
			t.Fatalf("more than 200 pages from %s", path)
		}
		code, body := h.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d\n%s", path, code, body)
		}
		ms := attr.FindAllStringSubmatch(body, -1)
		if len(ms) > pageBounds[0] || len(body) > pageBounds[1] {
			t.Errorf("GET %s = %d items, %d bytes; want ≤ %d items and ≤ %d bytes", path, len(ms), len(body), pageBounds[0], pageBounds[1])
		}
		for _, m := range ms {
			if seen[m[1]] {
				t.Errorf("GET %s: item %s is on two pages", path, m[1])
			}
			seen[m[1]] = true
			all = append(all, m[1])
		}
		path = ""
		if m := olderHref.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	return all
}

// TestPagesBounded checks that the group, thread and agent pages of a
// ledger of thousands of events are pages: at most 100 items and 200 KB
// of HTML each, and that their older links reach every item once.
func TestPagesBounded(t *testing.T) {
	h := newHarness(t, nil)
	const n = 400
	body := strings.Repeat("A long review note. ", 100) // 2 KB
	var batch strings.Builder
	for i := range n {
		batch.WriteString(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "big", fmt.Sprintf("%d %s", i, body)))
		batch.WriteString("\n")
		if (i+1)%200 == 0 {
			h.ingest(batch.String())
			batch.Reset()
		}
	}
	// One long thread: a chain of replies.
	first := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "big", "thread start"))[0].Envelope
	prev := first
	for i := range 150 {
		r := envelope.NewReply(prev, envelope.IntentRespond, fmt.Sprintf("reply %d", i))
		r.From, r.To = prev.To, prev.From
		b, err := envelope.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		prev = h.ingest(string(b))[0].Envelope
	}
	total := n + 151

	seqs := walkPages(t, h, "/ui/groups/big", seqAttr)
	if len(seqs) != total {
		t.Errorf("group pages show %d items, want all %d", len(seqs), total)
	}
	if got := walkPages(t, h, "/ui/groups/big/threads/"+first.Thread, seqAttr); len(got) != 151 {
		t.Errorf("thread pages show %d items, want 151", len(got))
	}
	// claude's own 75 replies are silent to claude.
	if got := walkPages(t, h, "/ui/agents/claude", eventAttr); len(got) != total-75 {
		t.Errorf("agent pages show %d deliveries, want all %d", len(got), total-75)
	}
	code, index := h.get("/")
	if code != 200 || len(index) > maxPageHTML {
		t.Errorf("GET / = %d, %d bytes; want 200 and ≤ %d", code, len(index), maxPageHTML)
	}

	// A newer link leads back.
	_, newest := h.get("/ui/groups/big")
	older := html.UnescapeString(olderHref.FindStringSubmatch(newest)[1])
	_, page2 := h.get(older)
	m := newerHref.FindStringSubmatch(page2)
	if m == nil {
		t.Fatalf("GET %s has no newer link", older)
	}
	_, back := h.get(html.UnescapeString(m[1]))
	if a, b := seqAttr.FindString(back), seqAttr.FindString(newest); a != b {
		t.Errorf("newer of older starts at %s, want the newest page's %s", a, b)
	}
	for _, bad := range []string{"/ui/groups/big?before=x", "/ui/groups/big?before=-1", "/ui/groups/big?before=3&after=1", "/ui/agents/claude?after=y"} {
		if code, _ := h.get(bad); code != 400 {
			t.Errorf("GET %s = %d, want 400", bad, code)
		}
	}
}

// TestAgentsPageListsActors checks that an agent with mail but no live
// connection and no address book entry is on the Agents page, with what
// it owes, and that the page is paged by id.
func TestAgentsPageListsActors(t *testing.T) {
	h := newHarness(t, nil)
	h.ingest(envText(t, "CHATGPT", "BOB", envelope.IntentRequest, "g", "your turn"))
	for i := range 120 {
		h.ingest(envText(t, "CHATGPT", fmt.Sprintf("HUMAN%03d", i), envelope.IntentRequest, "g", "fyi"))
	}
	_, body := h.get("/ui/agents")
	row := regexp.MustCompile(`href="/ui/agents/bob"><bdi>bob</bdi></a></th>.*?</tr>`).FindString(body)
	if row == "" || !strings.Contains(row, `<span class="count attn">1</span>`) || !strings.Contains(row, "never seen") {
		t.Errorf("Agents page row of bob = %q, want bob listed, never seen, owing 1", row)
	}
	if n := strings.Count(body, `<th scope="row">`); n != 100 {
		t.Errorf("Agents page = %d rows, want a page of 100", n)
	}
	m := olderHref.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("Agents page has no older link")
	}
	_, page2 := h.get(html.UnescapeString(m[1]))
	if n := strings.Count(page2, `<th scope="row">`); n != 124-100 || !strings.Contains(page2, "human119") {
		t.Errorf("second Agents page = %d rows, want %d with human119", n, 124-100)
	}
}
