package api

import "time"

// SetRefusalClock replaces the clock of s's refusal log.
func SetRefusalClock(s *Server, now func() time.Time) { s.refusals.now = now }
