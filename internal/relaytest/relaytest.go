// Package relaytest starts a real relay in-process for tests of the agent
// interfaces: gateway.Relay over an in-memory ledger, the HTTP API with
// the agent endpoints mounted (api.Server.MountAgents), served by httptest
// on loopback, and a settable clock.
//
// It does not fake anything: the relay, the API and the ledger are the
// production code; only the store lives in memory.
package relaytest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Relay is a running in-process relay.
type Relay struct {
	URL   string
	Relay *gateway.Relay
	Store ledger.Store
	API   *api.Server
	Clock *Clock
}

// Clock is a settable clock, starting at the real time.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

// Now returns the real time plus the advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// Agents is the default address book: two reviewers and an agent
// without roles.
var Agents = []gateway.Agent{
	{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
	{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
	{ID: "gemini", Names: []string{"GEMINI"}},
}

// Options change Start; nil means defaults.
type Options struct {
	Agents   []gateway.Agent // nil means Agents
	ClaimTTL time.Duration
	Agent    *api.AgentOptions
	// TrustFile, when set, makes the relay verify signatures against a
	// trust store there (first use pins).
	TrustFile string
}

// Start starts a relay; it is stopped when the test ends.
func Start(t testing.TB, opts *Options) *Relay {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	agents := opts.Agents
	if agents == nil {
		agents = Agents
	}
	book, err := gateway.NewAddressBook(agents)
	if err != nil {
		t.Fatalf("NewAddressBook() = %v", err)
	}
	clock := &Clock{}
	st := memory.New(clock.Now)
	gopts := &gateway.Options{Book: book, Now: clock.Now, ClaimTTL: opts.ClaimTTL}
	if opts.TrustFile != "" {
		gopts.Verifier = gateway.NewTrustVerifier(&signing.Verifier{Store: signing.NewTrustStore(opts.TrustFile)})
	}
	relay := gateway.New(st, gopts)
	a := api.New(relay, &api.Options{Rate: -1, Heartbeat: 200 * time.Millisecond})
	a.MountAgents(opts.Agent)
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		a.Close()
		srv.CloseClientConnections()
		srv.Close()
		st.Close()
	})
	return &Relay{URL: srv.URL, Relay: relay, Store: st, API: a, Clock: clock}
}

// Send ingests an envelope from → to with intent and body (context and
// thread optional, "" for none) and returns its ledger event.
func (r *Relay) Send(t testing.TB, from, to, intent, body, context, thread string) ledger.Event {
	t.Helper()
	env := envelope.New(from, to, intent, body)
	env.Context = context
	if thread != "" {
		env.Thread = thread
	}
	text, err := envelope.Marshal(env)
	if err != nil {
		t.Fatalf("Marshal() = %v", err)
	}
	return r.Ingest(t, string(text))
}

// Ingest runs envelope text through the relay and returns the event of
// its one envelope, failing the test on a rejection.
func (r *Relay) Ingest(t testing.TB, text string) ledger.Event {
	t.Helper()
	outs, err := r.Relay.Ingest(contextOf(t), gateway.Intake{Transport: "test", Data: strings.NewReader(text)})
	if err != nil {
		t.Fatalf("Ingest() = %v", err)
	}
	if len(outs) != 1 || outs[0].Reject != nil {
		t.Fatalf("Ingest() = %+v, want one accepted envelope", outs)
	}
	return outs[0].Event
}

// WSURL returns the WebSocket URL of path.
func (r *Relay) WSURL(path string) string {
	return "ws" + strings.TrimPrefix(r.URL, "http") + path
}

func contextOf(t testing.TB) context.Context {
	if tt, ok := t.(interface{ Context() context.Context }); ok {
		return tt.Context()
	}
	return context.Background()
}

// String describes the relay for failure messages.
func (r *Relay) String() string { return fmt.Sprintf("relay at %s", r.URL) }
