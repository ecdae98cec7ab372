package testrelay

import (
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// InjectionAgents is an address book for tests of buffered and digest
// delivery (docs/agents.md, "Buffered and digest delivery"): claude
// merges fragments (quiet 1 min, window 10 min of the relay's clock, so
// that a test's consecutive sends are well within them) and takes hourly
// digests; chatgpt and gemini get each event alone.
var InjectionAgents = []gateway.Agent{
	{ID: "claude", Names: []string{"CLAUDE"}, Buffer: &attention.Buffer{Quiet: time.Minute, MaxWindow: 10 * time.Minute}, DigestEvery: time.Hour},
	{ID: "chatgpt", Names: []string{"CHATGPT"}},
	{ID: "gemini", Names: []string{"GEMINI"}},
}

// InjectionThread is the thread of Fragments' messages.
const InjectionThread = "01J9ZQ3K8Y5V4W3X2Z1A0B9C8D"

// Fragments sends, in group "default", two fragments from chatgpt to
// claude in InjectionThread (a REQUEST "first half", a RESPOND "second
// half") and a BROADCAST from gemini, and returns their events.
func (r *Relay) Fragments(t testing.TB) (a, b, broadcast ledger.Event) {
	t.Helper()
	th := func(e *envelope.Envelope) { e.Thread = InjectionThread }
	a = r.Ingest(t, Envelope("CHATGPT", "CLAUDE", "REQUEST", "", "first half", th))
	b = r.Ingest(t, Envelope("CHATGPT", "CLAUDE", "RESPOND", "", "second half", th))
	broadcast = r.Ingest(t, Envelope("GEMINI", "ALL", "BROADCAST", "", "nightly build green"))
	return a, b, broadcast
}

// EndHour moves the clock to the start of the next hour, where an
// hourly digest window ends, and returns that time.
func (r *Relay) EndHour() time.Time {
	now := r.Clock.Now()
	until := now.Add(time.Hour).Truncate(time.Hour)
	r.Clock.Advance(until.Sub(now))
	return until
}
