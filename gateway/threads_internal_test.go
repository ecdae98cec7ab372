package gateway

import (
	"fmt"
	"testing"
)

// TestThreadSetBounded checks that a tracker's thread participation stays
// within maxThreads, forgetting the thread joined first, and that a clone
// goes on independently.
func TestThreadSetBounded(t *testing.T) {
	s := newThreadSet()
	for i := range maxThreads + 10 {
		s.add(fmt.Sprint("thread-", i))
		s.add(fmt.Sprint("thread-", i)) // joining again changes nothing
	}
	if len(s.order) != maxThreads {
		t.Fatalf("threadSet holds %d hashes, want %d", len(s.order), maxThreads)
	}
	for i, want := range map[int]bool{0: false, 9: false, 10: true, maxThreads + 9: true} {
		if got := s.contains(fmt.Sprint("thread-", i)); got != want {
			t.Errorf("contains(thread-%d) = %v, want %v", i, got, want)
		}
	}
	c := s.clone()
	c.add("new")
	if s.contains("new") || !c.contains("new") || c.contains("thread-10") || !s.contains("thread-10") {
		t.Errorf("a clone shares state with its original")
	}
}
