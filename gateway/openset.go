package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
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
// q.All the settled ones (Delivery.Settled) too. It walks every group's
// deliveries for the agent, as Deliveries does.
func (r *Relay) Owed(ctx context.Context, agent string, q OpenSetQuery) (Page[Delivery], error) {
	ds, err := r.Deliveries(ctx, agent, "", 0, 0)
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
