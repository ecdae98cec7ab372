package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestRateBucketsBounded checks that page requests from many distinct
// addresses (each rate limited by its remote address while tokens are
// configured) do not grow the limiter without bound: a relay left
// running for a year meets more addresses than it can remember, and an
// IPv6 client has 2^64 of them.
func TestRateBucketsBounded(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	a := api.New(gateway.New(st, nil), &api.Options{Tokens: map[string]string{"bucket-token-0123456789": "claude"}})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	const clients = 100_000
	for i := range clients {
		req := httptest.NewRequest("GET", "http://localhost/", nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8::%x:%x]:40000", i>>16, i&0xffff)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET / from %s = %d %s", req.RemoteAddr, rec.Code, rec.Body)
		}
	}
	if n := api.RateBuckets(a); n > clients/4 {
		t.Errorf("after %d clients the limiter keeps %d buckets, want a bound well below that", clients, n)
	}
}
