package api

import "time"

// SetRefusalClock replaces the clock of s's refusal log.
func SetRefusalClock(s *Server, now func() time.Time) { s.refusals.now = now }

// RateBuckets returns how many rate-limit buckets s keeps.
func RateBuckets(s *Server) int {
	s.limiter.mu.Lock()
	defer s.limiter.mu.Unlock()
	return len(s.limiter.buckets)
}
