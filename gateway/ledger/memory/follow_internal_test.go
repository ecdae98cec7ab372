package memory

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// wakes is how many group wake channels s holds.
func (s *Store) wakes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.wake)
}

// TestAbandonedFollowersLeaveNothing opens followers on many groups —
// made-up ones that never see an append, as a stream opened on any
// group id and dropped does, and real ones — and abandons each the ways
// a consumer can: its ctx ends, it breaks out of the range loop, it
// stops a pull iterator. None may stay registered. A follower that stops
// reading but keeps its ctx holds its group until it is stopped, and
// does not hold up appends.
func TestAbandonedFollowersLeaveNothing(t *testing.T) {
	const n = 1000
	ctx := context.Background()
	appendTo := func(t *testing.T, s *Store, group string) {
		t.Helper()
		if _, err := s.Append(ctx, []ledger.Record{{Kind: ledger.KindNotify, GroupID: group, By: "a", Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name   string
		events bool // the groups have an event to yield
		follow func(s *Store, group string)
	}{
		{"ctx ended while caught up", false, func(s *Store, g string) {
			for range s.Follow(cancelled, g, 0) {
			}
		}},
		{"break in range loop", true, func(s *Store, g string) {
			for range s.Follow(ctx, g, 0) {
				break
			}
		}},
		{"pull stopped", true, func(s *Store, g string) {
			next, stop := iter.Pull2(s.Follow(ctx, g, 0))
			next()
			stop()
		}},
		{"follow log ctx ended", false, func(s *Store, _ string) {
			for range s.FollowLog(cancelled, 1<<40) {
			}
		}},
		{"follow log break", true, func(s *Store, _ string) {
			for range s.FollowLog(ctx, 0) {
				break
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil)
			t.Cleanup(func() { s.Close() })
			for i := range n {
				g := fmt.Sprintf("%s-%d", tc.name, i)
				if tc.events {
					appendTo(t, s, g)
				}
				tc.follow(s, g)
			}
			if got := s.wakes(); got != 0 {
				t.Errorf("%d groups still registered after %d abandoned followers", got, n)
			}
		})
	}

	t.Run("ctx ended while waiting", func(t *testing.T) {
		s := New(nil)
		t.Cleanup(func() { s.Close() })
		before := runtime.NumGoroutine()
		const waiting = 100
		fctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range waiting {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range s.Follow(fctx, fmt.Sprintf("waiting-%d", i), 0) {
				}
			}()
		}
		for s.wakes() < waiting { // each registers before its wait
			runtime.Gosched()
		}
		cancel()
		wg.Wait()
		if got := s.wakes(); got != 0 {
			t.Errorf("%d groups still registered after %d cancelled followers", got, waiting)
		}
		for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines after the followers ended, %d before", runtime.NumGoroutine(), before)
			}
		}
	})

	t.Run("stalled reader", func(t *testing.T) {
		s := New(nil)
		t.Cleanup(func() { s.Close() })
		var stops []func()
		for i := range n {
			g := fmt.Sprintf("stalled-%d", i)
			appendTo(t, s, g)
			next, stop := iter.Pull2(s.Follow(ctx, g, 0))
			if _, err, ok := next(); !ok || err != nil {
				t.Fatalf("follow %s: ok %v, err %v", g, ok, err)
			}
			stops = append(stops, stop)
			appendTo(t, s, g) // not held up by a follower that does not read
		}
		if got := s.wakes(); got > n {
			t.Errorf("%d groups registered for %d live followers", got, n)
		}
		for _, stop := range stops {
			stop()
		}
		if got := s.wakes(); got != 0 {
			t.Errorf("%d groups still registered after the stalled followers stopped", got)
		}
	})
}
