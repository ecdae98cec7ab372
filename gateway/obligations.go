package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// Waiting is one open obligation an agent authored (or may discharge as
// the delegate): what it waits on, and the evidence so far.
type Waiting struct {
	Group      string               `json:"group"`
	EventID    string               `json:"event_id"`
	Seq        int64                `json:"seq"`
	MessageID  string               `json:"message,omitempty"`
	Author     string               `json:"author"`
	To         []string             `json:"to,omitempty"`
	TS         string               `json:"ts"`
	Obligation attention.Obligation `json:"obligation"`
	// Evidence is who answered so far (a reply, a reaction, an ack or a
	// disposition): shown to the author, never discharge.
	Evidence []string `json:"evidence,omitempty"`
	// Lapsed is set once the deadline has passed.
	Lapsed bool `json:"lapsed,omitempty"`
	// DischargedBy is who discharged it (the author or the delegate); set
	// only in listings that include settled obligations (WaitingOn with
	// All).
	DischargedBy string `json:"discharged_by,omitempty"`
}

// Waiting returns the open obligations agent authored or is the delegate
// of, over every group, oldest first (issue #14 "what I am blocking /
// waiting on"). Discharged obligations are left out.
func (r *Relay) Waiting(ctx context.Context, agent string) ([]Waiting, error) {
	var out []Waiting
	for after := ""; ; {
		ws, err := r.waitingPage(ctx, agent, after, false, MaxOpenSetPage)
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
		if len(ws) < MaxOpenSetPage {
			return out, nil
		}
		after = ws[len(ws)-1].EventID
	}
}

// waitingPage returns the obligations agent authored or is the delegate
// of with event ids after after, oldest first, at most limit: the open
// ones, and the discharged ones too when all is set. It reads them and
// their evidence from the projections (docs/scaling.md "Projections"),
// and each obligation's event from the ledger: O(limit).
func (r *Relay) waitingPage(ctx context.Context, agent, after string, all bool, limit int) ([]Waiting, error) {
	db, err := r.Projection(ctx)
	if err != nil {
		return nil, err
	}
	agent = r.book.ActorID(agent)
	rows, err := db.Waits(ctx, strings.ToLower(agent), after, all, limit)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	now := r.now()
	out := []Waiting{}
	for _, row := range rows {
		ev, err := r.store.Get(ctx, row.Event)
		if err != nil {
			return nil, fmt.Errorf("gateway: obligation %s: %w", row.Event, err)
		}
		d, err := ParseData(ev)
		ob := d.Obligation
		if err != nil || ob == nil || !ob.CanDischarge(ev.By, agent) {
			continue
		}
		w := Waiting{Group: ev.GroupID, EventID: ev.ID, Seq: ev.Seq, Author: ev.By, To: d.To, TS: ev.TS, Obligation: *ob,
			Lapsed: !ob.Deadline.IsZero() && !now.Before(ob.Deadline), DischargedBy: row.DischargedBy}
		if d.X != nil && d.X.Envelope != nil {
			w.MessageID = d.X.Envelope.Message
		}
		by, err := db.Evidence(ctx, ev.ID)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		for _, a := range by {
			w.Evidence = appendEvidence(w.Evidence, a)
		}
		out = append(out, w)
	}
	return out, nil
}

func appendEvidence(s []string, actor string) []string {
	for _, x := range s {
		if strings.EqualFold(x, actor) {
			return s
		}
	}
	return append(s, actor)
}

// Owes reports whether d is something its agent still owes (issue #14
// "what I owe"): an open obligation addressed to it (must_respond until
// its author discharges it, whatever the agent replied), or another
// must_respond event it has neither acknowledged nor answered.
func (d Delivery) Owes() bool {
	if d.Policy != attention.MustRespond {
		return false
	}
	if d.Obligation != nil && d.Reason == attention.ReasonObligation {
		return !d.Discharged
	}
	return !d.Acked && !d.Responded
}
