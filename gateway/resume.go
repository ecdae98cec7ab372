package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// The resume point of an agent's channel over every group.
//
// Such a channel (FollowAgent) resumes from its delivery cursors, one a
// group: it wants every delivery above its group's cursor. Following the
// ledger's log from position 0 and dropping what is at or below the
// cursors gave that, at the price of reading the whole log on every
// (re)connect. The resume point is a log position V such that every event
// at or before V that may be a delivery for the agent (mayDeliver) has a
// seq at or below its group's delivery cursor: the channel drops each of
// them anyway, so following from V yields what following from 0 yields,
// after the drops. Delivery cursors never move back (ActionDelivered), so
// once true of V it stays true; the relay keeps the greatest V it has
// checked per agent, in memory and, every resumeSaveEvery positions, in
// a ledger mark (resumeMarkName), and moves it forward when a delivery
// cursor advances (extendResume) and when a channel connects
// (AgentResume). The walk that moves it reads events only, without
// deciding them: an event may be a delivery unless it is the agent's own
// or bookkeeping, which its kind and author tell.

// resumePage is how many log events a walk of the resume point reads at
// once, after a first page of resumeFirstPage; resumeAckBudget bounds the events one delivery acknowledgement
// walks (extendResume), so that an ack stays cheap; the next one goes on.
const (
	resumePage      = 256
	resumeFirstPage = 4
	resumeAckBudget = 256
)

// resumeSaveEvery is how far (in log positions) the resume point moves in
// memory before it is saved in the ledger again; a relay that stops loses
// at most that much of it, which the next connect walks again.
const resumeSaveEvery = 4096

// maxResumePoints bounds the agents whose resume point the relay keeps in
// memory; past it the map starts over (the saved marks remain).
const maxResumePoints = 4096

// resumePoint is an agent's resume point: the log position V and the
// event there, and the position last saved in the ledger.
type resumePoint struct {
	at    ledger.Mark
	saved int64
}

// resumeMarkName is the name of the ledger mark holding agent's resume
// point. The space keeps it apart from the outbound horizon's name.
func resumeMarkName(agent string) string { return "channel resume " + agent }

// mayDeliver reports whether ev may be a delivery (not silent) for the
// agent with id agent: every event but the agent's own and bookkeeping
// ones (attention.Decide's silent reasons, which read only the kind and
// the author), and every digest and discharge, which the tracker decides
// otherwise.
func mayDeliver(ev ledger.Event, agent string) bool {
	if ev.Kind == KindDigest || ev.Kind == KindDischarge {
		return true
	}
	dec := attention.Decide(attention.Event{ID: ev.ID, Kind: ev.Kind, From: ev.By}, attention.Agent{ID: agent}, attention.State{}, time.Time{})
	return dec.Injection != attention.Silent
}

// AgentResume returns agent's delivery cursors in every conversation
// group (as Backend.Cursors: a group without one is left out) and the
// log position its channel over every group may follow from
// (FollowAgent's after) to receive, once it drops what is at or below
// these cursors, exactly what following from position 0 gives. It walks
// the log from the resume point it knows up to the first event that may
// be a delivery above its group's cursor: its cost is the groups' and
// the events between, not the ledger's. For an agent with buffered
// injection (Agent.Buffer) it returns position 0: a merged delivery may
// join events on both sides of any position.
func (r *Relay) AgentResume(ctx context.Context, agent string) (map[string]int64, int64, error) {
	agent = r.book.ActorID(agent)
	buffered := r.injectorOf(agent).buf != nil
	// The resume point is loaded before the cursors are read: it holds
	// for the cursors of when it was kept, and they only advance, so it
	// holds for those read after it. Loaded after them, it could come
	// from a confirmation (extendResume) that landed in between, past
	// deliveries above the cursors returned, which the channel would
	// wait for and never receive.
	var from ledger.Mark
	if !buffered {
		var err error
		if from, err = r.loadResume(ctx, agent); err != nil {
			return nil, 0, err
		}
	}
	gs, err := r.Groups(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("gateway: listing groups: %w", err)
	}
	out, err := r.DeliveryCursors(ctx, agent, gs)
	if err != nil {
		return nil, 0, err
	}
	if buffered {
		return out, 0, nil
	}
	// A group listed since, and a bookkeeping group (SystemGroup, whose
	// cursor a remote channel does not learn: c2a.Remote.Cursor), count
	// as without a cursor, which never skips what the channel delivers.
	cursor := func(group string) (int64, error) { return out[group], nil }
	at, err := r.walkResume(ctx, agent, from, cursor, 0)
	if err != nil {
		return nil, 0, err
	}
	// Saved only for an agent that confirmed something: a name that
	// never did (any name, on a relay without tokens) leaves no mark.
	if err := r.keepResume(ctx, agent, at, len(out) > 0); err != nil {
		// A shortcut only: the position holds, it is not kept for later.
		r.log.LogAttrs(ctx, slog.LevelWarn, "keeping the channel resume point", slog.String("agent", agent), slog.Any("err", err))
	}
	return out, at.Pos, nil
}

