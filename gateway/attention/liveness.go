package attention

import "time"

// Liveness thresholds (Beadboard Operative Protocol §4.1: stale after
// BB_AGENT_STALE_MINUTES, default 15; evicted after twice that; docs/design.md §5.4).
const (
	StaleAfter = 15 * time.Minute
	EvictAfter = 2 * StaleAfter
)

// LivenessOf derives an agent's liveness from its last activity:
// active while now-lastSeen < 15 min, stale while < 30 min, evicted from
// 30 min on (Beadboard §4.3: "stale threshold <= now < eviction
// threshold"). A zero lastSeen (never seen) is evicted; a lastSeen after
// now (clock skew between relays) is active.
func LivenessOf(lastSeen, now time.Time) Liveness {
	return LivenessAfter(lastSeen, now, StaleAfter)
}

// LivenessAfter is LivenessOf with a configured stale threshold; eviction
// comes at twice it. A non-positive stale uses StaleAfter.
func LivenessAfter(lastSeen, now time.Time, stale time.Duration) Liveness {
	if stale <= 0 {
		stale = StaleAfter
	}
	if lastSeen.IsZero() {
		return Evicted
	}
	age := now.Sub(lastSeen)
	switch {
	case age < stale:
		return Active
	case age < 2*stale:
		return Stale
	}
	return Evicted
}
