package metrics

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// countingStore counts the events Range returns.
type countingStore struct {
	ledger.Store
	read atomic.Int64
}

func (s *countingStore) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := s.Store.Range(ctx, group, since, kinds, limit)
	s.read.Add(int64(len(evs)))
	return evs, err
}

// TestObligationsWindow: obligations count the must_respond deliveries
// nobody answered or acknowledged, however old (there is no default
// response window), read each event once, and drop one when the deadline
// it carries (X-Deadline) passes.
func TestObligationsWindow(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := &countingStore{Store: memory.New(clock)}
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude"}, {ID: "chatgpt"}})
	if err != nil {
		t.Fatal(err)
	}
	relay := gateway.New(st, &gateway.Options{Book: book, Now: clock})
	send := func(from, to, intent, group string, mod ...func(*envelope.Envelope)) gateway.Outcome {
		t.Helper()
		e := envelope.New(from, to, intent, "body")
		e.Context = group
		for _, f := range mod {
			f(e)
		}
		b, _ := envelope.Marshal(e)
		outs, err := relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: strings.NewReader(string(b))})
		if err != nil || outs[0].Reject != nil {
			t.Fatalf("Ingest = %v, %v", outs, err)
		}
		return outs[0]
	}
	// An obligation, the oldest event; 1000 requests a minute apart; and
	// an old one in another group.
	obligation := send("CHATGPT", "CLAUDE", "REQUEST", "old", func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}, {Key: "Deadline", Value: "1h"}}})
	})
	send("CLAUDE", "CHATGPT", "REQUEST", "old")
	for range 1000 {
		now = now.Add(time.Minute)
		send("CLAUDE", "CHATGPT", "REQUEST", "g")
	}
	o := &obligations{relay: relay, now: clock, groups: map[string]*window{}}
	halted, none := 1, 0 // open obligations by what they block (crosstalk_obligations_open)
	check := func(want map[string]int) {
		t.Helper()
		got, open, err := o.count(t.Context(), now)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("count = %v, want %v", got, want)
		}
		if wantOpen := map[attention.Blocks]int{attention.BlocksHalted: halted, attention.BlocksDegraded: 0, attention.BlocksNone: none}; !maps.Equal(open, wantOpen) {
			t.Errorf("open obligations = %v, want %v", open, wantOpen)
		}
	}
	st.read.Store(0)
	// Every unanswered request is open, 16 hours later too, and so is
	// the obligation until discharged.
	check(map[string]int{"chatgpt": 1001, "claude": 1, "other": 0})
	if n := st.read.Load(); n != 1002 {
		t.Errorf("the first count read %d events, want each once (1002)", n)
	}
	now = now.Add(2 * time.Minute)
	check(map[string]int{"chatgpt": 1001, "claude": 1, "other": 0})
	send("CHATGPT", "MISTRAL", "REQUEST", "g")
	send("CHATGPT", "CLAUDE", "RESPOND", "g")
	asked := send("CHATGPT", "CLAUDE", "ESCALATE", "new")
	send("CLAUDE", "CHATGPT", "REQUEST", "new", func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: "5m"}}})
	})
	check(map[string]int{"chatgpt": 1002, "claude": 2, "other": 1})
	// An answer closes a must_respond; a reply to an obligation does not.
	send("CLAUDE", "CHATGPT", "RESPOND", "new", func(e *envelope.Envelope) { e.Parent = asked.Envelope.Message })
	send("CLAUDE", "CHATGPT", "RESPOND", "old", func(e *envelope.Envelope) { e.Parent = obligation.Envelope.Message })
	check(map[string]int{"chatgpt": 1002, "claude": 1, "other": 1})
	// The request with X-Deadline goes stale; the others stay owed.
	now = now.Add(10 * time.Minute)
	check(map[string]int{"chatgpt": 1001, "claude": 1, "other": 1})
	// Its author discharges it.
	if _, err := relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "old", EventID: obligation.Event.ID, Actor: "chatgpt"}); err != nil {
		t.Fatal(err)
	}
	halted = 0
	check(map[string]int{"chatgpt": 1001, "claude": 0, "other": 1})
	// A HANDOFF is owed until its addressee acks it; an ack of a plain
	// obligation does not close it.
	handoff := send("CHATGPT", "CLAUDE", "HANDOFF", "new", func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "handoff", Fields: []envelope.Field{
			{Key: "Subject", Value: "s"}, {Key: "Summary", Value: "m"}, {Key: "Next-Action", Value: "n"}}})
	})
	none = 1 // a HANDOFF's obligation blocks nothing
	check(map[string]int{"chatgpt": 1001, "claude": 1, "other": 1})
	if _, err := relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionAck, Group: "new", EventID: handoff.Event.ID, Actor: "claude"}); err != nil {
		t.Fatal(err)
	}
	none = 0
	check(map[string]int{"chatgpt": 1001, "claude": 0, "other": 1})
}
