package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
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

// followFailsOnce is a ledger whose first FollowLog fails at once (a
// JetStream ledger's server unreachable for a while).
type followFailsOnce struct {
	ledger.Store
	failed atomic.Bool
}

func (s *followFailsOnce) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	if !s.failed.Swap(true) {
		return func(yield func(ledger.Logged, error) bool) { yield(ledger.Logged{}, errors.New("ledger unreachable")) }
	}
	return s.Store.FollowLog(ctx, after)
}

// TestOutboundFollowsAgainAfterFailure checks that the dispatcher follows
// the ledger again after its follower failed: deliveries were neither
// sent nor recorded failed until the relay restarted.
func TestOutboundFollowsAgainAfterFailure(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := gateway.New(&followFailsOnce{Store: st}, &gateway.Options{Book: book})
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "before the outage"))
	folder := &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": folder}})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "during the outage"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 2); len(evs) != 2 {
		t.Fatalf("delivery records = %d, want 2: the ledger was not followed again after its follower failed", len(evs))
	}
	if n := folder.count("claude-out"); n != 2 {
		t.Errorf("sent %d, want 2", n)
	}
}

// TestOutboundGoroutinesDoNotGrowWithGroups checks that the dispatcher
// of a relay that has seen hundreds of groups does not keep a follower
// for each.
func TestOutboundGoroutinesDoNotGrowWithGroups(t *testing.T) {
	r := routedRelay(t)
	const groups = 300
	var text strings.Builder
	for i := range groups {
		text.WriteString(env("GEMINI", "CLAUDE", "REQUEST", fmt.Sprintf("topic-%d", i), "one per group") + "\n")
	}
	ingest(t, r, "", text.String())
	before := runtime.NumGoroutine()
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": &recordingSender{}, "mail": &recordingSender{}}})
	defer stop()
	deadline := time.Now().Add(time.Minute)
	for recs := 0; recs < groups; {
		recs = 0
		for i := range groups {
			evs, err := r.Store().Range(t.Context(), fmt.Sprintf("topic-%d", i), 0, []string{gateway.KindDelivery}, 0)
			if err != nil {
				t.Fatal(err)
			}
			recs += len(evs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries recorded", recs, groups)
		}
	}
	// The sends whose records were just written are still ending: give
	// them a moment, so that only goroutines that stay count.
	for settle := time.Now().Add(5 * time.Second); runtime.NumGoroutine()-before > groups/10 && time.Now().Before(settle); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine() - before; n > groups/10 {
		t.Errorf("the dispatcher runs %d goroutines over %d groups, want a number that does not grow with the groups", n, groups)
	}
}

// TestOutboundGoroutinesDoNotGrowWithBacklog: every due delivery got a
// goroutine of its own that waited for its receiver's slot, so a receiver
// whose endpoint hangs (each attempt takes the whole attempt timeout)
// gathered a goroutine for every envelope sent to it meanwhile — a team's
// weeks of messages to one dead agent. Deliveries waiting for a
// receiver's slot now wait in a list.
func TestOutboundGoroutinesDoNotGrowWithBacklog(t *testing.T) {
	r := routedRelay(t)
	const backlog = 300
	var text strings.Builder
	for i := range backlog {
		text.WriteString(env("GEMINI", "CHATGPT", "REQUEST", "g", fmt.Sprintf("stuck %d", i)) + "\n")
	}
	ingest(t, r, "", text.String())
	before := runtime.NumGoroutine()
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders:        map[string]transports.Sender{"folder": &recordingSender{}, "mail": hangingSender{}},
		AttemptTimeout: time.Hour,
	})
	defer stop()
	deadline := time.Now().Add(time.Minute)
	for {
		_, pending := gateway.OutboundTracked(r)
		if pending == backlog && gateway.OutboundQueued(r) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries pending, %d queued; want %d pending, all taken from the queue", pending, gateway.OutboundQueued(r), backlog)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for settle := time.Now().Add(5 * time.Second); runtime.NumGoroutine()-before > backlog/10 && time.Now().Before(settle); {
		time.Sleep(10 * time.Millisecond) // only goroutines that stay count
	}
	if n := runtime.NumGoroutine() - before; n > backlog/10 {
		t.Errorf("the dispatcher runs %d goroutines for %d deliveries to one hung receiver, want a number that does not grow with them", n, backlog)
	}
}

// TestOutboundErrorTextBounded: the error of a failed send went whole into
// the failed delivery record, the notice and the ERROR envelope back; it
// holds what the receiver said (an HTTP receiver's ERROR reason, up to
// 16 MiB of it; an SMTP server's text), so one receiver could grow every
// record, and a record above the ledger's limit (JetStream's max_payload,
// 1 MB) was refused and tried again for ever, the delivery never final.
func TestOutboundErrorTextBounded(t *testing.T) {
	r := routedRelay(t)
	huge := &recordingSender{err: fmt.Errorf("%w: receiver answered 400 E-FORMAT: %s", transports.ErrPermanent, strings.Repeat("x", 2<<20))}
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": huge}})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "refused at length"))
	for _, kind := range []string{gateway.KindDelivery, gateway.KindNotify} {
		evs := waitEvents(t, r, "g", kind, 1)
		if len(evs) != 1 {
			t.Fatalf("%s records = %d, want 1", kind, len(evs))
		}
		if n := len(evs[0].Data); n > 16<<10 {
			t.Errorf("%s record of %d bytes for a failure, want the error text cut", kind, n)
		}
		if d, _ := gateway.ParseData(evs[0]); !strings.Contains(d.Note+d.Message, "receiver answered 400 E-FORMAT: xxx") {
			t.Errorf("%s record %.200q does not say what the receiver answered", kind, d.Note+d.Message)
		}
	}
}
