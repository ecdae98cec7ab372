package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestRateBucketsBounded checks that page requests from many distinct
// addresses (each rate limited by its remote address while tokens are
// configured) do not grow the limiter without bound: a relay left
// running for a year meets more addresses than it can remember, and an
// IPv6 network has 2^16 /64s and more.
func TestRateBucketsBounded(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	a := api.New(gateway.New(st, nil), &api.Options{Tokens: map[string]string{"bucket-token-0123456789": "claude"}})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	const clients = 100_000
	for i := range clients {
		req := httptest.NewRequest("GET", "http://localhost/", nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8:%x:%x::1]:40000", i>>16, i&0xffff)
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

// TestFanOutPastAStalledStream follows hundreds of groups with a dozen
// streams while one more stream is never read (a client stopped, its
// socket buffers filling): every other stream still gets every event.
// (Sixteen of each took over the streams' minute under -race in CI.)
func TestFanOutPastAStalledStream(t *testing.T) {
	h := newHarness(t, &api.Options{StreamLimit: 64})
	const groups, agentStreams, groupStreams = 300, 6, 6
	stalled := h.stream("/v1/agents/claude/stream")
	_ = stalled // opened, never read
	var agents, perGroup []*sseStream
	for range agentStreams {
		agents = append(agents, h.stream("/v1/agents/claude/stream"))
	}
	for i := range groupStreams {
		perGroup = append(perGroup, h.stream(fmt.Sprintf("/v1/groups/g%d/stream", i*groups/groupStreams)))
	}
	body := strings.Repeat("a long body to fill a stalled reader's buffers. ", 300)
	for i := range groups {
		h.post(env("CHATGPT", "CLAUDE", "REQUEST", fmt.Sprintf("g%d", i), body))
	}
	for i, s := range agents {
		for n := range groups {
			if ev := s.nextEvent(); ev.Name != "delivery" {
				t.Fatalf("agent stream %d, event %d: %+v, want a delivery", i, n, ev)
			}
		}
	}
	for i, s := range perGroup {
		if ev := s.nextEvent(); ev.Name != "event" {
			t.Fatalf("group stream %d: %+v, want its event", i, ev)
		}
	}
}

// TestAnonymousRateLimitPerIPv6Prefix checks that the addresses of one
// IPv6 /64 — what one host or one customer network is given — share the
// rate limit of anonymous page requests: counted per address, one host
// walking its prefix had a fresh burst at every address.
func TestAnonymousRateLimitPerIPv6Prefix(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	a := api.New(gateway.New(st, nil), &api.Options{Tokens: map[string]string{"prefix-token-0123456789": "claude"}, Rate: 1e-9, Burst: 3})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func(remote string) int {
		req := httptest.NewRequest("GET", "http://localhost/", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 3 {
		if code := get(fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1)); code != http.StatusOK {
			t.Fatalf("request %d = %d, want 200 within the burst", i, code)
		}
	}
	if code := get("[2001:db8:1:2:ffff::9]:1"); code != http.StatusTooManyRequests {
		t.Errorf("a fourth address of the same /64 = %d, want 429: its burst is spent", code)
	}
	if code := get("[2001:db8:1:3::1]:1"); code != http.StatusOK {
		t.Errorf("an address of another /64 = %d, want 200", code)
	}
	for i := range 3 {
		if code := get(fmt.Sprintf("192.0.2.%d:1", i+1)); code != http.StatusOK {
			t.Errorf("IPv4 address %d = %d, want 200: each IPv4 address is its own caller", i, code)
		}
	}
}

// TestTrustedProxyForwardedFor: behind a reverse proxy every anonymous
// page request comes from the proxy's address; with the proxy trusted
// (Options.TrustedProxies) each counts as the client X-Forwarded-For
// names — the last hop that is not a trusted proxy, so a client cannot
// pick its count by writing the header itself — and without it, or from
// an untrusted peer, the header changes nothing.
func TestTrustedProxyForwardedFor(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string // per request i, "%d" is i
		want    []int
	}{
		{"trusted proxy, one client each", proxies, "10.0.0.5:1", []string{"192.0.2.%d"}, []int{200, 200, 200, 200}},
		{"trusted proxy, one client", proxies, "10.0.0.5:1", []string{"192.0.2.7"}, []int{200, 200, 200, 429}},
		{"trusted chain, spoofed first hop", proxies, "[::1]:1", []string{"198.51.100.%d, 192.0.2.7, 10.1.1.1"}, []int{200, 200, 200, 429}},
		{"trusted proxy, two headers", proxies, "10.0.0.5:1", []string{"198.51.100.1", "192.0.2.%d"}, []int{200, 200, 200, 200}},
		{"trusted proxy, garbage", proxies, "10.0.0.5:1", []string{"not-an-address-%d"}, []int{200, 200, 200, 429}},
		{"untrusted peer", proxies, "203.0.113.9:1", []string{"192.0.2.%d"}, []int{200, 200, 200, 429}},
		{"no trusted proxies", nil, "10.0.0.5:1", []string{"192.0.2.%d"}, []int{200, 200, 200, 429}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memory.New(nil)
			defer st.Close()
			a := api.New(gateway.New(st, nil), &api.Options{Tokens: map[string]string{"proxy-token-0123456789": "claude"}, Rate: 1e-9, Burst: 3, TrustedProxies: tc.trusted})
			defer a.Close()
			h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			for i, want := range tc.want {
				req := httptest.NewRequest("GET", "http://localhost/", nil)
				req.RemoteAddr = tc.peer
				for _, x := range tc.xff {
					if strings.Contains(x, "%d") {
						x = fmt.Sprintf(x, i+1)
					}
					req.Header.Add("X-Forwarded-For", x)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != want {
					t.Fatalf("request %d = %d, want %d", i, rec.Code, want)
				}
			}
		})
	}
}

// TestCrossSiteReadsSpendNothingOfTheUser checks what a web page in the
// user's browser can do to a loopback relay without tokens with requests
// it cannot read the answers of: it must not hold the local user's
// stream slots (a fetch left pending keeps a stream open) nor spend the
// local user's rate limit, which the user's own clients then lack.
func TestCrossSiteReadsSpendNothingOfTheUser(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	a := api.New(gateway.New(st, nil), &api.Options{Rate: 1e-9, Burst: 3})
	defer a.Close()
	h := a.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(path string, crossSite bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "http://127.0.0.1:7777"+path, nil)
		req.RemoteAddr = "127.0.0.1:50000"
		if strings.HasSuffix(path, "/stream") {
			// A stream that opens answers 200 and ends at once.
			ctx, cancel := context.WithCancel(req.Context())
			cancel()
			req = req.WithContext(ctx)
		}
		if crossSite {
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			req.Header.Set("Sec-Fetch-Mode", "no-cors")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, p := range []string{"/v1/groups", "/v1/agents/claude/stream", "/v1/groups/g/stream", "/healthz"} {
		if rec := do(p, true); rec.Code != http.StatusForbidden {
			t.Errorf("cross-site GET %s = %d %s, want 403", p, rec.Code, rec.Body)
		}
	}
	// A link from another site to the pages still arrives.
	for range 3 {
		if rec := do("/ui/groups/g", true); rec.Code != http.StatusOK {
			t.Fatalf("cross-site GET /ui/groups/g = %d %s, want 200", rec.Code, rec.Body)
		}
	}
	for i := range 3 {
		if rec := do("/v1/groups", false); rec.Code != http.StatusOK {
			t.Errorf("the local user's request %d after the cross-site ones = %d %s, want 200 (its rate budget was spent by another site)", i, rec.Code, rec.Body)
		}
	}
}
