package gateway_test

import (
	"fmt"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports"
)

// TestOutboundRestartSendsNothingDelivered: a dispatcher started on a
// ledger whose deliveries are all recorded sends none of them again. Its
// group holds the message events first and their delivery records after
// them, so a dispatcher that queued each message as soon as it read it
// would send it before reaching its record (found by
// relaytest.TestOutboundKill: every delivered envelope went out again at
// every restart).
func TestOutboundRestartSendsNothingDelivered(t *testing.T) {
	const n = 40
	r := routedRelay(t)
	first := &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": first}})
	for i := range n {
		ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", fmt.Sprintf("delivered before the restart %d", i)))
	}
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, n); len(evs) != n {
		t.Fatalf("delivery records before the restart = %d, want %d", len(evs), n)
	}
	stop()

	// One worker: whatever is queued is sent in queue order, so a resent
	// old envelope goes out before the new one is delivered.
	again := &recordingSender{}
	stop = runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": again}, Workers: 1})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "after the restart"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, n+1); len(evs) != n+1 {
		t.Fatalf("delivery records after the restart = %d, want %d", len(evs), n+1)
	}
	if got := again.count("claude-out"); got != 1 {
		t.Errorf("sends after the restart = %d, want 1 (only the new envelope)", got)
	}
}
