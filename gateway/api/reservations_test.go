package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// mountReservations mounts the reservation endpoints over the
// harness's ledger, as `crosstalk relay` does.
func mountReservations(t *testing.T) func(*api.Server, ledger.Store) {
	return func(a *api.Server, st ledger.Store) {
		svc, err := reserve.NewService(context.Background(), st, reserve.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a.MountReservations(svc)
	}
}

func TestReservationsAPI(t *testing.T) {
	const claudeTok, gptTok = "claude-token-0123456789", "chatgpt-token-0123456789"
	h := newHarness(t, &api.Options{Tokens: map[string]string{claudeTok: "claude", gptTok: "chatgpt"}}, mountReservations(t))
	asClaude := []string{"Authorization", "Bearer " + claudeTok}
	asGPT := []string{"Authorization", "Bearer " + gptTok}

	var got api.ReserveAnswer
	h.json("POST", "/v1/reservations", `{"agent":"claude","scopes":["src/auth/*","docs/api.md"],"ttl":"30m","reason":"login flow"}`, http.StatusOK, &got, asClaude...)
	if !got.Granted || len(got.Reservations) != 2 || got.Reservations[0].Agent != "claude" {
		t.Fatalf("reserve = %+v", got)
	}
	// An agent reserves only as itself.
	h.json("POST", "/v1/reservations", `{"agent":"claude","scopes":["x"]}`, http.StatusForbidden, nil, asGPT...)
	h.json("DELETE", "/v1/reservations?agent=claude&scope=docs/api.md", "", http.StatusForbidden, nil, asGPT...)
	// Another agent's overlap is refused with holder, scope and class.
	got = api.ReserveAnswer{}
	h.json("POST", "/v1/reservations", `{"agent":"chatgpt","scopes":["src/auth/login.go"]}`, http.StatusOK, &got, asGPT...)
	if got.Granted || len(got.Conflicts) != 1 || got.Conflicts[0].Holder != "claude" || got.Conflicts[0].HeldScope != "src/auth/*" || got.Conflicts[0].Class != reserve.Partial {
		t.Fatalf("overlap = %+v", got)
	}
	// Bad input is a 400 naming it.
	for _, body := range []string{`{"agent":"chatgpt","scopes":["../etc"]}`, `{"agent":"chatgpt","scopes":[]}`, `{"agent":"chatgpt","scopes":["x"],"ttl":"1ms"}`, `{"agent":"chatgpt","scopes":["x"],"ttl":"soon"}`, `{"scopes":["x"],"extra":1}`} {
		h.json("POST", "/v1/reservations", body, http.StatusBadRequest, nil, asGPT...)
	}
	var list struct{ Reservations []reserve.Reservation }
	h.json("GET", "/v1/reservations?path=src/auth/login.go", "", http.StatusOK, &list, asGPT...)
	if len(list.Reservations) != 1 || list.Reservations[0].Scope != "src/auth/*" {
		t.Fatalf("who holds src/auth/login.go: %+v", list)
	}
	h.json("GET", "/v1/reservations?path=/etc", "", http.StatusBadRequest, nil, asGPT...)
	// Release: not held is 409; the holder's release frees the scope.
	h.json("DELETE", "/v1/reservations?agent=chatgpt&scope=src/auth/*", "", http.StatusConflict, nil, asGPT...)
	h.json("DELETE", "/v1/reservations?agent=claude&scope=src/auth/*", "", http.StatusOK, nil, asClaude...)
	got = api.ReserveAnswer{}
	h.json("POST", "/v1/reservations", `{"agent":"chatgpt","scopes":["src/auth/login.go"]}`, http.StatusOK, &got, asGPT...)
	if !got.Granted {
		t.Fatalf("after release: %+v", got)
	}
	h.json("GET", "/v1/reservations", "", http.StatusOK, &list, asGPT...)
	if len(list.Reservations) != 2 {
		t.Fatalf("list = %+v", list)
	}
}

// TestReservationsAreSightings: docs/agents.md "Liveness" counts an API
// call as the agent — reservations among them — as a sighting. On a
// relay without tokens (the zero-configuration default), where a
// principal's requests are not the agent's, `crosstalk reserve --agent
// A` and `release` left A stale; so did reading what A owes or waits
// on as A (`crosstalk inbox --agent A --owe`).
func TestReservationsAreSightings(t *testing.T) {
	mountR := mountReservations(t)
	h := newHarness(t, &api.Options{}, func(a *api.Server, st ledger.Store) {
		mountR(a, st)
		a.MountAgents(nil)
	})
	for _, tc := range []struct {
		agent, method, path, body string
		hint                      bool
	}{
		{"claude", "POST", "/v1/reservations", `{"agent":"claude","scopes":["src/a"]}`, false},
		{"chatgpt", "POST", "/v1/reservations", `{"agent":"chatgpt","scopes":["src/b"]}`, false},
		{"gemini", "GET", "/v1/agents/gemini/owe", "", true},
		{"pat", "GET", "/v1/agents/pat/waiting", "", true},
	} {
		var hdr []string
		if tc.hint {
			hdr = []string{"X-Crosstalk-Agent", tc.agent}
		}
		h.json(tc.method, tc.path, tc.body, http.StatusOK, nil, hdr...)
		if _, ok := h.relay.LastSeen()[tc.agent]; !ok {
			t.Errorf("%s %s as %s: not a sighting of %s", tc.method, tc.path, tc.agent, tc.agent)
		}
	}
	// Another's list read without the hint (a page, a bystander) is not
	// the agent's activity.
	h.json("GET", "/v1/agents/lurker/owe", "", http.StatusOK, nil)
	if _, ok := h.relay.LastSeen()["lurker"]; ok {
		t.Errorf("reading lurker's owe list without the hint made it a sighting")
	}
	h.json("DELETE", "/v1/reservations?agent=claude&scope=src/a", "", http.StatusOK, nil)
}