// extendResume moves agent's resume point forward after its delivery
// cursor advanced, walking at most resumeAckBudget events; it does
// nothing for an agent whose point is not in memory (no channel over
// every group connected since the relay started).
func (r *Relay) extendResume(ctx context.Context, agent string) error {
	if r.injectorOf(agent).buf != nil {
		return nil
	}
	r.mu.Lock()
	p, ok := r.resume[agent]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	cursors := map[string]int64{}
	cursor := func(group string) (int64, error) {
		if seq, ok := cursors[group]; ok || SystemGroup(group) {
			return seq, nil
		}
		c, err := r.store.GetCursor(ctx, group, deliveredActor(agent))
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return 0, err
		}
		cursors[group] = c.Seq
		return c.Seq, nil
	}
	at, err := r.walkResume(ctx, agent, p.at, cursor, resumeAckBudget)
	if err != nil {
		return err
	}
	return r.keepResume(ctx, agent, at, false)
}

// walkResume returns the resume point after from: the position of the
// last event before the first that may be a delivery for agent above its
// group's cursor (cursor), or of the log's last event. It reads at most
// budget events (all when budget ≤ 0).
func (r *Relay) walkResume(ctx context.Context, agent string, from ledger.Mark, cursor func(string) (int64, error), budget int) (ledger.Mark, error) {
	at := from
	// The first page is small: the walk often ends at once (an ack that
	// did not confirm the first unconfirmed delivery).
	next := resumeFirstPage
	for read := 0; budget <= 0 || read < budget; next = min(next*4, resumePage) {
		page := next
		if budget > 0 {
			page = min(page, budget-read)
		}
		ls, err := r.store.Log(ctx, at.Pos, page)
		if err != nil {
			return from, fmt.Errorf("gateway: reading the log after %d: %w", at.Pos, err)
		}
		for _, l := range ls {
			if mayDeliver(l.Event, agent) {
				seq, err := cursor(l.GroupID)
				if err != nil {
					return from, fmt.Errorf("gateway: delivery cursor of %s in %s: %w", agent, l.GroupID, err)
				}
				if l.Seq > seq {
					return at, nil
				}
			}
			at = ledger.Mark{Pos: l.Pos, EventID: l.ID}
		}
		read += len(ls)
		if len(ls) < page {
			break
		}
	}
	return at, nil
}

// loadResume returns the resume point the relay knows for agent: the one
// in memory, else the saved mark when the ledger still holds its event at
// its position (a ledger restored or imported anew numbers its log
// otherwise), else position 0.
func (r *Relay) loadResume(ctx context.Context, agent string) (ledger.Mark, error) {
	r.mu.Lock()
	p, ok := r.resume[agent]
	r.mu.Unlock()
	if ok {
		return p.at, nil
	}
	m, err := r.store.GetMark(ctx, resumeMarkName(agent))
	if errors.Is(err, ledger.ErrNotFound) || err == nil && m.Pos <= 0 {
		return ledger.Mark{}, nil
	}
	if err != nil {
		return ledger.Mark{}, fmt.Errorf("gateway: reading the resume point of %s: %w", agent, err)
	}
	ls, err := r.store.Log(ctx, m.Pos-1, 1)
	if err != nil {
		return ledger.Mark{}, fmt.Errorf("gateway: checking the resume point of %s: %w", agent, err)
	}
	if len(ls) == 0 || ls[0].Pos != m.Pos || ls[0].ID != m.EventID {
		return ledger.Mark{}, nil
	}
	r.mu.Lock()
	if _, ok := r.resume[agent]; !ok {
		r.rememberResume(agent, resumePoint{at: m, saved: m.Pos})
	}
	r.mu.Unlock()
	return m, nil
}

// keepResume records at as agent's resume point unless the one kept is
// further on (each is right: the cursors only advance), and saves it in
// the ledger when save is set or it moved resumeSaveEvery past the saved
// one.
func (r *Relay) keepResume(ctx context.Context, agent string, at ledger.Mark, save bool) error {
	r.mu.Lock()
	p := r.resume[agent]
	if at.Pos > p.at.Pos {
		p.at = at
	}
	saveAt := p.at
	if save = (save || p.at.Pos-p.saved >= resumeSaveEvery) && p.at.Pos > p.saved; save {
		p.saved = p.at.Pos
	}
	r.rememberResume(agent, p)
	r.mu.Unlock()
	if !save {
		return nil
	}
	if err := r.store.SetMark(ctx, resumeMarkName(agent), saveAt); err != nil {
		return fmt.Errorf("gateway: saving the resume point of %s: %w", agent, err)
	}
	return nil
}

// rememberResume stores p as agent's point in memory; r.mu is held.
func (r *Relay) rememberResume(agent string, p resumePoint) {
	if _, ok := r.resume[agent]; !ok && len(r.resume) >= maxResumePoints {
		clear(r.resume)
	}
	r.resume[agent] = p
}
