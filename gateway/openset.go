package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// q.All the settled ones (Delivery.Settled) too. It reads the items the
// projections say the agent may owe (docs/scaling.md "Projections"),
// a page at a time, and decides each again (DeliveriesOf): O(page),
// plus the items it skips (lapsed, claimed by another).
func (r *Relay) Owed(ctx context.Context, agent string, q OpenSetQuery) (Page[Delivery], error) {
	db, err := r.Projection(ctx)
	if err != nil {
		return Page[Delivery]{}, err
	}
	id := r.book.ActorID(agent)
	a := r.agentOf(id)
	tokens := []string{strings.ToLower(id)}
	roles, err := db.OweTokens(ctx)
	if err != nil {
		return Page[Delivery]{}, fmt.Errorf("gateway: %w", err)
	}
	for _, t := range roles {
		probe := attention.Event{Kind: KindMessage, Intent: attention.IntentRequest, To: []string{t}}
		if dir := attention.DirectednessOf(probe, a, attention.State{}, time.Time{}); dir == attention.ToMe || dir == attention.ToMyRole {
			tokens = append(tokens, t)
		}
	}
	limit := q.Limit
	if limit <= 0 || limit > MaxOpenSetPage {
		limit = MaxOpenSetPage
	}
	p := Page[Delivery]{Items: []Delivery{}}
	for after := q.After; ; {
		rows, err := db.Owed(ctx, tokens, after, q.All, limit+1)
		if err != nil {
			return p, fmt.Errorf("gateway: %w", err)
		}
		evs := make([]ledger.Logged, 0, len(rows))
		for _, o := range rows {
			ev, err := r.store.Get(ctx, o.Event)
			if err != nil {
				return p, fmt.Errorf("gateway: owed event %s: %w", o.Event, err)
			}
			evs = append(evs, ledger.Logged{Pos: o.Pos, Event: ev})
		}
		ds, err := r.DeliveriesOf(ctx, id, evs)
		if err != nil {
			return p, err
		}
		for _, d := range ds {
			if d.Owes() || q.All && d.Settled() != "" {
				if len(p.Items) == limit {
					p.Next = p.Items[limit-1].EventID
					return p, nil
				}
				p.Items = append(p.Items, d)
			}
		}
		if len(rows) <= limit {
			return p, nil
		}
		after = rows[len(rows)-1].Event
	}
}

// WaitingOn returns a page of the obligations agent authored or may
// discharge as the delegate, over every group (issue #14 "what I am
// waiting on"): the open ones, and with q.All the discharged ones too
// (their DischargedBy set). It reads them from the projections: O(page).
func (r *Relay) WaitingOn(ctx context.Context, agent string, q OpenSetQuery) (Page[Waiting], error) {
	limit := q.Limit
	if limit <= 0 || limit > MaxOpenSetPage {
		limit = MaxOpenSetPage
	}
	ws, err := r.waitingPage(ctx, agent, q.After, q.All, limit+1)
	if err != nil {
		return Page[Waiting]{}, err
	}
	p := Page[Waiting]{Items: ws}
	if len(ws) > limit {
		p.Items, p.Next = ws[:limit], ws[limit-1].EventID
	}
	return p, nil
}
