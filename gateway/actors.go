package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

// Actors lists every actor of the ledger (every by and to ever recorded)
// and of the address book, ordered by id, with event counts and what it
// owes: read from the projections (docs/scaling.md "Projections"), so it
// costs O(actors), whatever the history.
func (r *Relay) Actors(ctx context.Context) ([]Actor, error) {
	db, err := r.Projection(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.Actors(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: actors: %w", err)
	}
	out := make([]Actor, 0, len(rows))
	seen := map[string]bool{}
	for _, a := range rows {
		seen[strings.ToLower(a.ID)] = true
		out = append(out, Actor{ID: a.ID, Events: a.Events, Addressed: a.Addressed, Owes: int(a.Owes), LastTS: a.LastTS})
	}
	for _, a := range r.book.Agents() {
		if !seen[strings.ToLower(a.ID)] {
			seen[strings.ToLower(a.ID)] = true
			out = append(out, Actor{ID: a.ID})
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].ID) < strings.ToLower(out[j].ID) })
	return out, nil
}
