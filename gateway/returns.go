package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Returns and escalation of undischarged obligations (issue #14 item 3,
// docs/agents.md "Returns and escalation"): an open obligation comes back
// to its addressees as a notice knock every return interval, Returns
// times; then it escalates to the holders of the coordinator role, then to
// the human. Every rung is a system.notify in the ledger, appended with the
// dedupe key "obligation-rung:<event id>:<rung>", and every timer is read
// back from the ledger, so a restarted relay, or several relays sharing a
// JetStream ledger, climb the same ladder once.

// Defaults of ReturnsOptions (the `[obligations]` table of
// docs/configuration.md).
const (
	DefaultReturnInterval  = 15 * time.Minute
	DefaultReturns         = 3
	DefaultCoordinatorRole = "coordinator"
	// DefaultReturnsPoll bounds how long RunReturns sleeps, so a new
	// obligation's first rung comes at most this late; a step with
	// nothing new reads an empty page of the log.
	DefaultReturnsPoll = 5 * time.Second
)

// Notice kinds (data.kind of the system.notify) of the rungs.
const (
	// NoticeObligationReturn is a return to the obligation's addressees.
	NoticeObligationReturn = "obligation_return"
	// NoticeObligationEscalation is an escalation to the coordinator or
	// the human.
	NoticeObligationEscalation = "obligation_escalation"
)

// Escalation targets, data.escalated_to of an escalation notice.
const (
	EscalatedToCoordinator = "coordinator"
	EscalatedToHuman       = "human"
)

// ReturnsOptions configure RunReturns and Returner.
type ReturnsOptions struct {
	// Interval is the flat time between two rungs, and between an
	// obligation without a deadline and its first return;
	// DefaultReturnInterval when zero.
	Interval time.Duration
	// Returns is how many times an open obligation returns to its
	// addressees before it escalates. Zero or less turns returns and
	// escalation off: obligations stay open, unchased.
	Returns int
	// CoordinatorRole is the address book role whose holders get the
	// first escalation; DefaultCoordinatorRole when empty. Without a
	// holder that rung is skipped.
	CoordinatorRole string
	// Human is the actor id of the last rung; without one the ladder ends
	// at the coordinator.
	Human string
	// Poll bounds RunReturns' sleep; DefaultReturnsPoll when zero.
	Poll time.Duration
}

// obligationRung is the data of a rung's system.notify: CCCS §7.1's
// notice fields, plus the rung. Consumers that read it as EventData see an
// ordinary notice with requires_ack.
type obligationRung struct {
	Kind           string   `json:"kind"`
	Title          string   `json:"title"`
	Message        string   `json:"message"`
	Priority       string   `json:"priority"`
	To             []string `json:"to"`
	TargetActorID  string   `json:"target_actor_id,omitempty"`
	RelatedEventID string   `json:"related_event_id"`
	RequiresAck    bool     `json:"requires_ack"`
	// Rung counts from 1: 1…Returns are returns, Returns+1 the
	// coordinator, Returns+2 the human.
	Rung int `json:"rung"`
	// EscalatedTo is "coordinator" or "human" for an escalation.
	EscalatedTo string `json:"escalated_to,omitempty"`
	// IssuedAt is the issuing relay's clock when the rung was recorded
	// (RFC 3339): the next rung falls due one interval later.
	IssuedAt string `json:"issued_at"`
}

// rungAuthor is the by of a rung, as of the relay's other notices
// (NotifyAgent): no token principal appends system.notify events itself.
const rungAuthor = "system"

// rungDedupeKey is the dedupe key of an obligation's rung: one event per
// (obligation, rung) however many relays or restarts try.
func rungDedupeKey(eventID string, rung int) string {
	return fmt.Sprintf("obligation-rung:%s:%d", eventID, rung)
}

// pendingObligation is an open obligation the Returner tracks.
type pendingObligation struct {
	group, id, author string
	to                []string
	ob                attention.Obligation
	created           time.Time // the event's ts
	rung              int       // the last rung recorded, 0 for none
	issued            time.Time // when it was recorded
	// handoff: a BeadBoard HANDOFF, closed by an addressee's ack.
	handoff bool
	// acked are the addressees that acknowledged an obligation an ack
	// settles for them (attention.Obligation.Ack: HANDOFF, BLOCKED).
	acked map[string]bool
}

// Returner climbs the ladder of every open obligation. It reads the ledger
// in its append order (ledger.Store.Log) from the start, then only what is
// new: its state is the open obligations and the last rung each has in the
// ledger, nothing else. A Returner is used by one goroutine.
type Returner struct {
	r       *Relay
	o       ReturnsOptions
	log     *slog.Logger
	pos     int64
	pending map[string]*pendingObligation
}

// NewReturner returns a Returner of r's obligations with options o (nil:
// the defaults).
func (r *Relay) NewReturner(o *ReturnsOptions) *Returner {
	rt := &Returner{r: r, log: r.component("returns"), pending: map[string]*pendingObligation{}}
	if o != nil {
		rt.o = *o
	} else {
		rt.o.Returns = DefaultReturns
	}
	if rt.o.Interval <= 0 {
		rt.o.Interval = DefaultReturnInterval
	}
	if rt.o.CoordinatorRole == "" {
		rt.o.CoordinatorRole = DefaultCoordinatorRole
	}
	if rt.o.Poll <= 0 {
		rt.o.Poll = DefaultReturnsPoll
	}
	if rt.o.Human != "" {
		rt.o.Human = r.book.ActorID(rt.o.Human)
	}
	return rt
}

// RunReturns runs a Returner with options o until ctx ends (see
// Returner.Run).
func (r *Relay) RunReturns(ctx context.Context, o *ReturnsOptions) error {
	return r.NewReturner(o).Run(ctx)
}

// Run calls Step until ctx ends, sleeping until the next rung falls due
// (at most Poll, so new obligations are seen). With Returns ≤ 0 it only
// waits for ctx. Errors of a step are logged and retried at the next poll.
func (rt *Returner) Run(ctx context.Context) error {
	if rt.o.Returns <= 0 {
		<-ctx.Done()
		return nil
	}
	for {
		_, next, err := rt.Step(ctx)
		if err != nil && ctx.Err() == nil {
			rt.log.LogAttrs(ctx, slog.LevelWarn, "obligation returns", slog.Any("err", err))
		}
		wait := rt.o.Poll
		if !next.IsZero() && err == nil {
			wait = min(wait, max(next.Sub(rt.r.now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Step reads what the ledger gained since the last step, records every
// rung due at the relay's clock (at most one per obligation), and returns
// how many rungs it recorded and when the next one falls due (zero when
// none is pending). A rung another relay recorded first counts as
// recorded.
func (rt *Returner) Step(ctx context.Context) (int, time.Time, error) {
	if rt.o.Returns <= 0 {
		return 0, time.Time{}, nil
	}
	if err := rt.catchUp(ctx); err != nil {
		return 0, time.Time{}, err
	}
	now := rt.r.now()
	var n int
	var next time.Time
	ids := make([]string, 0, len(rt.pending))
	for id := range rt.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids) // ULIDs: oldest obligation first
	for _, id := range ids {
		p := rt.pending[id]
		rung, due, ok := rt.nextRung(p)
		if !ok {
			continue
		}
		if now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		recorded, err := rt.record(ctx, p, rung, now)
		if err != nil {
			return n, next, err
		}
		if recorded {
			n++
		}
		if _, open := rt.pending[id]; !open {
			continue // discharged meanwhile
		}
		if _, due, ok := rt.nextRung(p); ok && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return n, next, nil
}

// nextRung returns the rung after p's last one and when it falls due, or
// false when the ladder has ended. The first return falls due at the
// obligation's deadline, or one interval after it was recorded; every
// later rung one interval after the previous one was issued.
func (rt *Returner) nextRung(p *pendingObligation) (int, time.Time, bool) {
	rung := p.rung + 1
	if rung == rt.o.Returns+1 && len(rt.coordinators(p)) == 0 {
		rung++
	}
	if rung == rt.o.Returns+2 && len(rt.humans(p)) == 0 {
		rung++
	}
	if rung > rt.o.Returns+2 {
		return 0, time.Time{}, false // the last rung stays open
	}
	switch {
	case p.rung > 0:
		return rung, p.issued.Add(rt.o.Interval), true
	case !p.ob.Deadline.IsZero():
		return rung, p.ob.Deadline, true
	}
	return rung, p.created.Add(rt.o.Interval), true
}

// catchUp reads the log from the last step's position.
func (rt *Returner) catchUp(ctx context.Context) error {
	for {
		evs, err := rt.r.store.Log(ctx, rt.pos, inboxPage)
		if err != nil {
			return fmt.Errorf("gateway: returns: reading the ledger: %w", err)
		}
		for _, ev := range evs {
			rt.observe(ev.Event)
			rt.pos = ev.Pos
		}
		if len(evs) < inboxPage {
			return nil
		}
	}
}

var (
	obligationKey = []byte(`"obligation"`)
	rungKey       = []byte(`"rung"`)
	unblockedKey  = []byte(`"` + KindUnblocked + `"`)
)

// observe updates the pending set with one ledger event.
func (rt *Returner) observe(ev ledger.Event) {
	switch ev.Kind {
	case KindMessage:
		if !bytes.Contains(ev.Data, obligationKey) {
			return // most messages: skip decoding them
		}
		d, err := ParseData(ev)
		if err != nil || d.Obligation == nil {
			return
		}
		created, err := ev.Time()
		if err != nil {
			return
		}
		if _, ok := rt.pending[ev.ID]; !ok {
			rt.pending[ev.ID] = &pendingObligation{group: ev.GroupID, id: ev.ID, author: ev.By, to: d.To, ob: *d.Obligation, created: created,
				handoff: d.Protocol != nil && d.Protocol.EventType == ProtocolHandoff, acked: map[string]bool{}}
		}
	case KindDischarge:
		if d, err := ParseData(ev); err == nil {
			delete(rt.pending, d.EventID)
		}
	case KindAck:
		// An addressee's ack settles its part of a HANDOFF or BLOCKED,
		// and closes a HANDOFF (docs/agents.md "Handoff and blocked").
		d, err := ParseData(ev)
		if err != nil {
			return
		}
		p, ok := rt.pending[d.EventID]
		actor := cmp.Or(d.ActorID, ev.By)
		if !ok || !p.ob.Ack || attention.SameActor(actor, p.author) {
			return
		}
		if p.handoff {
			delete(rt.pending, d.EventID)
			return
		}
		p.acked[strings.ToLower(actor)] = true
	case KindNotify:
		if ev.By == rungAuthor && bytes.Contains(ev.Data, unblockedKey) {
			// The addressee resolved a BLOCKED.
			if d, err := ParseData(ev); err == nil && d.Kind == KindUnblocked {
				delete(rt.pending, d.RelatedEventID)
			}
			return
		}
		rt.noteRung(ev)
	}
}

// rungOf decodes a rung's system.notify; ok is false for any other event.
// Only the relay's own rungs count: by system, of the two rung kinds.
func rungOf(ev ledger.Event) (d obligationRung, ok bool) {
	if ev.Kind != KindNotify || ev.By != rungAuthor || !bytes.Contains(ev.Data, rungKey) {
		return d, false
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil || d.Rung <= 0 || d.RelatedEventID == "" ||
		d.Kind != NoticeObligationReturn && d.Kind != NoticeObligationEscalation {
		return d, false
	}
	return d, true
}

// noteRung notes a rung event read from the ledger or returned by Append.
func (rt *Returner) noteRung(ev ledger.Event) {
	d, ok := rungOf(ev)
	if !ok {
		return
	}
	p, ok := rt.pending[d.RelatedEventID]
	if !ok || d.Rung <= p.rung {
		return
	}
	issued, err := time.Parse(time.RFC3339Nano, d.IssuedAt)
	if err != nil {
		if issued, err = ev.Time(); err != nil {
			return
		}
	}
	p.rung, p.issued = d.Rung, issued
}

// record appends rung of p, unless the obligation was discharged since
// the last read. It reports whether this call appended it.
func (rt *Returner) record(ctx context.Context, p *pendingObligation, rung int, now time.Time) (bool, error) {
	for _, key := range []string{dischargeDedupeKey(p.group, p.id), unblockedDedupeKey(p.group, p.id)} {
		if _, err := rt.r.store.GetByDedupeKey(ctx, key); err == nil {
			delete(rt.pending, p.id) // closed since the last read
			return false, nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return false, fmt.Errorf("gateway: returns: %w", err)
		}
	}
	d := obligationRung{Priority: "attention", RelatedEventID: p.id, RequiresAck: true, Rung: rung, IssuedAt: now.UTC().Format(time.RFC3339Nano)}
	if rung <= rt.o.Returns && len(p.acked) > 0 && len(rt.responsible(ctx, p)) == 0 {
		// Every addressee acknowledged a BLOCKED it has not resolved:
		// nobody is left to return it to, so it escalates.
		if rung = rt.o.Returns + 1; len(rt.coordinators(p)) == 0 {
			rung++
		}
		if rung == rt.o.Returns+2 && len(rt.humans(p)) == 0 {
			p.rung = rung // the ladder has nowhere to go
			return false, nil
		}
		d.Rung = rung
	}
	blocks := string(p.ob.Blocks)
	switch {
	case rung <= rt.o.Returns:
		d.Kind, d.To = NoticeObligationReturn, rt.responsible(ctx, p)
		d.Title = fmt.Sprintf("obligation return %d of %d", rung, rt.o.Returns)
		switch {
		case p.handoff:
			d.Message = fmt.Sprintf("%s handed %s to you: acknowledge it to take it over", p.author, p.id)
		case p.ob.Ack:
			d.Message = fmt.Sprintf("%s is blocked on you by %s (blocks %s) until you resolve it", p.author, p.id, blocks)
		default:
			d.Message = fmt.Sprintf("%s still waits on your answer to %s (blocks %s): it stays open until %s discharges it", p.author, p.id, blocks, p.author)
		}
	case rung == rt.o.Returns+1:
		d.Kind, d.To, d.EscalatedTo = NoticeObligationEscalation, rt.coordinators(p), EscalatedToCoordinator
		d.Title = "obligation escalated to the coordinator"
		d.Message = fmt.Sprintf("%s's obligation %s to %s is still open after %d returns (blocks %s)", p.author, p.id, strings.Join(p.to, ", "), rt.o.Returns, blocks)
	default:
		d.Kind, d.To, d.EscalatedTo = NoticeObligationEscalation, rt.humans(p), EscalatedToHuman
		d.Title = "obligation escalated to the human"
		d.Message = fmt.Sprintf("%s's obligation %s to %s is still open after %d returns and the coordinator (blocks %s)", p.author, p.id, strings.Join(p.to, ", "), rt.o.Returns, blocks)
	}
	if p.ob.DefaultAction != "" {
		d.Message += "; default action: " + p.ob.DefaultAction
	}
	d.Message = oneLineNote(d.Message)
	if len(d.To) == 1 {
		d.TargetActorID = d.To[0]
	}
	if d.To == nil {
		// Nobody to return it to (its addressees left the book): the
		// rung is recorded all the same, addressed to nobody, so the
		// ladder goes on.
		d.To = []string{}
	}
	res, err := rt.r.store.Append(ctx, []ledger.Record{{Kind: KindNotify, GroupID: p.group, By: rungAuthor,
		Data: mustJSON(d), DedupeKey: rungDedupeKey(p.id, rung)}})
	if err != nil {
		return false, fmt.Errorf("gateway: returns: recording rung %d of %s: %w", rung, p.id, err)
	}
	rt.noteRung(res[0].Event)
	if p.rung < rung { // a malformed duplicate: do not try it again
		p.rung, p.issued = rung, now
	}
	if !res[0].Duplicate {
		rt.log.LogAttrs(ctx, slog.LevelInfo, "obligation rung", slog.String("group", p.group), slog.String("event", p.id),
			slog.Int("rung", rung), slog.String("kind", d.Kind), slog.Any("to", d.To))
	}
	return !res[0].Duplicate, nil
}

// responsible returns who owes p now: the claimant when a holder of an
// addressed role claimed it, otherwise every addressee — actors named, and
// the holders of the roles named (every member for @all) — but the author
// and, for a BLOCKED, those who acknowledged it.
func (rt *Returner) responsible(ctx context.Context, p *pendingObligation) []string {
	if c, err := rt.r.store.GetClaim(ctx, p.group, p.id, rt.r.now()); err == nil && !p.acked[strings.ToLower(c.Actor)] {
		return []string{c.Actor}
	}
	ae := attention.Event{ID: p.id, Group: p.group, Kind: KindMessage, From: p.author, To: p.to, Obligation: &p.ob}
	var out []string
	held := map[string]bool{}
	for _, a := range rt.r.book.Agents() {
		aa := attention.Agent{ID: a.ID, Roles: a.Roles}
		if attention.SameActor(a.ID, p.author) || p.acked[strings.ToLower(a.ID)] {
			continue
		}
		if pol, _ := attention.PolicyOf(ae, aa, attention.State{}, p.created); pol == attention.MustRespond {
			out = append(out, a.ID)
			held[strings.ToLower(a.ID)] = true
		}
	}
	for _, t := range p.to {
		// An actor outside the address book is its own addressee.
		if !strings.HasPrefix(t, "@") && !held[strings.ToLower(t)] && !p.acked[strings.ToLower(t)] && !attention.SameActor(t, p.author) && !rt.isRole(t) {
			out = append(out, t)
			held[strings.ToLower(t)] = true
		}
	}
	return out
}

// isRole reports whether some book entry holds role name.
func (rt *Returner) isRole(name string) bool {
	return len(rt.holders(name, "")) > 0
}

// holders returns the book's holders of role, but except.
func (rt *Returner) holders(role, except string) []string {
	role = strings.TrimPrefix(role, "@")
	var out []string
	for _, a := range rt.r.book.Agents() {
		if attention.SameActor(a.ID, except) {
			continue
		}
		for _, r := range a.Roles {
			if attention.SameActor(strings.TrimPrefix(strings.TrimSpace(r), "@"), role) {
				out = append(out, a.ID)
				break
			}
		}
	}
	return out
}

func (rt *Returner) coordinators(p *pendingObligation) []string {
	return rt.holders(rt.o.CoordinatorRole, p.author)
}

func (rt *Returner) humans(p *pendingObligation) []string {
	if rt.o.Human == "" || attention.SameActor(rt.o.Human, p.author) {
		return nil
	}
	return []string{rt.o.Human}
}
