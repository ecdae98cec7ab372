package channel_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestAbandonedChannelsLeaveNothing opens more delivery channels, one
// after the other, than one agent may hold at once, and drops each
// connection without a close frame after the handshake, with a
// delivery in flight — a harness killed. Each must give back its
// stream slot and its goroutines.
func TestAbandonedChannelsLeaveNothing(t *testing.T) {
	r := testrelay.Start(t, nil)
	r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "in flight when the harness dies", "", "")
	before := runtime.NumGoroutine()
	const channels = 80 // the default stream limit is 32 per caller
	for range channels {
		h := dial(t, r, "claude")
		h.initialize()
		if _, _, ok := h.delivery(5 * time.Second); !ok {
			t.Fatal("no delivery on a new channel (a slot of an abandoned one was not given back?)")
		}
		h.c.CloseNow()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n := runtime.NumGoroutine()
		if n <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after %d abandoned channels, %d before:\n%s", n, channels, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
