package api_test

import (
	"net/http"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestPrincipalActsOnlyAsItsActor: a principal acts as its own actor id
// and nothing else (docs/security.md, "What a token holder can and cannot
// do"). Names that only a Unicode case fold joins to it — "ſam" with
// U+017F LATIN SMALL LETTER LONG S, which strings.EqualFold matches to
// "sam" but which the ledger records as another actor — are another
// agent: every endpoint that names an agent refuses them with 403 and
// records nothing, while the principal's own name in upper case (the
// same actor id) is accepted.
func TestPrincipalActsOnlyAsItsActor(t *testing.T) {
	const tok = "sam-token-0123456789"
	var store ledger.Store
	h := newHarness(t, &api.Options{Tokens: map[string]string{tok: "sam", "gemini-token-0123456789": "gemini"}}, func(s *api.Server, st ledger.Store) {
		s.MountAgents(nil)
		mountReservations(t)(s, st)
		store = st
	})
	auth := []string{"Authorization", "Bearer " + tok}
	target := h.post(env("GEMINI", "ſAM", "REQUEST", "g", "for the other actor"), "Authorization", "Bearer gemini-token-0123456789")
	tests := []struct {
		name, method, path, body string
		header                   []string
		want                     int
	}{
		{"heartbeat", "POST", "/v1/agents/%C5%BFam/heartbeat", "", nil, http.StatusForbidden},
		{"cursors", "GET", "/v1/agents/%C5%BFam/cursors", "", nil, http.StatusForbidden},
		{"deliveries", "GET", "/v1/agents/%C5%BFam/deliveries", "", nil, http.StatusForbidden},
		{"owe", "GET", "/v1/agents/%C5%BFam/owe", "", nil, http.StatusForbidden},
		{"stream", "GET", "/v1/agents/%C5%BFam/stream", "", nil, http.StatusForbidden},
		{"notify", "POST", "/v1/agents/%C5%BFam/notify", `{"group":"g","kind":"delivery_failed"}`, nil, http.StatusForbidden},
		{"reserve", "POST", "/v1/reservations", `{"agent":"ſam","scopes":["x/*"]}`, nil, http.StatusForbidden},
		{"release", "DELETE", "/v1/reservations?agent=%C5%BFam&scope=x/*", "", nil, http.StatusForbidden},
		{"ack as", "POST", "/v1/groups/g/events/" + target.EventID + "/ack", "", []string{"X-Crosstalk-Agent", "ſam"}, http.StatusForbidden},
		{"send from", "POST", "/v1/send", `{"from":"ſam","to":"GEMINI","intent":"INFORM","body":"x"}`, nil, http.StatusForbidden},
		{"envelope from", "POST", "/crosstalk/receive", env("ſAM", "GEMINI", "INFORM", "g", "posing"), []string{"Accept", "application/json"}, http.StatusForbidden},
		{"own name in upper case", "POST", "/v1/agents/SAM/heartbeat", "", nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status := h.status(tt.method, tt.path, tt.body, append(auth, tt.header...)...); status != tt.want {
				t.Errorf("%s %s as sam = %d, want %d", tt.method, tt.path, status, tt.want)
			}
		})
	}
	logged, err := store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logged {
		ev := l.Event
		if ev.By == "ſam" {
			t.Errorf("the ledger holds %s %s by ſam, recorded with sam's token", ev.Kind, ev.ID)
		}
	}
}

// status sends a request and returns its status without reading the
// body, which a stream accepted by mistake would never end.
func (h *harness) status(method, path, body string, header ...string) int {
	h.t.Helper()
	res := h.send(method, path, body, header...)
	res.Body.Close()
	return res.StatusCode
}
