package gateway

import (
	"context"
	"fmt"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// windowCatchUp is how many events before a window DeliveriesOf reads to
// learn the threads the agent takes part in, past the relay's cache of
// tracker states.
const windowCatchUp = 1024

// DeliveriesOf returns what agent should see of evs, a window of the
// ledger's log in log order (ledger.Store.Log or LogBefore reversed),
// each with its Position, oldest first; silent ones are left out. It
// costs O(len(evs)) reads plus at most windowCatchUp events per group:
// thread participation comes from the relay's cache of tracker states
// (resumeTracker) or from the windowCatchUp events before the window,
// so a thread the agent joined longer ago than that, and never walked
// since, counts as one it is not in. Acks count when they are in the
// window after their message: a window is a page, not the history.
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
		out[i].Acked = trs[groups[i]].acked[out[i].EventID]
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
