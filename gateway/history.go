package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// windowCatchUp is how many events before a window DeliveriesOf reads to
// learn the threads the agent takes part in, past the relay's cache of
// tracker states.
const windowCatchUp = 128

// DeliveriesOf returns what agent should see of evs, a window of the
// ledger's log in log order (ledger.Store.Log or LogBefore reversed),
// each with its Position, oldest first; silent ones are left out. It
// costs O(len(evs)) reads plus at most windowCatchUp events per group:
// thread participation comes from the relay's cache of tracker states
// (resumeTracker) or from the windowCatchUp events before the window,
// so a thread the agent joined longer ago than that, and never walked
// since, counts as one it is not in. Acks count when they are in the
// window after their message, and so do replies and discharges: a
// window is a page, not the history.
func (r *Relay) DeliveriesOf(ctx context.Context, agent string, evs []ledger.Logged) ([]Delivery, error) {
	agent = r.book.ActorID(agent)
	trs := map[string]*tracker{}
	var out []Delivery
	var groups []string // of out
	for _, l := range evs {
		tr, ok := trs[l.GroupID]
		if !ok {
			var err error
			if tr, err = r.windowTracker(ctx, agent, l.GroupID, l.Seq, evs); err != nil {
				return nil, err
			}
			trs[l.GroupID] = tr
		}
		d, show, err := tr.observe(ctx, l.Event)
		if err != nil {
			return nil, err
		}
		if show {
			d.Position = l.Pos
			out = append(out, d)
			groups = append(groups, l.GroupID)
		}
	}
	for i := range out {
		tr, id := trs[groups[i]], out[i].EventID
		// A discharge's own delivery says Discharged already.
		out[i].Acked, out[i].Responded, out[i].Discharged = tr.acked[id], tr.responded[id], out[i].Discharged || tr.discharged[id]
	}
	return out, nil
}

// windowTracker returns a tracker of agent in group that has observed
// what it can of the events before seq (see DeliveriesOf) and knows the
// claims of the window evs.
func (r *Relay) windowTracker(ctx context.Context, agent, group string, seq int64, evs []ledger.Logged) (*tracker, error) {
	tr, last := r.resumeTracker(agent, group, seq-1)
	if seq-1-last > windowCatchUp {
		last = seq - 1 - windowCatchUp
	}
	for last < seq-1 {
		page, err := r.store.Range(ctx, group, last, nil, int(min(streamPage, seq-1-last)))
		if err != nil {
			return nil, fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		if len(page) == 0 {
			break
		}
		tr.learnClaims(page)
		for _, ev := range page {
			if _, _, err := tr.observe(ctx, ev); err != nil {
				return nil, err
			}
		}
		last = page[len(page)-1].Seq
	}
	for _, l := range evs {
		if l.GroupID == group && l.Kind == KindClaim {
			tr.learnClaims([]ledger.Event{l.Event})
		}
	}
	return tr, nil
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
// for newer ones): its cost is independent of history, and so is what
// it knows (see DeliveriesOf). A page of fewer than limit deliveries
// with an Older link means its window held no more.
func (r *Relay) DeliveriesFrom(ctx context.Context, agent string, cur LogCursor, limit int) (DeliveryPage, error) {
	var (
		p       DeliveryPage
		ds      []Delivery
		done    bool // the log has no more events in the page's direction
		forward = cur.After > 0
	)
	limit = min(max(limit, 1), 1000)
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
		if ds, err = r.DeliveriesOf(ctx, agent, p.Window); err != nil {
			return p, err
		}
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
			first, done = ds[0].Position, false
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
