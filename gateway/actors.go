package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Actor is one actor of the ledger or the address book (issue 13): who
// wrote or was addressed by events, with what it owes.
type Actor struct {
	// ID is the actor id, as the address book spells it when it has the
	// actor, else as the ledger first recorded it.
	ID string `json:"agent"`
	// Events counts the events it wrote (by).
	Events int64 `json:"events"`
	// Addressed counts the messages naming it as a recipient (to).
	Addressed int64 `json:"addressed"`
	// Owes counts the messages it must respond to (C2A must_respond as
	// decided on arrival, without thread or claim state) that it has not
	// acked, resolved or answered.
	Owes int `json:"owes"`
	// LastTS is the ledger time of its last event or message naming it.
	LastTS string `json:"last_ts,omitempty"`
}

// maxOwed bounds the open obligations the actor index keeps per actor;
// past it Owes stops growing (and may undercount later settlements).
const maxOwed = 10000

// actorIndex is the actors of the ledger, built by reading the log once
// and then only what was appended since (scan once, then incremental):
// in memory, for every store. Its size grows with the number of actors
// and their open obligations, not with history.
type actorIndex struct {
	mu   sync.Mutex
	pos  int64 // the log position read up to
	byID map[string]*actorEntry
}

type actorEntry struct {
	Actor
	owed  map[string]string // open must-respond: event id → message id
	byMsg map[string]string // message id → event id, of owed
}

// settle closes the obligation id names: an event id (acks,
// dispositions) or a message id (replies).
func (e *actorEntry) settle(id string) {
	if id == "" {
		return
	}
	if ev, ok := e.byMsg[id]; ok {
		id = ev
	}
	if msg, ok := e.owed[id]; ok {
		delete(e.owed, id)
		delete(e.byMsg, msg)
	}
}

// actorPage is how many log events the index reads at once.
const actorPage = 4096

// Actors lists every actor of the ledger (every by and to ever recorded)
// and of the address book, ordered by id, with event counts and what it
// owes. The first call reads the whole log in pages; later calls read
// only what was appended since.
func (r *Relay) Actors(ctx context.Context) ([]Actor, error) {
	ix := &r.actors
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.byID == nil {
		ix.byID = map[string]*actorEntry{}
	}
	for {
		page, err := r.store.Log(ctx, ix.pos, actorPage)
		if err != nil {
			return nil, fmt.Errorf("gateway: reading the log for actors: %w", err)
		}
		for _, l := range page {
			r.indexActors(ix, l.Event)
			ix.pos = l.Pos
		}
		if len(page) < actorPage {
			break
		}
	}
	for _, a := range r.book.Agents() {
		ix.entry(a.ID)
	}
	out := make([]Actor, 0, len(ix.byID))
	for _, e := range ix.byID {
		a := e.Actor
		a.Owes = len(e.owed)
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].ID) < strings.ToLower(out[j].ID) })
	return out, nil
}

// entry returns id's entry, made when absent.
func (ix *actorIndex) entry(id string) *actorEntry {
	key := strings.ToLower(id)
	e, ok := ix.byID[key]
	if !ok {
		e = &actorEntry{Actor: Actor{ID: id}}
		ix.byID[key] = e
	}
	return e
}

// indexActors adds ev to the index.
func (r *Relay) indexActors(ix *actorIndex, ev ledger.Event) {
	d, err := ParseData(ev)
	if err != nil {
		return
	}
	if ev.By != "" {
		by := ix.entry(r.book.ActorID(ev.By))
		by.Events++
		by.LastTS = ev.TS
		switch ev.Kind {
		case KindAck, KindDisposition:
			by.settle(d.EventID)
		case KindMessage:
			if x := d.X; x != nil && x.Envelope != nil {
				by.settle(x.Envelope.Parent)
			}
		}
	}
	if ev.Kind != KindMessage {
		return
	}
	ae := AttentionEvent(ev, d)
	for _, to := range d.To {
		id := r.book.ActorID(to)
		if id == "" || strings.EqualFold(id, ev.By) {
			continue
		}
		e := ix.entry(id)
		e.Addressed++
		e.LastTS = ev.TS
		a := attention.Agent{ID: id}
		if entry, ok := r.book.Agent(id); ok {
			a.Roles = entry.Roles
		}
		if attention.Decide(ae, a, attention.State{}, r.now()).Policy != attention.MustRespond || len(e.owed) >= maxOwed {
			continue
		}
		if e.owed == nil {
			e.owed, e.byMsg = map[string]string{}, map[string]string{}
		}
		// Settled by an ack or disposition (the event id) or a reply
		// (the envelope's message id).
		msg := ""
		if x := d.X; x != nil && x.Envelope != nil {
			msg = x.Envelope.Message
		}
		e.owed[ev.ID] = msg
		if msg != "" {
			e.byMsg[msg] = ev.ID
		}
	}
}
