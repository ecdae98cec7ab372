package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPagesActOnlyAsTheActor: on the pages too a principal acts only as
// its own actor id: "ſam" (U+017F, which a Unicode case fold matches to
// "sam" but the ledger records as another actor) is another agent, whose
// page and actions are refused with 403, as on the API.
func TestPagesActOnlyAsTheActor(t *testing.T) {
	const tok = "sam-token-0123456789"
	h := newHarness(t, &harnessOptions{tokens: map[string]string{tok: "sam"}})
	auth := []string{"Authorization", "Bearer " + tok}
	h.ingest(envText(t, "GEMINI", "ſAM", "REQUEST", "ops", "for the other actor"))
	ev := h.events("ops")[0]
	if res, _ := h.do(h.client, http.MethodGet, "/ui/agents/%C5%BFam", nil, auth...); res.StatusCode != http.StatusForbidden {
		t.Errorf("GET /ui/agents/ſam as sam = %d, want 403", res.StatusCode)
	}
	form := url.Values{"action": {"ack"}, "group": {"ops"}, "event": {ev.ID}}
	res, _ := h.do(h.client, http.MethodPost, "/ui/agents/%C5%BFam/act", strings.NewReader(form.Encode()), append(auth, "Content-Type", "application/x-www-form-urlencoded")...)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("POST /ui/agents/ſam/act as sam = %d, want 403", res.StatusCode)
	}
	for _, e := range h.events("ops") {
		if e.By == "ſam" {
			t.Errorf("ops holds %s by ſam, recorded with sam's token", e.Kind)
		}
	}
	if res, _ := h.do(h.client, http.MethodGet, "/ui/agents/SAM", nil, auth...); res.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/agents/SAM as sam = %d, want 200", res.StatusCode)
	}
}
