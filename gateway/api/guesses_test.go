package api_test

import (
	"fmt"
	"io"
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
// client whose token passed before on the connection it keeps open (a
// harness, the extension, an MCP client sharing loopback with a guesser)
// goes on; the same token on a new connection, another right token on
// that connection, and every token on the guesser's own connections are
// refused unchecked as before, so a guess's answer never depends on
// whether it is right. Before, every client of the address was refused
// while a guesser kept the bucket empty.
func TestTokenGuessesSpareKnownClients(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	a := api.New(gateway.New(st, nil), &api.Options{Tokens: map[string]string{
		"right-token-0123456789": "claude",
		"other-token-0123456789": "gpt",
	}})
	defer a.Close()
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = api.NewHTTPServer(a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), api.Timeouts{}, nil)
	srv.Start()
	defer srv.Close()
	oneConn := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	}
	known, guesser := oneConn(), oneConn()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(hc *http.Client, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/groups", nil)
		req.Host = "localhost"
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if code := do(known, "right-token-0123456789"); code != http.StatusOK {
		t.Fatalf("the right token before any guess = %d, want 200", code)
	}
	for i := range api.TokenGuessBurst + 5 {
		do(guesser, fmt.Sprintf("guess-%d-0123456789", i))
	}
	for _, tc := range []struct {
		name  string
		hc    *http.Client
		token string
		want  int
	}{
		{"a guess", guesser, "guess-y-0123456789", http.StatusTooManyRequests},
		{"the right token on the guesser's connection", guesser, "right-token-0123456789", http.StatusTooManyRequests},
		{"the right token on a new connection", fresh, "right-token-0123456789", http.StatusTooManyRequests},
		{"the token that passed on this connection", known, "right-token-0123456789", http.StatusOK},
		{"another right token on that connection (its holder guessing another's)", known, "other-token-0123456789", http.StatusTooManyRequests},
		{"a guess on that connection", known, "guess-z-0123456789", http.StatusTooManyRequests},
		{"the first token again, spaced", known, " right-token-0123456789", http.StatusOK},
	} {
		if code := do(tc.hc, tc.token); code != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, code, tc.want)
		}
	}
}
