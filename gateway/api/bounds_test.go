package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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

// TestFanOutPastAStalledStream follows hundreds of groups with dozens of
// streams while one more stream is never read (a client stopped, its
// socket buffers filling): every other stream still gets every event.
func TestFanOutPastAStalledStream(t *testing.T) {
	h := newHarness(t, &api.Options{StreamLimit: 64})
	const groups, agentStreams, groupStreams = 300, 16, 16
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
