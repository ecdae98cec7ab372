package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// DeliveriesOf returns what agent should see of evs, events of the
// ledger's log in log order (ledger.Store.Log or LogBefore reversed),
// each with its Position, oldest first; silent ones are left out. What
// a delivery needs of the rest of the history (whether the agent takes
// part in the event's thread, its acks, replies, discharges and claims)
// comes from the projections (docs/scaling.md "Projections"), brought up
// to date first: the answer is exact for any window, and costs O(len(evs))
// reads whatever the history.
func (r *Relay) DeliveriesOf(ctx context.Context, agent string, evs []ledger.Logged) ([]Delivery, error) {
	db, err := r.Projection(ctx)
	if err != nil {
		return nil, err
	}
	tr := r.projectedTracker(r.book.ActorID(agent), db)
	ms, err := marksOf(ctx, db, tr.agent.ID, evs)
	if err != nil {
		return nil, err
	}
	tr.claimed = ms.claimed
	var out []Delivery
	for _, l := range evs {
		d, show, err := tr.observe(ctx, l.Event)
		if err != nil {
			return nil, err
		}
		if show {
			d.Position = l.Pos
			// A discharge's own delivery says Discharged already.
			d.Acked, d.Responded, d.Discharged = ms.acked[d.EventID], ms.responded[d.EventID], d.Discharged || ms.discharged[d.EventID]
			out = append(out, d)
		}
	}
	return out, nil
}

// Delivery returns agent's delivery of the event eventID (in group, or in
// any group when group is ""), one delivery per event as Deliveries gives
// it with PerEvent, or ok=false when there is no such event or it was
// never delivered to agent (its own, bookkeeping). It reads that one event
// and decides it with DeliveriesOf: its cost is independent of history,
// where finding the event among Deliveries reads all of it.
func (r *Relay) Delivery(ctx context.Context, agent, group, eventID string) (d Delivery, ok bool, err error) {
	ev, err := r.store.Get(ctx, eventID)
	if errors.Is(err, ledger.ErrNotFound) || err == nil && group != "" && ev.GroupID != group {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("gateway: reading event %s: %w", eventID, err)
	}
	ds, err := r.DeliveriesOf(ctx, agent, []ledger.Logged{{Event: ev}})
	if err != nil || len(ds) == 0 {
		return Delivery{}, false, err
	}
	return ds[0], true, nil
}

// projectedTracker returns a tracker of agent whose thread participation
// comes from db (projView), not from the events it observed; the caller
// sets its claims.
func (r *Relay) projectedTracker(agent string, db *projection.DB) *tracker {
	tr := r.newTracker(agent)
	tr.view = newProjView(db, tr.agent)
	return tr
}

// LogCursor names a page of the ledger's log: the page ends before
// position Before, or starts after position After; both zero is the
// newest page. Positions are those of ledger.Store.Log.
type LogCursor struct {
	Before, After int64
}

// DeliveryPage is one keyset page of an agent's deliveries over every
// group (DeliveriesFrom).
type DeliveryPage struct {
	// Deliveries are in log order, at most the limit asked.
	Deliveries []Delivery
	// Window is the log events they were computed from, in log order.
	Window []ledger.Logged
	// Older is the Before of the next older page, Newer the After of the
	// next newer one; 0 when there is none.
	Older, Newer int64
}

// pageChunk is how many log events DeliveriesFrom reads at once, and
// pageScan how many it reads at most for one page.
const (
	pageChunk = 250
	pageScan  = 2000
)

// DeliveriesFrom returns the page of agent's deliveries at cur, at most
// limit of them (1 to 1000), computed with DeliveriesOf over at most
// pageScan events of the ledger's log (LogBefore for older pages, Log
// for newer ones), a chunk at a time: its cost is independent of
// history. A page of fewer than limit deliveries with an Older link
// means its window held no more. The agent's buffered and digest
// injection applies, as in Deliveries.
func (r *Relay) DeliveriesFrom(ctx context.Context, agent string, cur LogCursor, limit int) (DeliveryPage, error) {
	var (
		p       DeliveryPage
		raw, ds []Delivery // before and after the agent's injection
		done    bool       // the log has no more events in the page's direction
		forward = cur.After > 0
	)
	limit = min(max(limit, 1), 1000)
	inj := r.injectorOf(r.book.ActorID(agent))
	for !done && len(ds) < limit && len(p.Window) < pageScan {
		var chunk []ledger.Logged
		var err error
		if forward {
			after := cur.After
			if len(p.Window) > 0 {
				after = p.Window[len(p.Window)-1].Pos
			}
			chunk, err = r.store.Log(ctx, after, pageChunk)
			p.Window = append(p.Window, chunk...)
		} else {
			before := cur.Before
			if len(p.Window) > 0 {
				before = p.Window[0].Pos
			}
			chunk, err = r.store.LogBefore(ctx, before, pageChunk)
			slices.Reverse(chunk)
			p.Window = append(chunk, p.Window...)
		}
		if err != nil {
			return p, fmt.Errorf("gateway: reading the log: %w", err)
		}
		done = len(chunk) < pageChunk
		more, err := r.DeliveriesOf(ctx, agent, chunk)
		if err != nil {
			return p, err
		}
		if forward {
			raw = append(raw, more...)
		} else {
			raw = append(more, raw...)
		}
		ds = inj.apply(raw)
	}
	if len(p.Window) == 0 {
		return p, nil
	}
	first, last := p.Window[0].Pos, p.Window[len(p.Window)-1].Pos
	if len(ds) > limit {
		if forward {
			ds = ds[:limit]
			last, done = ds[len(ds)-1].Position, false
		} else {
			ds = ds[len(ds)-limit:]
			// A merged run's Position is its last fragment's: the older
			// page begins before its first, or repeats the others.
			first, done = ds[0].Position, false
			if len(ds[0].Fragments) > 0 {
				first = ds[0].Fragments[0].Position
			}
		}
	}
	p.Deliveries = ds
	olderExists, newerExists := !done, cur.Before > 0
	if forward {
		olderExists, newerExists = true, !done
	}
	if olderExists {
		p.Older = first
	}
	if newerExists {
		p.Newer = last
	}
	return p, nil
}
