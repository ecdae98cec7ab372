package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// MaxOpenSetPage is the most items one page of an open-set query holds.
const MaxOpenSetPage = 1000

// OpenSetQuery selects one page of an open-set query (Owed, WaitingOn;
// issue #14 "Open-set queries"). The zero value is the first page of the
// open items.
type OpenSetQuery struct {
	// All includes the settled items: what the agent owed and has
	// answered, acknowledged or seen discharged (Owed), the obligations
	// already discharged (WaitingOn). They are hidden by default.
	All bool
	// After starts the page after this event id (the Next of the page
	// before); items are in event id order, which for the relay's ULIDs
	// is the order they were recorded in, oldest first.
	After string
	// Limit is the most items of the page: MaxOpenSetPage when ≤ 0 or
	// above it.
	Limit int
}

// Page is one page of an open-set query.
type Page[T any] struct {
	Items []T
	// Next is the After of the following page; "" on the last one.
	Next string
}

// Settled reports how an item the agent owed was settled (issue #14
// "States of an event"): "discharged" for an obligation its author or
// delegate closed, "accepted" for a HANDOFF or BLOCKED its addressee
// acknowledged, "acknowledged" or "answered" for another must_respond
// event the agent acknowledged or replied to, "lapsed" for one whose
// deadline passed unanswered (C2A "Stale Events": it reads may_respond
// now). It returns "" for an item still owed (Owes) and for one that
// never was.
func (d Delivery) Settled() string {
	switch {
	case d.Obligation != nil && d.Reason == attention.ReasonObligation:
		switch {
		case d.Discharged:
			return "discharged"
		case d.Obligation.Ack && d.Acked:
			return "accepted" // a HANDOFF or BLOCKED its addressee acknowledged
		}
		return ""
	case d.Policy != attention.MustRespond && !(d.Expired && d.Policy == attention.MayRespond):
		return "" // never owed: an expired must_respond reads may_respond
	case d.Acked:
		return "acknowledged"
	case d.Responded:
		return "answered"
	case d.Expired:
		return "lapsed"
	}
	return ""
}

// Owed returns a page of what agent owes over every group (issue #14
// "what I owe"): the deliveries for which Delivery.Owes holds, and with
// q.All the settled ones (Delivery.Settled) too, one per event (never
// merged by buffered or digest injection). See owed for its cost.
func (r *Relay) Owed(ctx context.Context, agent string, q OpenSetQuery) (Page[Delivery], error) {
	ds, err := r.owed(ctx, r.book.ActorID(agent))
	if err != nil {
		return Page[Delivery]{}, err
	}
	kept := ds[:0]
	for _, d := range ds {
		if d.Owes() || q.All && d.Settled() != "" {
			kept = append(kept, d)
		}
	}
	return pageOf(kept, func(d Delivery) string { return d.EventID }, q), nil
}

// owedKinds are the kinds that ask something of an agent or settle it.
var owedKinds = []string{KindMessage, KindAck, KindNotifyAck, KindDisposition, KindDischarge}

// owed returns agent's deliveries of every group that are or were
// must_respond, with their acks, answers and discharges marked. Whether
// an event is must_respond for an agent does not depend on the threads it
// takes part in (attention.Decide), so it reads only owedKinds, and the
// claims first (a role obligation claimed by another is not owed), and
// decides each message without the projections: one pass over each
// group's messages, acks and dispositions, skipping reads, reactions,
// deliveries and the relay's bookkeeping.
func (r *Relay) owed(ctx context.Context, agent string) ([]Delivery, error) {
	gs, err := r.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: listing groups: %w", err)
	}
	var out []Delivery
	for _, g := range gs {
		tr := r.newTracker(agent)
		if err := r.scan(ctx, g.ID, []string{KindClaim}, func(evs []ledger.Event) error {
			tr.learnClaims(evs)
			return nil
		}); err != nil {
			return nil, err
		}
		first := len(out)
		err := r.scan(ctx, g.ID, owedKinds, func(evs []ledger.Event) error {
			for _, ev := range evs {
				d, show, err := tr.observe(ctx, ev)
				if err != nil {
					return err
				}
				if show && ev.Kind == KindMessage && (d.Policy == attention.MustRespond || d.Expired && d.Policy == attention.MayRespond) {
					out = append(out, d)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i := first; i < len(out); i++ {
			id := out[i].EventID
			out[i].Acked, out[i].Responded, out[i].Discharged = tr.acked[id], tr.responded[id], tr.discharged[id]
		}
	}
	return out, nil
}

// scan calls fn with group's events of kinds, in seq order, in pages of
// inboxPage.
func (r *Relay) scan(ctx context.Context, group string, kinds []string, fn func([]ledger.Event) error) error {
	for after := int64(0); ; {
		evs, err := r.store.Range(ctx, group, after, kinds, inboxPage)
		if err != nil {
			return fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		if err := fn(evs); err != nil {
			return err
		}
		if len(evs) < inboxPage {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// WaitingOn returns a page of the obligations agent authored or may
// discharge as the delegate, over every group (issue #14 "what I am
// waiting on"): the open ones, and with q.All the discharged ones too
// (their DischargedBy set).
func (r *Relay) WaitingOn(ctx context.Context, agent string, q OpenSetQuery) (Page[Waiting], error) {
	ws, err := r.waiting(ctx, agent, q.All)
	if err != nil {
		return Page[Waiting]{}, err
	}
	return pageOf(ws, func(w Waiting) string { return w.EventID }, q), nil
}

// pageOf sorts items by id and returns the page of q.
func pageOf[T any](items []T, id func(T) string, q OpenSetQuery) Page[T] {
	slices.SortStableFunc(items, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	if q.After != "" {
		i, _ := slices.BinarySearchFunc(items, q.After, func(x T, after string) int {
			if id(x) <= after {
				return -1
			}
			return 1
		})
		items = items[i:]
	}
	limit := q.Limit
	if limit <= 0 || limit > MaxOpenSetPage {
		limit = MaxOpenSetPage
	}
	p := Page[T]{Items: items}
	if len(items) > limit {
		p.Items, p.Next = items[:limit], id(items[limit-1])
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}
