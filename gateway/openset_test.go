package gateway_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// TestOpenSets: Owed lists what an agent owes, oldest first, and with All
// the settled items with how each was settled; WaitingOn lists the
// author's open obligations, and with All the discharged ones; both page
// by event id without losing or repeating an item (issue #14 item 4).
func TestOpenSets(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	var offset atomic.Int64
	r := newRelay(t, &gateway.Options{Book: testBook(t), Now: func() time.Time { return start.Add(time.Duration(offset.Load())) }})
	parent := func(id string) func(*envelope.Envelope) {
		return func(e *envelope.Envelope) { e.Parent = id }
	}
	msg := func(ev gateway.Outcome) string { return data(t, ev.Event).X.Envelope.Message }
	due := func(d string) func(*envelope.Envelope) {
		return func(e *envelope.Envelope) {
			e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: d}}})
		}
	}

	open := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "open question"))[0]
	timed := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "question with a deadline", due("30m")))[0]
	answered := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "answered question"))[0]
	ingest(t, r, "", env("CLAUDE", "CHATGPT", "RESPOND", "g", "here", parent(msg(answered))))
	acked := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "h", "take it"))[0]
	if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "h", EventID: acked.Event.ID, Actor: "claude"}); err != nil {
		t.Fatal(err)
	}
	kept := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "h", "still open obligation", obliged("halted", "", "")))[0]
	ingest(t, r, "", env("CLAUDE", "CHATGPT", "RESPOND", "h", "evidence", parent(msg(kept))))
	done := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "discharged obligation", obliged("none", "GEMINI", "")))[0]
	ingest(t, r, "", env("GEMINI", "CLAUDE", "ACK", "g", "not needed", parent(msg(done))))
	ingest(t, r, "", env("CHATGPT", "GEMINI", "REQUEST", "g", "not claude's"))

	ids := func(ds []gateway.Delivery) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.EventID)
		}
		return out
	}
	owed, err := r.Owed(ctx, "CLAUDE", gateway.OpenSetQuery{})
	if want := sorted(open.Event.ID, timed.Event.ID, kept.Event.ID); err != nil || !slices.Equal(ids(owed.Items), want) || owed.Next != "" {
		t.Errorf("Owed = %v next %q, %v, want %v", ids(owed.Items), owed.Next, err, want)
	}

	all, err := r.Owed(ctx, "claude", gateway.OpenSetQuery{All: true})
	if err != nil {
		t.Fatal(err)
	}
	settled := map[string]string{}
	for _, d := range all.Items {
		settled[d.EventID] = d.Settled()
	}
	want := map[string]string{open.Event.ID: "", timed.Event.ID: "", answered.Event.ID: "answered", acked.Event.ID: "acknowledged", kept.Event.ID: "", done.Event.ID: "discharged"}
	if len(settled) != len(want) {
		t.Errorf("Owed all = %v, want %v", settled, want)
	}
	for id, w := range want {
		if got, ok := settled[id]; !ok || got != w {
			t.Errorf("Owed all: %s settled = %q (listed %v), want %q", id, got, ok, w)
		}
	}
	if !slices.IsSortedFunc(all.Items, func(a, b gateway.Delivery) int { return strings.Compare(a.EventID, b.EventID) }) {
		t.Errorf("Owed all = %v, want event id order", ids(all.Items))
	}

	// Owed decides what it reads as the deliveries do: the same items,
	// settled the same way, as filtering every delivery of every group.
	every, err := r.Deliveries(gateway.PerEvent(ctx), "claude", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fromDeliveries := map[string]string{}
	for _, d := range every {
		if d.Owes() || d.Settled() != "" {
			fromDeliveries[d.EventID] = d.Settled()
		}
	}
	if !maps.Equal(settled, fromDeliveries) {
		t.Errorf("Owed all = %v, the deliveries say %v", settled, fromDeliveries)
	}

	// Pages of one: every item once, in order.
	var paged []string
	for q := (gateway.OpenSetQuery{All: true, Limit: 1}); ; {
		p, err := r.Owed(ctx, "claude", q)
		if err != nil || len(p.Items) > 1 {
			t.Fatalf("Owed page after %q = %d items, %v", q.After, len(p.Items), err)
		}
		paged = append(paged, ids(p.Items)...)
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if !slices.Equal(paged, ids(all.Items)) {
		t.Errorf("Owed in pages of one = %v, want %v", paged, ids(all.Items))
	}

	// An hour later the request with a 30-minute deadline has lapsed:
	// listed as such with All, gone otherwise. The one without a deadline
	// is still owed (no fixed decay), and so is the obligation.
	offset.Store(int64(time.Hour))
	owed, err = r.Owed(ctx, "claude", gateway.OpenSetQuery{})
	if want := sorted(open.Event.ID, kept.Event.ID); err != nil || !slices.Equal(ids(owed.Items), want) {
		t.Errorf("Owed an hour later = %v, %v, want %v (the request without a deadline and the obligation)", ids(owed.Items), err, want)
	}
	all, _ = r.Owed(ctx, "claude", gateway.OpenSetQuery{All: true})
	lapsed := false
	for _, d := range all.Items {
		if d.EventID == timed.Event.ID {
			lapsed = d.Settled() == "lapsed"
		}
	}
	if !lapsed {
		t.Errorf("the request whose deadline passed an hour later: not listed as lapsed with All")
	}

	w, err := r.WaitingOn(ctx, "chatgpt", gateway.OpenSetQuery{})
	if err != nil || len(w.Items) != 1 || w.Items[0].EventID != kept.Event.ID || w.Items[0].DischargedBy != "" {
		t.Errorf("WaitingOn = %+v, %v, want the open obligation only", w.Items, err)
	}
	w, err = r.WaitingOn(ctx, "chatgpt", gateway.OpenSetQuery{All: true})
	by := map[string]string{}
	for _, x := range w.Items {
		by[x.EventID] = x.DischargedBy
	}
	if err != nil || len(w.Items) != 2 || by[kept.Event.ID] != "" || by[done.Event.ID] != "gemini" {
		t.Errorf("WaitingOn all = %+v, %v, want the open one and the one gemini discharged", w.Items, err)
	}
	if w, err := r.WaitingOn(ctx, "gemini", gateway.OpenSetQuery{}); err != nil || len(w.Items) != 0 {
		t.Errorf("WaitingOn for the delegate after its discharge = %+v, %v, want nothing", w.Items, err)
	}
	first := sorted(kept.Event.ID, done.Event.ID)[0]
	if w, err := r.WaitingOn(ctx, "chatgpt", gateway.OpenSetQuery{All: true, Limit: 1}); err != nil || len(w.Items) != 1 || w.Next != first {
		t.Errorf("WaitingOn limit 1 = %+v next %q, %v, want one item and next %s", w.Items, w.Next, err, first)
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestDischargeReachesStreams: the discharge of an obligation is
// delivered — to_me, must_not_respond, reason discharged, naming the
// obligation — to its addressees and, when the delegate discharged it, to
// its author; not to the one who discharged it nor to bystanders. Agent
// streams (FollowAgent) and listings (Deliveries) agree (issue #14).
func TestDischargeReachesStreams(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRelay(t, nil)
	ob := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "review before I ship", obliged("halted", "GEMINI", "")))[0].Event
	plain := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "no obligation"))[0].Event
	msg := data(t, ob).X.Envelope.Message
	dis := ingest(t, r, "", env("GEMINI", "CLAUDE", "ACK", "g", "not needed any more", func(e *envelope.Envelope) { e.Parent = msg }))[0].Event
	if dis.Kind != gateway.KindDischarge {
		t.Fatalf("the delegate's ACK = %s, want a discharge", dis.Kind)
	}
	if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionResolve, Group: "g", EventID: plain.ID, Actor: "claude"}); err != nil {
		t.Fatal(err)
	}
	// The last event, delivered to everyone: a stream that reached it
	// has decided everything before.
	last := ingest(t, r, "", env("USER", "CLAUDE", "REQUEST", "g", "the end"))[0].Event
	for _, tc := range []struct {
		agent string
		told  bool
	}{{"claude", true}, {"chatgpt", true}, {"gemini", false}} {
		var streamed *gateway.Delivery
		sctx, stop := context.WithCancel(ctx)
		for d, err := range r.FollowAgent(sctx, tc.agent, 0) {
			if err != nil {
				t.Fatalf("FollowAgent(%s) = %v", tc.agent, err)
			}
			if d.EventID == dis.ID {
				streamed = &d
			}
			if d.EventID == last.ID {
				break
			}
		}
		stop()
		var listed *gateway.Delivery
		ds, err := r.Deliveries(ctx, tc.agent, "g", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.EventID == dis.ID {
				listed = &d
			}
		}
		if (streamed != nil) != tc.told || (listed != nil) != tc.told {
			t.Errorf("%s told of the discharge: stream %v, listing %v, want %v", tc.agent, streamed != nil, listed != nil, tc.told)
			continue
		}
		if !tc.told {
			continue
		}
		for _, d := range []*gateway.Delivery{streamed, listed} {
			if d.Kind != gateway.KindDischarge || d.Discharges != ob.ID || !d.Discharged || d.From != "gemini" ||
				d.Directedness != attention.ToMe || d.Policy != attention.MustNotRespond || d.Reason != attention.ReasonDischarged ||
				d.Content != "not needed any more" || d.Owes() {
				t.Errorf("%s's delivery of the discharge = %+v", tc.agent, d)
			}
		}
	}
}
