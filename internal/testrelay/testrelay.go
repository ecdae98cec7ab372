// Package testrelay starts a real relay in-process for tests of the agent
// interfaces: the relay as `crosstalk relay` assembles it (server.Open),
// over an in-memory ledger, on a free loopback port, with a settable clock.
//
// It does not fake anything: the relay, the API and the ledger are the
// production code; only the store lives in memory.
package testrelay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Relay is a running in-process relay.
type Relay struct {
	URL   string
	Relay *gateway.Relay
	Store ledger.Store
	// Server is the running relay (server.Open).
	Server *server.Server
	Clock  *Clock
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
	clock := &Clock{}
	st := memory.New(clock.Now)
	so := &server.Options{
		DataDir: t.TempDir(), Store: st, Now: clock.Now, Agents: agents, ClaimTTL: opts.ClaimTTL,
		RateLimit: -1, Heartbeat: 200 * time.Millisecond, Channel: opts.Agent,
		// Without a trust file nothing is pinned: signed envelopes are
		// unknown-key.
		Verifier: gateway.NewTrustVerifier(&signing.Verifier{}),
	}
	if opts.TrustFile != "" {
		so.TrustFile, so.Verifier = opts.TrustFile, nil
	}
	srv, err := server.Open(contextOf(t), so)
	if err != nil {
		t.Fatalf("server.Open() = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &Relay{URL: srv.URL(), Relay: srv.Relay(), Store: st, Server: srv, Clock: clock}
}

// Send ingests an envelope from → to with intent and body (context and
// thread optional, "" for none) and returns its ledger event.
func (r *Relay) Send(t testing.TB, from, to, intent, body, context, thread string) ledger.Event {
	t.Helper()
	return r.Ingest(t, Envelope(from, to, intent, context, body, func(e *envelope.Envelope) {
		if thread != "" {
			e.Thread = thread
		}
	}))
}

// Envelope composes the canonical text of an envelope from → to with
// intent, context and body and fresh ids, changed by mods. It panics if
// the envelope cannot be written: tests pass valid ones.
func Envelope(from, to, intent, context, body string, mods ...func(*envelope.Envelope)) string {
	e := envelope.New(from, to, intent, body)
	e.Context = context
	for _, m := range mods {
		m(e)
	}
	b, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	return string(b)
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
