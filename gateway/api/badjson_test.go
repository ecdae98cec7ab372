package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// TestMalformedJSONBodies: every JSON endpoint answers a malformed body —
// a wrong type, 10 000 nested arrays, a number past float64, trailing
// garbage, bytes that are not UTF-8, an unknown field, JSON over 2 MiB —
// with 400 (413 for the size) and a JSON error body, never a 500, and
// records nothing.
func TestMalformedJSONBodies(t *testing.T) {
	const tok = "claude-token-0123456789"
	var store ledger.Store
	h := newHarness(t, &api.Options{Tokens: map[string]string{tok: "claude"}}, func(s *api.Server, st ledger.Store) {
		s.MountAgents(nil)
		svc, err := reserve.NewService(t.Context(), st, reserve.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.MountReservations(svc)
		store = st
	})
	auth := []string{"Authorization", "Bearer " + tok}
	target := h.post(env("CLAUDE", "CHATGPT", "REQUEST", "g", "a question"), auth...)
	logged, err := store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	recorded := len(logged)
	bodies := []struct{ name, body string }{
		{"wrong type", `{"to":1,"agent":2,"group":3,"signal":4,"scopes":"x","event_id":5}`},
		{"nested 10 000 deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000)},
		{"nested in a field", `{"note":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`},
		{"number past float64", `{"takeover_stale":1e999999}`},
		{"trailing garbage", `{} garbage`},
		{"second value", `{} {}`},
		{"not UTF-8", "\xff\xfe{\"to\":\"x\"}"},
		{"unknown field", `{"wibble":true}`},
		{"unterminated", `{"to":"GEMINI"`},
		{"over 2 MiB", `{"note":"` + strings.Repeat("n", 2<<20) + `"}`},
	}
	endpoints := []struct{ method, path string }{
		{"POST", "/v1/send"},
		{"POST", "/v1/forward"},
		{"POST", "/v1/groups/g/events/" + target.EventID + "/defer"},
		{"POST", "/v1/agents/claude/notify"},
		{"POST", "/v1/reservations"},
	}
	for _, ep := range endpoints {
		for _, b := range bodies {
			t.Run(ep.path+"/"+b.name, func(t *testing.T) {
				status, out := h.do(ep.method, ep.path, b.body, auth...)
				want := http.StatusBadRequest
				if b.name == "over 2 MiB" {
					want = http.StatusRequestEntityTooLarge
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				if status != want || json.Unmarshal(out, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
					t.Errorf("%s %s with %s = %d %.300s, want %d and a JSON error", ep.method, ep.path, b.name, status, out, want)
				}
			})
		}
	}
	if logged, err := store.Log(t.Context(), 0, 1000); err != nil || len(logged) != recorded {
		t.Errorf("the ledger holds %d events (%v) after the malformed bodies, want %d", len(logged), err, recorded)
	}
}
