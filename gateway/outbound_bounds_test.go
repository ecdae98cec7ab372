package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports"
)

// TestOutboundForgetsFinishedDeliveries checks that the dispatcher of a
// relay left running for a year does not keep every delivery it ever
// finished: once its record is read back, a delivery is forgotten,
// and a restart that reads a year of records forgets them as its
// follower passes them.
func TestOutboundForgetsFinishedDeliveries(t *testing.T) {
	r := routedRelay(t)
	const n = 1000
	var text strings.Builder
	for i := range n {
		text.WriteString(env("GEMINI", "CLAUDE", "REQUEST", fmt.Sprintf("g%d", i%7), fmt.Sprintf("message %d", i)))
		text.WriteString("\n")
	}
	ingest(t, r, "", text.String())
	// settled waits until every message has its record and the
	// dispatcher remembers at most a few deliveries.
	settled := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			recs := 0
			for g := range 7 {
				recs += len(waitEvents(t, r, fmt.Sprintf("g%d", g), gateway.KindDelivery, 0))
			}
			final, pending := gateway.OutboundTracked(r)
			if recs == n && final+pending <= 16 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d delivery records; the dispatcher remembers %d final and %d pending deliveries, want at most 16", what, recs, n, final, pending)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	folder := &recordingSender{}
	opts := &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder, "mail": &recordingSender{}}}
	stop := runOutbound(t, r, opts)
	settled("first run")
	stop()
	stop = runOutbound(t, r, opts)
	defer stop()
	settled("after a restart")
	if got := folder.tries(); got != n {
		t.Errorf("sends = %d, want %d (each message once)", got, n)
	}
}
