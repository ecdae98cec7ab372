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
