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

var (
	groupHref  = regexp.MustCompile(`href="(/ui/groups/[^"/#]*)"><bdi class="clip" title="[^"]*">([^<]*)</bdi>`)
	threadHref = regexp.MustCompile(`href="(/ui/groups/[^"/#]*/threads/[^"/#]*)#e\d+"`)
	streamAttr = regexp.MustCompile(`data-stream="([^"]*)"`)
)

// TestDotGroupNames: a group named "." or ".." — an envelope's context
// may be either — is reachable from the inbox like any other: its link on
// the groups page has no segment a browser or Go's ServeMux would clean
// away, and the group page, its thread page, its live stream's path and
// Mark all read (which comes back to the group) name it. The tilde escape does not capture a group that starts with a
// tilde.
func TestDotGroupNames(t *testing.T) {
	h := newHarness(t, nil)
	groups := []string{".", "..", "~.", "~~..", "~deploy", "...", ".x"}
	for _, g := range groups {
		h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, g, "body of group "+g))
	}
	_, index := h.get("/")
	links := map[string]string{} // group name → its link on the groups page
	for _, m := range groupHref.FindAllStringSubmatch(index, -1) {
		links[html.UnescapeString(m[2])] = html.UnescapeString(m[1])
	}
	for _, g := range groups {
		t.Run(g, func(t *testing.T) {
			link := links[g]
			if link == "" {
				t.Fatalf("no link to group %q on the groups page; links: %v", g, links)
			}
			seg, err := url.PathUnescape(strings.TrimPrefix(link, "/ui/groups/"))
			if err != nil || seg == "." || seg == ".." {
				t.Fatalf("link %q: a dot segment, which browsers remove (err %v)", link, err)
			}
			status, body := h.get(link)
			if status != http.StatusOK || !strings.Contains(body, "Group <bdi>"+html.EscapeString(g)+"</bdi>") {
				t.Fatalf("GET %s = %d, want the page of group %q:\n%.800s", link, status, g, body)
			}
			m := streamAttr.FindStringSubmatch(body)
			if m == nil || html.UnescapeString(m[1]) != link+"/stream" {
				t.Errorf("group %q: data-stream = %v, want %q", g, m, link+"/stream")
			}
			if res, body := h.post(link+"/read", url.Values{}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != link {
				t.Errorf("POST %s/read = %d to %q, want 303 back to %s:\n%.600s", link, res.StatusCode, res.Header.Get("Location"), link, body)
			}
			th := threadHref.FindStringSubmatch(body)
			if th == nil {
				t.Fatalf("group %q: no thread link on its page", g)
			}
			thLink := html.UnescapeString(th[1])
			if !strings.HasPrefix(thLink, link+"/threads/") {
				t.Errorf("thread link %q is not under the group's %q", thLink, link)
			}
			if status, body := h.get(thLink); status != http.StatusOK || !strings.Contains(body, "body of group "+g) {
				t.Errorf("GET %s = %d, want the thread in group %q:\n%.800s", thLink, status, g, body)
			}
		})
	}
}
