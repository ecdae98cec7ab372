package web

import "testing"

// TestAnonymousSessionsEvictNoLogin: the session table is full of
// sessions nobody logged in to — what any client that reaches the relay
// makes with one GET each — and still a new one evicts one of those, never
// a logged-in session: a stranger cannot log everybody out by loading the
// login page 4096 times.
func TestAnonymousSessionsEvictNoLogin(t *testing.T) {
	s := newSessions(0)
	in := s.create("claude", "claude-token")
	for range maxSessions + 10 {
		s.create("", "")
	}
	if len(s.m) > maxSessions {
		t.Errorf("%d sessions kept, want at most %d", len(s.m), maxSessions)
	}
	if _, ok := s.m[in.id]; !ok {
		t.Errorf("the logged-in session was evicted by anonymous ones")
	}
}
