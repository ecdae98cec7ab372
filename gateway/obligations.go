package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// Rung is the last rung of its returns and escalation recorded so far,
	// 0 for none; EscalatedTo is "coordinator" or "human" once it
	// escalated (docs/agents.md "Returns and escalation").
	Rung        int    `json:"rung,omitempty"`
	EscalatedTo string `json:"escalated_to,omitempty"`
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
			DischargedBy: row.DischargedBy, ResolvedBy: row.ResolvedBy, Rung: row.Rung, EscalatedTo: row.EscalatedTo}
		if d.X != nil && d.X.Envelope != nil {
			w.MessageID = d.X.Envelope.Message
		}
		answers, err := db.Evidence(ctx, ev.ID)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		for _, a := range answers {
			if !a.Reply && attention.SameActor(a.Actor, ev.By) {
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

// obligationWalk follows the obligations of one group event by event, so
// that a caller may keep it and apply only the events appended since
// (OpenProtocol).
type obligationWalk struct {
	all  bool
	keep func(ev ledger.Event, ob *attention.Obligation, p *Protocol) bool
	// out holds the obligations kept, in seq order; a settled one has its
	// EventID cleared (unless all) and is dropped by compact.
	out  []Waiting
	open map[string]int // event id → index in out, while open
	read int64          // the last seq applied
}

// advanceWalk applies group's events after w.read to w.
func (r *Relay) advanceWalk(ctx context.Context, group string, w *obligationWalk) error {
	for {
		evs, err := r.store.Range(ctx, group, w.read, waitingKinds, inboxPage)
		if err != nil {
			return fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		for _, ev := range evs {
			w.apply(ev)
		}
		if len(evs) < inboxPage {
			return nil
		}
	}
}

// apply applies one event: a kept obligation opens, a reply, reaction,
// ack or disposition is evidence, a discharge (and a HANDOFF's ack, a
// BLOCKED's unblocked notice) settles one.
func (w *obligationWalk) apply(ev ledger.Event) {
	w.read = ev.Seq
	d, err := ParseData(ev)
	if err != nil {
		return
	}
	if w.open == nil {
		w.open = map[string]int{}
	}
	settle := func(id string, i int) {
		if !w.all {
			w.out[i].EventID = "" // dropped by compact
		}
		delete(w.open, id)
	}
	switch ev.Kind {
	case KindMessage:
		if ob := d.Obligation; ob != nil && w.keep(ev, ob, d.Protocol) {
			wt := Waiting{Group: ev.GroupID, EventID: ev.ID, Seq: ev.Seq, Author: ev.By, To: d.To, TS: ev.TS, Obligation: *ob, Protocol: d.Protocol}
			if d.X != nil && d.X.Envelope != nil {
				wt.MessageID = d.X.Envelope.Message
			}
			w.open[ev.ID] = len(w.out)
			w.out = append(w.out, wt)
		}
		if i, ok := w.open[d.ReplyTo]; ok && d.ReplyTo != "" {
			w.out[i].Evidence = appendEvidence(w.out[i].Evidence, ev.By)
		}
	case KindDischarge:
		if i, ok := w.open[d.EventID]; ok {
			w.out[i].DischargedBy = ev.By
			settle(d.EventID, i)
		}
	case KindNotify:
		if rd, ok := rungOf(ev); ok {
			if i, ok := w.open[rd.RelatedEventID]; ok && rd.Rung > w.out[i].Rung {
				w.out[i].Rung, w.out[i].EscalatedTo = rd.Rung, rd.EscalatedTo
			}
		}
		// The relay's notice that a BLOCKED's addressee resolved it.
		if i, ok := w.open[d.RelatedEventID]; ok && d.Kind == KindUnblocked {
			w.out[i].ResolvedBy = d.ActorID
			settle(d.RelatedEventID, i)
		}
	default:
		i, ok := w.open[d.EventID]
		if !ok || attention.SameActor(ev.By, w.out[i].Author) { // the author's own notes are no answer
			break
		}
		w.out[i].Evidence = appendEvidence(w.out[i].Evidence, ev.By)
		if ev.Kind != KindAck {
			break
		}
		w.out[i].Acked = appendEvidence(w.out[i].Acked, ev.By)
		if p := w.out[i].Protocol; p != nil && p.EventType == ProtocolHandoff {
			settle(d.EventID, i) // the addressee accepted the handoff
		}
	}
}

// appendOpen compacts w and appends copies of its obligations to dst,
// lapsed as of now.
func (w *obligationWalk) appendOpen(dst []Waiting, now time.Time) []Waiting {
	kept := w.out[:0]
	for _, wt := range w.out {
		if wt.EventID != "" {
			if _, ok := w.open[wt.EventID]; ok {
				w.open[wt.EventID] = len(kept)
			}
			kept = append(kept, wt)
		}
	}
	clear(w.out[len(kept):])
	w.out = kept
	for _, wt := range w.out {
		wt.Lapsed = !wt.Obligation.Deadline.IsZero() && !now.Before(wt.Obligation.Deadline)
		wt.To, wt.Evidence, wt.Acked = slices.Clone(wt.To), slices.Clone(wt.Evidence), slices.Clone(wt.Acked)
		dst = append(dst, wt)
	}
	return dst
}

func appendEvidence(s []string, actor string) []string {
	for _, x := range s {
		if attention.SameActor(x, actor) {
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
	if d.EventID == "" || attention.SameActor(ev.By, t.agent.ID) {
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
		Liveness: t.liveness(),
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
