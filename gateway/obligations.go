package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
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
	// Protocol is set for a HANDOFF or BLOCKED (BeadBoard §6.2).
	Protocol *Protocol `json:"protocol,omitempty"`
	// Acked is who acknowledged it (chat.ack): a HANDOFF it settles, a
	// BLOCKED it leaves accepted but not yet resolved.
	Acked []string `json:"acked,omitempty"`
	// ResolvedBy is the addressee that resolved a BLOCKED; set only in
	// listings that include settled ones.
	ResolvedBy string `json:"resolved_by,omitempty"`
}

// waitingKinds are the kinds Waiting reads.
var waitingKinds = []string{KindMessage, KindDischarge, KindReaction, KindAck, KindDisposition, KindNotify}

// Waiting returns the open obligations agent authored or is the delegate
// of, over every group, oldest first (issue #14 "what I am blocking /
// waiting on"). Discharged obligations are left out, and so are a
// HANDOFF its addressee acknowledged and a BLOCKED its addressee resolved
// (docs/agents.md "Handoff and blocked").
func (r *Relay) Waiting(ctx context.Context, agent string) ([]Waiting, error) {
	return r.waiting(ctx, agent, false)
}

// waiting is Waiting, with the discharged obligations too when all is
// set.
func (r *Relay) waiting(ctx context.Context, agent string, all bool) ([]Waiting, error) {
	agent = r.book.ActorID(agent)
	return r.openObligations(ctx, all, func(ev ledger.Event, ob *attention.Obligation, _ *Protocol) bool {
		return ob.CanDischarge(ev.By, agent)
	})
}

// openObligations returns the obligations of every group that keep
// selects, oldest first in each group: the open ones, or with all the
// settled ones too (Waiting says what settles one).
func (r *Relay) openObligations(ctx context.Context, all bool, keep func(ev ledger.Event, ob *attention.Obligation, p *Protocol) bool) ([]Waiting, error) {
	gs, err := r.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: listing groups: %w", err)
	}
	now := r.now()
	var out []Waiting
	for _, g := range gs {
		open := map[string]int{} // event id → index in out
		for after := int64(0); ; {
			evs, err := r.store.Range(ctx, g.ID, after, waitingKinds, inboxPage)
			if err != nil {
				return nil, fmt.Errorf("gateway: reading group %q: %w", g.ID, err)
			}
			for _, ev := range evs {
				d, err := ParseData(ev)
				if err != nil {
					continue
				}
				switch ev.Kind {
				case KindMessage:
					if ob := d.Obligation; ob != nil && keep(ev, ob, d.Protocol) {
						w := Waiting{Group: ev.GroupID, EventID: ev.ID, Seq: ev.Seq, Author: ev.By, To: d.To, TS: ev.TS, Obligation: *ob,
							Lapsed: !ob.Deadline.IsZero() && !now.Before(ob.Deadline), Protocol: d.Protocol}
						if d.X != nil && d.X.Envelope != nil {
							w.MessageID = d.X.Envelope.Message
						}
						open[ev.ID] = len(out)
						out = append(out, w)
					}
					if i, ok := open[d.ReplyTo]; ok && d.ReplyTo != "" {
						out[i].Evidence = appendEvidence(out[i].Evidence, ev.By)
					}
				case KindDischarge:
					if i, ok := open[d.EventID]; ok {
						out[i].DischargedBy = ev.By
						if !all {
							out[i].EventID = "" // removed below
						}
						delete(open, d.EventID)
					}
				case KindNotify:
					// The relay's notice that a BLOCKED's addressee resolved it.
					if i, ok := open[d.RelatedEventID]; ok && d.Kind == KindUnblocked {
						out[i].ResolvedBy = d.ActorID
						if !all {
							out[i].EventID = ""
						}
						delete(open, d.RelatedEventID)
					}
				default:
					i, ok := open[d.EventID]
					if !ok || strings.EqualFold(ev.By, out[i].Author) { // the author's own notes are no answer
						break
					}
					out[i].Evidence = appendEvidence(out[i].Evidence, ev.By)
					if ev.Kind != KindAck {
						break
					}
					out[i].Acked = appendEvidence(out[i].Acked, ev.By)
					if p := out[i].Protocol; p != nil && p.EventType == ProtocolHandoff {
						// The addressee accepted the handoff: nothing left to wait on.
						if !all {
							out[i].EventID = ""
						}
						delete(open, d.EventID)
					}
				}
			}
			if len(evs) < inboxPage {
				break
			}
			after = evs[len(evs)-1].Seq
		}
	}
	kept := out[:0]
	for _, w := range out {
		if w.EventID != "" {
			kept = append(kept, w)
		}
	}
	return kept, nil
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
		// A HANDOFF or BLOCKED is settled, for its addressee, by its ack.
		return !d.Discharged && !(d.Obligation.Ack && d.Acked)
	}
	return !d.Acked && !d.Responded
}
