package api

import (
	"net/http"
	"testing"
)

// TestBodyBudget: the bounds follow max_body, never below twice the JSON
// bound per caller; the relay-wide bound refuses with 503 what every
// caller's own bound still allows, and giving back frees it, down to an
// empty table.
func TestBodyBudget(t *testing.T) {
	b := newBodyBudget(100)
	if b.perMax != 2*maxJSONBody || b.totalMax != 8*b.perMax {
		t.Fatalf("bounds for max_body 100: %d per caller, %d in all; want twice the JSON bound and 8 times that", b.perMax, b.totalMax)
	}
	if b := newBodyBudget(8 << 20); b.perMax != 32<<20 || b.totalMax != 256<<20 {
		t.Fatalf("bounds for max_body 8 MiB: %d per caller, %d in all; want 32 MiB and 256 MiB", b.perMax, b.totalMax)
	}
	n := b.perMax
	for i := range 8 {
		if ok, _, why := b.take(string(rune('a'+i)), n); !ok {
			t.Fatalf("caller %d's share refused: %s", i, why)
		}
	}
	if ok, status, _ := b.take("i", 1); ok || status != http.StatusServiceUnavailable {
		t.Fatalf("a ninth caller's byte at the relay's bound = %v, %d; want refused with 503", ok, status)
	}
	if ok, status, _ := b.take("a", 1); ok || status != http.StatusTooManyRequests {
		t.Fatalf("a caller's byte past its own bound = %v, %d; want refused with 429", ok, status)
	}
	b.give("a", n)
	if ok, _, why := b.take("i", n); !ok {
		t.Fatalf("after a caller gave back, a new one's share refused: %s", why)
	}
	for i := range 9 {
		if k := string(rune('a' + i)); k != "a" {
			b.give(k, n)
		}
	}
	if b.total != 0 || len(b.per) != 0 {
		t.Errorf("after everything was given back: total %d, %d callers", b.total, len(b.per))
	}
}
