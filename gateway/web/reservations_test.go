package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

// TestReservationsPage: the page lists who holds which paths with the
// holders' liveness, answers "who is touching this", shows a stale
// holder's takeover, escapes names, and pages.
func TestReservationsPage(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC))
	h := newHarness(t, &harnessOptions{now: clk.Now, stale: time.Minute})
	ctx := context.Background()
	reserveAs := func(agent string, takeover bool, scopes ...string) {
		t.Helper()
		if _, err := h.resv.Reserve(ctx, reserve.Request{Agent: agent, Scopes: scopes, TTL: time.Hour, Reason: "<b>work</b>", TakeoverStale: takeover}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.relay.Heartbeat(ctx, "claude"); err != nil {
		t.Fatal(err)
	}
	reserveAs("claude", false, "src/auth/*", "docs/api.md")
	reserveAs("<script>x</script>\u202e", false, "lib")

	code, body := h.get("/ui/reservations")
	if code != http.StatusOK || !strings.Contains(body, `href="/ui/reservations" aria-current="page"`) {
		t.Fatalf("page %d, no nav link:\n%s", code, body)
	}
	for _, want := range []string{"src/auth/*", "docs/api.md", "&lt;b&gt;work&lt;/b&gt;", "<bdi>&lt;script&gt;x&lt;/script&gt;", `class="liveness-active"`, "2026-01-13 10:00:00Z", "1h0m0s"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>x") || strings.Contains(body, "\u202e") {
		t.Fatal("an agent name was not escaped and shown")
	}

	// Who is touching src/auth/login.go: claude's src/auth/*, partial.
	code, body = h.get("/ui/reservations?path=" + url.QueryEscape("./src//auth/login.go"))
	if code != http.StatusOK || !strings.Contains(body, "src/auth/*") || !strings.Contains(body, "<td>partial</td>") || strings.Contains(body, "docs/api.md") {
		t.Fatalf("who is touching src/auth/login.go: %d\n%s", code, body)
	}
	if code, body = h.get("/ui/reservations?path=../etc"); code != http.StatusBadRequest || !strings.Contains(body, "root") {
		t.Fatalf("escaping path: %d\n%s", code, body)
	}

	// claude goes quiet: stale after a minute, then taken over.
	clk.Add(time.Minute)
	reserveAs("chatgpt", true, "src/auth/login.go")
	_, body = h.get("/ui/reservations")
	if !strings.Contains(body, `id="takeovers"`) || !strings.Contains(body, "(archived as expired)") || !strings.Contains(body, "src/auth/login.go") {
		t.Fatalf("takeover not shown:\n%s", body)
	}
	if !strings.Contains(body, `class="liveness-stale"`) {
		t.Fatalf("claude's remaining reservation does not show it stale:\n%s", body)
	}

	// Pages of pageItems (100).
	for i := range 120 {
		reserveAs("gemini", false, fmt.Sprintf("many/%03d", i))
	}
	_, body = h.get("/ui/reservations")
	i := strings.Index(body, `rel="next" href="`)
	if i < 0 {
		t.Fatal("no older link with 124 reservations")
	}
	next := body[i+len(`rel="next" href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	code, body = h.get(next)
	if code != http.StatusOK || !strings.Contains(body, "many/119") || strings.Contains(body, "many/000") || !strings.Contains(body, `rel="prev"`) {
		t.Fatalf("second page %s: %d\n%s", next, code, body)
	}
}
