package gateway_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
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
