package api

import (
	"net/http"
	"testing"
)

// TestBodyBudget: the relay-wide bound refuses with 503 what every
// caller's own bound still allows, and giving back frees it, down to an
// empty table.
func TestBodyBudget(t *testing.T) {
	b := newBodyBudget(100) // 400 per caller, 3200 in all
	for i := range 8 {
		if ok, _, why := b.take(string(rune('a'+i)), 400); !ok {
			t.Fatalf("caller %d's 400 bytes refused: %s", i, why)
		}
	}
	if ok, status, _ := b.take("i", 1); ok || status != http.StatusServiceUnavailable {
		t.Fatalf("a ninth caller's byte at the relay's bound = %v, %d; want refused with 503", ok, status)
	}
	if ok, status, _ := b.take("a", 1); ok || status != http.StatusTooManyRequests {
		t.Fatalf("a caller's byte past its own bound = %v, %d; want refused with 429", ok, status)
	}
	b.give("a", 400)
	if ok, _, why := b.take("i", 400); !ok {
		t.Fatalf("after a caller gave back, a new one's 400 bytes refused: %s", why)
	}
	for i := range 9 {
		if k := string(rune('a' + i)); k != "a" {
			b.give(k, 400)
		}
	}
	if b.total != 0 || len(b.per) != 0 {
		t.Errorf("after everything was given back: total %d, %d callers", b.total, len(b.per))
	}
}
