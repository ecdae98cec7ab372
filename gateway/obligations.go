package gateway

import (
	"bytes"
	"context"
	"errors"
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
// ones, and the settled ones too when all is set (Waiting says what
// settles one). It reads them, their evidence and acks from the
// projections (docs/scaling.md "Projections"), and each obligation's
// event from the ledger: O(limit).
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
			Lapsed: !ob.Deadline.IsZero() && !now.Before(ob.Deadline), Protocol: d.Protocol,
			DischargedBy: row.DischargedBy, ResolvedBy: row.ResolvedBy}
		if d.X != nil && d.X.Envelope != nil {
			w.MessageID = d.X.Envelope.Message
		}
		answers, err := db.Evidence(ctx, ev.ID)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		for _, a := range answers {
			if !a.Reply && strings.EqualFold(a.Actor, ev.By) {
				continue // the author's own notes are no answer
			}
			w.Evidence = appendEvidence(w.Evidence, a.Actor)
			if a.Ack {
				w.Acked = appendEvidence(w.Acked, a.Actor)
			}
		}
		out = append(out, w)
	}
	return out, nil
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
				if len(open) == 0 && (ev.Kind != KindMessage || !bytes.Contains(ev.Data, []byte(`"obligation"`))) {
					continue // nothing open to answer or close, and it opens nothing: not decoded
				}
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

// dischargeUpdate returns the delivery of the discharge ev to the
// tracker's agent, and whether it gets one: it does when the obligation
// ev closes is addressed to it (it was delivered as must_respond, reason
// obligation, whatever claims were made since) or when it may discharge
// it itself (the author, the delegate), unless it discharged it. The
// delivery is to_me, must_not_respond, reason discharged, tool_mailbox:
// it owes nothing and tells the agent's streams that the obligation is
// closed (docs/agents.md "Streams learn of discharges"). It costs one
// read of the obligation's event per discharge.
func (t *tracker) dischargeUpdate(ctx context.Context, ev ledger.Event, d EventData) (Delivery, bool, error) {
	if d.EventID == "" || strings.EqualFold(ev.By, t.agent.ID) {
		return Delivery{}, false, nil
	}
	ob, err := t.r.store.Get(ctx, d.EventID)
	if errors.Is(err, ledger.ErrNotFound) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("gateway: obligation %s of discharge %s: %w", d.EventID, ev.ID, err)
	}
	od, err := ParseData(ob)
	if err != nil || ob.Kind != KindMessage || od.Obligation == nil {
		return Delivery{}, false, nil
	}
	ae := AttentionEvent(ob, od)
	owed := attention.Decide(ae, t.agent, attention.State{}, t.now).Reason == attention.ReasonObligation
	if !owed && !od.Obligation.CanDischarge(ob.By, t.agent.ID) {
		return Delivery{}, false, nil
	}
	out := Delivery{
		Delivery: attention.Delivery{
			EventID: ev.ID, Seq: ev.Seq, Group: ev.GroupID, Thread: ae.Thread, Agent: t.agent.ID,
			Directedness: attention.ToMe, Policy: attention.MustNotRespond, Reason: attention.ReasonDischarged,
			Injection: attention.ToolMailbox, Priority: "normal", IdempotencyKey: ev.ID + ":" + t.agent.ID,
		},
		Kind: ev.Kind, From: ev.By, To: []string{t.agent.ID}, Context: ae.Context, TS: ev.TS,
		Content: d.Text, Obligation: od.Obligation, Discharged: true, Discharges: ob.ID,
		Liveness: attention.LivenessOf(t.seen[t.agent.ID], t.now),
	}
	if x := d.X; x != nil {
		out.Verification = x.Verification
		if x.Envelope != nil { // an ACK envelope: its intent and words
			out.Intent, out.MessageID = x.Envelope.Intent, x.Envelope.Message
			if out.Content == "" {
				out.Content = x.Envelope.Body
			}
		}
	}
	return out, true, nil
}
