package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestTokenGuessesBounded: an address may present api.TokenGuessBurst
// unknown bearer tokens (401 each), then every token it presents, the
// right one too, is 429 E-RATE unchecked — so the answers tell a guesser
// nothing — until the bucket refills; another address is not affected.
// Before, an unknown token was refused before the rate limit, so a
// guesser was bounded by nothing.
func TestTokenGuessesBounded(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st := memory.New(clock)
	defer st.Close()
	a := api.New(gateway.New(st, &gateway.Options{Now: clock}), &api.Options{Tokens: map[string]string{"right-token-0123456789": "claude"}})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(path, peer, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "http://localhost"+path, nil)
		req.RemoteAddr = peer
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const other = "192.0.2.2:1000"
	for i, path := range []string{"/v1/groups", "/"} {
		// A guesser of its own: the right token that passed from the
		// first after the refill is vouched for there.
		guesser := fmt.Sprintf("192.0.2.%d:1000", 10+i)
		t.Run(path, func(t *testing.T) {
			for i := range api.TokenGuessBurst {
				if rec := do(path, guesser, fmt.Sprintf("guess-%d-0123456789", i)); rec.Code != http.StatusUnauthorized {
					t.Fatalf("guess %d = %d %s, want 401", i, rec.Code, rec.Body)
				}
			}
			for _, tc := range []struct {
				name, peer, token string
				want              int
			}{
				{"one more guess", guesser, "guess-x-0123456789", http.StatusTooManyRequests},
				{"the right token from the guesser", guesser, "right-token-0123456789", http.StatusTooManyRequests},
				{"the right token from another address", other, "right-token-0123456789", http.StatusOK},
			} {
				rec := do(path, tc.peer, tc.token)
				if rec.Code != tc.want {
					t.Errorf("%s = %d %s, want %d", tc.name, rec.Code, rec.Body, tc.want)
				}
				if tc.want == http.StatusTooManyRequests && (!strings.Contains(rec.Body.String(), "E-RATE") || rec.Header().Get("Retry-After") == "") {
					t.Errorf("%s: body %s, Retry-After %q; want E-RATE and Retry-After", tc.name, rec.Body, rec.Header().Get("Retry-After"))
				}
			}
			mu.Lock()
			now = now.Add(time.Duration(float64(time.Second) / api.TokenGuessRate))
			mu.Unlock()
			if rec := do(path, guesser, "right-token-0123456789"); rec.Code != http.StatusOK {
				t.Errorf("the right token after the refill = %d %s, want 200", rec.Code, rec.Body)
			}
			mu.Lock()
			now = now.Add(time.Hour) // a full bucket for the next path
			mu.Unlock()
		})
	}
}

// TestTokenGuessesSpareKnownClients: past the bound on unknown tokens, a
// token that passed from the guesser's address before (a local client
// sharing loopback with the guesser) goes on; a right token never seen
// from there is refused unchecked as before, and so is a known one once
// api.TokenVouchedFor has passed since it last passed. Before, every
// client of the address was refused while a guesser kept the bucket
// empty.
func TestTokenGuessesSpareKnownClients(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st := memory.New(clock)
	defer st.Close()
	a := api.New(gateway.New(st, &gateway.Options{Now: clock}), &api.Options{Tokens: map[string]string{
		"right-token-0123456789": "claude",
		"other-token-0123456789": "gpt",
	}})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	const peer = "192.0.2.1:1000"
	do := func(token string) int {
		req := httptest.NewRequest("GET", "http://localhost/v1/groups", nil)
		req.RemoteAddr = peer
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	guessAll := func() {
		for i := range api.TokenGuessBurst + 5 {
			do(fmt.Sprintf("guess-%d-0123456789", i))
		}
	}
	if code := do("right-token-0123456789"); code != http.StatusOK {
		t.Fatalf("the right token before any guess = %d, want 200", code)
	}
	guessAll()
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"a guess", "guess-y-0123456789", http.StatusTooManyRequests},
		{"the token that passed from here before", "right-token-0123456789", http.StatusOK},
		{"a right token never seen from here", "other-token-0123456789", http.StatusTooManyRequests},
		{"the first token again", " right-token-0123456789", http.StatusOK},
	} {
		if code := do(tc.token); code != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, code, tc.want)
		}
	}
	advance(api.TokenVouchedFor)
	guessAll()
	if code := do("right-token-0123456789"); code != http.StatusTooManyRequests {
		t.Errorf("the known token %v after it last passed = %d, want 429 (no longer vouched for)", api.TokenVouchedFor, code)
	}
}
