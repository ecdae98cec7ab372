package api

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiterKeepsPrincipalsThroughFlood checks that the buckets of
// principals outlive a flood of anonymous addresses: forgetting a spent
// bucket would give its caller a fresh burst.
func TestLimiterKeepsPrincipalsThroughFlood(t *testing.T) {
	l := &limiter{rate: 1, burst: 3, buckets: map[string]*bucket{}}
	now := time.Unix(1_700_000_000, 0)
	for l.allow("claude", now) {
	}
	for i := range 4 * maxBuckets {
		l.allow(fmt.Sprintf("%s10.0.%d.%d", anonymousKey, i>>8, i&0xff), now)
	}
	if n := len(l.buckets); n > maxBuckets {
		t.Errorf("limiter keeps %d buckets, want at most %d", n, maxBuckets)
	}
	if l.allow("claude", now) {
		t.Error("claude's spent bucket was forgotten in a flood of anonymous addresses: it may burst again")
	}
}
