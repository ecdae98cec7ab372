package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestLongGroupName: a group name of 200 characters without a space does
// not widen the pages. Where the name stands beside other things (the
// groups table, an item's header, an agent's queue) it is clipped
// (class "clip") with the whole name in its title; the group's heading
// and a thread's crumb show it whole, and names wrap (the stylesheet's
// bdi rule; the envelope's canonical text is a pre, which wraps too). No page puts a style attribute in: the CSP allows only the
// stylesheet.
func TestLongGroupName(t *testing.T) {
	h := newHarness(t, nil)
	long := "L" + strings.Repeat("o", 198) + "g"
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, long, "a long group's request"))
	shown := regexp.MustCompile(`([^<>]*)<bdi([^>]*)>` + long + `</bdi>`)
	clipped := ` class="clip" title="` + long + `"`
	_, group := h.get("/ui/groups/" + long)
	th := threadHref.FindStringSubmatch(group)
	if th == nil {
		t.Fatalf("no thread link on the long group's page:\n%.800s", group)
	}
	for _, tc := range []struct {
		path    string
		clipped int // how many times the name is shown clipped
	}{
		{"/", 1},                  // the groups table
		{"/ui/groups/" + long, 0}, // the heading, whole
		{th[1], 0},                // the crumb, whole
		{"/ui/agents/claude", 2},  // what claude owes, the item's header
	} {
		res, body := h.do(h.client, http.MethodGet, tc.path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d\n%.800s", tc.path, res.StatusCode, body)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Fatalf("GET %s: CSP %q", tc.path, csp)
		}
		if strings.Contains(body, " style=") {
			t.Errorf("GET %s: a style attribute, which the CSP refuses", tc.path)
		}
		n := 0
		for _, m := range shown.FindAllStringSubmatch(body, -1) {
			switch {
			case m[2] == clipped:
				n++
			case m[2] == "" && m[1] == "Group ": // <h1>Group …, the crumb's "Group …"
			default:
				t.Errorf("GET %s shows the long name neither clipped nor as the heading: %q", tc.path, m[0][:min(len(m[0]), 80)])
			}
		}
		if n != tc.clipped {
			t.Errorf("GET %s shows the long name clipped %d times, want %d", tc.path, n, tc.clipped)
		}
	}
	_, css := h.get("/ui/static/style.css")
	for _, rule := range []string{"bdi { overflow-wrap: anywhere; }", ".clip { display: inline-block; max-width: 24ch; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;"} {
		if !strings.Contains(css, rule) {
			t.Errorf("style.css lacks %q", rule)
		}
	}
}
