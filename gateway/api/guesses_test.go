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
	const guesser, other = "192.0.2.1:1000", "192.0.2.2:1000"
	for _, path := range []string{"/v1/groups", "/"} {
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
