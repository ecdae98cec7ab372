package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

func (n *notifier) size() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chans)
}

// TestNotifierBoundedByLiveFollowers checks that followers of groups
// nothing is ever appended to — a stream opened on a mistyped or made-up
// group and abandoned, over and over for a year — leave nothing behind
// in the notifier once they are gone, while a live follower is still
// woken by its group's next append.
func TestNotifierBoundedByLiveFollowers(t *testing.T) {
	ctx := t.Context()
	// A poll longer than the test: only a wake can deliver the append.
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &Options{FollowPoll: time.Hour})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer s.Close()

	live := make(chan ledger.Event, 1)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	go func() {
		for ev, err := range s.Follow(lctx, "live", 0) {
			if err != nil {
				return
			}
			live <- ev
		}
	}()

	// Followers that end while reading (the client went away at once).
	gone, cancel := context.WithCancel(ctx)
	cancel()
	const abandoned = 50_000
	for i := range abandoned {
		for range s.Follow(gone, fmt.Sprintf("made-up-%d", i), 0) {
		}
	}
	// Followers that end while waiting, a batch at a time.
	const batch = 200
	for b := range 10 {
		bctx, bcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range s.Follow(bctx, fmt.Sprintf("waited-%d-%d", b, i), 0) {
				}
			}()
		}
		// Until they all wait.
		for s.notes.waiters() < batch {
			time.Sleep(time.Millisecond)
		}
		bcancel()
		wg.Wait()
	}
	if n := s.notes.size(); n > 2*minNotifierPrune {
		t.Errorf("after %d abandoned followers the notifier holds %d groups, want at most %d", abandoned+10*batch, n, 2*minNotifierPrune)
	}
	if _, err := s.Append(ctx, []ledger.Record{{Kind: "message", GroupID: "live", By: "claude", Data: []byte(`{}`)}}); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	select {
	case <-live:
	case <-time.After(time.Minute):
		t.Fatal("the live follower was not woken by its group's append")
	}
}

func (n *notifier) waiters() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, w := range n.chans {
		c += w.waiting
	}
	return c
}
