package c2a

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// Backend is a relay as agent interfaces see it. [Local] and [Remote]
// implement it. Every method that names an agent counts as that agent's
// activity (liveness, docs/design.md §5.4).
type Backend interface {
	// Deliveries returns agent's deliveries of group (all groups when
	// "") with seq > sinceSeq, oldest first, at most limit (all when ≤ 0).
	Deliveries(ctx context.Context, agent, group string, sinceSeq int64, limit int) ([]gateway.Delivery, error)
	// Follow yields agent's deliveries of one group with seq > sinceSeq,
	// stored then live, until ctx ends or an error (yielded last).
	Follow(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[gateway.Delivery, error]
	// FollowAll yields agent's deliveries of every group after the ledger
	// position afterPos, in ledger order, stored then live, each with its
	// Position, until ctx ends or an error (yielded last).
	FollowAll(ctx context.Context, agent string, afterPos int64) iter.Seq2[gateway.Delivery, error]
	// Groups lists the ledger's groups.
	Groups(ctx context.Context) ([]ledger.Group, error)
	// Owed returns a page of what agent owes (gateway.Relay.Owed).
	Owed(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Delivery], error)
	// WaitingOn returns a page of the obligations agent waits on
	// (gateway.Relay.WaitingOn).
	WaitingOn(ctx context.Context, agent string, q gateway.OpenSetQuery) (gateway.Page[gateway.Waiting], error)
	// Events returns group's ledger events with seq > sinceSeq, of kinds
	// (all when empty), at most limit.
	Events(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error)
	// Act performs an action (ack, read, react, claim, defer, resolve) as
	// req.Actor. Refusals are *gateway.ActionError.
	Act(ctx context.Context, req gateway.ActionRequest) (gateway.ActionResult, error)
	// Ingest records envelope text sent by agent; idempotencyKey is the
	// transport retry key. A refused envelope is a *gateway.Rejection.
	Ingest(ctx context.Context, agent string, text []byte, idempotencyKey string) (SendResult, error)
	// Cursor returns agent's delivery cursor seq in group (where its
	// channel resumes; gateway.ActionDelivered), 0 when it has none. It is
	// not the read cursor: reading never moves it.
	Cursor(ctx context.Context, agent, group string) (int64, error)
	// Cursors returns agent's delivery cursors in every group that has
	// one, by group, in one call: what a channel resumes from. A group
	// missing from the map has none (0).
	Cursors(ctx context.Context, agent string) (map[string]int64, error)
	// Touch records agent's activity.
	Touch(ctx context.Context, agent string) error
	// Agents lists the agents the relay knows or has seen, with liveness.
	Agents(ctx context.Context) ([]gateway.AgentStatus, error)
	// Notify records a system.notify for agent about event eventID of
	// group (delivery failures). Backends that cannot write one return nil
	// after logging.
	Notify(ctx context.Context, agent, group, eventID, kind, message string) error
}

// DeliveryFinder is a Backend that finds agent's delivery of one event
// without reading the agent's history (gateway.Relay.Delivery), in
// group or, when group is "", in any group; ok is false when the event
// does not exist or was never delivered to agent. Local and Remote are
// DeliveryFinders; FindDelivery uses it.
type DeliveryFinder interface {
	Delivery(ctx context.Context, agent, group, id string) (d gateway.Delivery, ok bool, err error)
}

// DeliveryPager is a Backend that reads agent's deliveries over every
// group a keyset page of the ledger's log at a time
// (gateway.Relay.DeliveriesFrom): its cost is a page's whatever the
// history. Local and Remote are DeliveryPagers; Newest uses it.
type DeliveryPager interface {
	DeliveryPage(ctx context.Context, agent string, cur gateway.LogCursor, limit int) (gateway.DeliveryPage, error)
}

// Resumer is a Backend that tells a channel over every group where to
// follow from (gateway.Relay.AgentResume): agent's delivery cursors, as
// Cursors gives them, and a ledger position after which FollowAll yields,
// once what is at or below these cursors is dropped, exactly what it
// yields from position 0, read in one step so that the two agree. Local
// and Remote are Resumers; Remote answers position 0 from a relay that
// does not compute one.
type Resumer interface {
	Resume(ctx context.Context, agent string) (cursors map[string]int64, afterPos int64, err error)
}

var (
	_ Resumer        = (*Local)(nil)
	_ Resumer        = (*Remote)(nil)
	_ DeliveryFinder = (*Local)(nil)
	_ DeliveryPager  = (*Local)(nil)
	_ DeliveryFinder = (*Remote)(nil)
	_ DeliveryPager  = (*Remote)(nil)
)

// NewestPages bounds how many pages of the ledger's log (each at most
// 2000 events, gateway.Relay.DeliveriesFrom) Newest reads through a
// DeliveryPager before it stops and reports that older deliveries were
// not looked at.
const NewestPages = 10

// Newest returns the newest limit (at least one) of agent's deliveries
// that keep accepts (all when keep is nil), in log order, and whether older ones
// than those returned may match (more). Through a DeliveryPager it reads
// the ledger's log backwards a page at a time and stops at limit
// matches or after NewestPages pages, so that its cost does not grow
// with the history; any other Backend is asked for every delivery.
func Newest(ctx context.Context, b Backend, agent string, keep func(gateway.Delivery) bool, limit int) (ds []gateway.Delivery, more bool, err error) {
	limit = max(limit, 1)
	filter := func(in []gateway.Delivery) (out []gateway.Delivery) {
		for _, d := range in {
			if keep == nil || keep(d) {
				out = append(out, d)
			}
		}
		return out
	}
	p, ok := b.(DeliveryPager)
	if !ok {
		all, err := b.Deliveries(ctx, agent, "", 0, 0)
		if err != nil {
			return nil, false, err
		}
		ds = filter(all)
		if len(ds) > limit {
			return ds[len(ds)-limit:], true, nil
		}
		return ds, false, nil
	}
	var cur gateway.LogCursor
	for pages := 1; ; pages++ {
		page, err := p.DeliveryPage(ctx, agent, cur, 1000)
		if err != nil {
			return nil, false, err
		}
		ds = append(filter(page.Deliveries), ds...)
		switch {
		case len(ds) > limit:
			return ds[len(ds)-limit:], true, nil
		case page.Older == 0:
			return ds, false, nil
		case len(ds) == limit || pages >= NewestPages:
			return ds, true, nil
		}
		cur = gateway.LogCursor{Before: page.Older}
	}
}

// SendResult is the outcome of an envelope sent by an agent.
type SendResult struct {
	Message   string `json:"message"`
	Thread    string `json:"thread,omitempty"`
	EventID   string `json:"eventId"`
	Group     string `json:"group"`
	Seq       int64  `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	// Differs: a duplicate whose recorded envelope says something else
	// (gateway.Outcome.Differs); the recorded one stands.
	Differs bool   `json:"differs,omitempty"`
	Status  string `json:"verification"`
}

// Local is a Backend over an in-process relay.
type Local struct {
	Relay *gateway.Relay
	// Transport names the intake of sent envelopes ("mcp", "channel").
	Transport string
	// Scopes is the relay's reservation service (Coordinator); nil
	// refuses reservations with ErrNoReservations.
	Scopes *reserve.Service
}

var _ Backend = (*Local)(nil)

// Deliveries calls Relay.Deliveries.
func (l *Local) Deliveries(ctx context.Context, agent, group string, sinceSeq int64, limit int) ([]gateway.Delivery, error) {
	return l.Relay.Deliveries(ctx, agent, group, sinceSeq, limit)
}

// Delivery calls Relay.Delivery.
func (l *Local) Delivery(ctx context.Context, agent, group, id string) (gateway.Delivery, bool, error) {
	return l.Relay.Delivery(ctx, agent, group, id)
}

// DeliveryPage calls Relay.DeliveriesFrom.
func (l *Local) DeliveryPage(ctx context.Context, agent string, cur gateway.LogCursor, limit int) (gateway.DeliveryPage, error) {
	return l.Relay.DeliveriesFrom(ctx, agent, cur, limit)
}

// Follow calls Relay.FollowDeliveries.
func (l *Local) Follow(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[gateway.Delivery, error] {
	l.Relay.Touch(l.Relay.Book().ActorID(agent))
	return l.Relay.FollowDeliveries(ctx, agent, group, sinceSeq)
}

// FollowAll calls Relay.FollowAgent.
func (l *Local) FollowAll(ctx context.Context, agent string, afterPos int64) iter.Seq2[gateway.Delivery, error] {
	l.Relay.Touch(l.Relay.Book().ActorID(agent))
	return l.Relay.FollowAgent(ctx, agent, afterPos)
}

// Groups lists the ledger's conversation groups (gateway.Relay.Groups).
func (l *Local) Groups(ctx context.Context) ([]ledger.Group, error) {
	return l.Relay.Groups(ctx)
}

// Events reads the ledger.
func (l *Local) Events(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	return l.Relay.Store().Range(ctx, group, sinceSeq, kinds, limit)
}

// Act calls Relay.Act; a claim first releases a claim held by an evicted
// agent (Relay.ReleaseEvictedClaim).
func (l *Local) Act(ctx context.Context, req gateway.ActionRequest) (gateway.ActionResult, error) {
	if req.Action == gateway.ActionClaim {
		if _, _, err := l.Relay.ReleaseEvictedClaim(ctx, req.Group, req.EventID); err != nil {
			return gateway.ActionResult{}, err
		}
	}
	return l.Relay.Act(ctx, req)
}

// Ingest runs the relay's intake pipeline on text as agent.
func (l *Local) Ingest(ctx context.Context, agent string, text []byte, idempotencyKey string) (SendResult, error) {
	tr := l.Transport
	if tr == "" {
		tr = "mcp"
	}
	l.Relay.Touch(l.Relay.Book().ActorID(agent))
	outs, err := l.Relay.Ingest(ctx, gateway.Intake{Transport: tr, Source: "agent " + agent,
		IdempotencyKey: idempotencyKey, Data: strings.NewReader(string(text))})
	if err != nil {
		return SendResult{}, err
	}
	o := outs[0]
	if o.Reject != nil {
		return SendResult{}, o.Reject
	}
	return SendResult{Message: o.Envelope.Message, Thread: o.Envelope.Thread, EventID: o.Event.ID, Group: o.Event.GroupID,
		Seq: o.Event.Seq, Duplicate: o.Duplicate, Differs: o.Differs, Status: o.Verification.Status}, nil
}

// Cursor reads agent's delivery cursor.
func (l *Local) Cursor(ctx context.Context, agent, group string) (int64, error) {
	c, err := l.Relay.DeliveryCursor(ctx, group, agent)
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("c2a: cursor of %s in %s: %w", agent, group, err)
	}
	return c.Seq, nil
}

// Cursors returns agent's delivery cursors by group
// (gateway.Relay.DeliveryCursors): one store read in all when the ledger
// can, else one per group, in this process.
func (l *Local) Cursors(ctx context.Context, agent string) (map[string]int64, error) {
	gs, err := l.Relay.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("c2a: listing groups: %w", err)
	}
	cs, err := l.Relay.DeliveryCursors(ctx, agent, gs)
	if err != nil {
		return nil, fmt.Errorf("c2a: %w", err)
	}
	return cs, nil
}

// Resume calls Relay.AgentResume.
func (l *Local) Resume(ctx context.Context, agent string) (map[string]int64, int64, error) {
	cs, pos, err := l.Relay.AgentResume(ctx, agent)
	if err != nil {
		return nil, 0, fmt.Errorf("c2a: resume point of %s: %w", agent, err)
	}
	return cs, pos, nil
}

// cursorPerGroup is Backend.Cursors from b's Groups and a Cursor call for
// each.
func cursorPerGroup(ctx context.Context, b Backend, agent string) (map[string]int64, error) {
	gs, err := b.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("c2a: listing groups: %w", err)
	}
	out := make(map[string]int64, len(gs))
	for _, g := range gs {
		seq, err := b.Cursor(ctx, agent, g.ID)
		if err != nil {
			return nil, err
		}
		if seq > 0 {
			out[g.ID] = seq
		}
	}
	return out, nil
}

// Touch records activity.
func (l *Local) Touch(_ context.Context, agent string) error {
	l.Relay.Touch(l.Relay.Book().ActorID(agent))
	return nil
}

// Agents lists agents with liveness.
func (l *Local) Agents(ctx context.Context) ([]gateway.AgentStatus, error) {
	return l.Relay.Agents(ctx)
}

// Notify appends a system.notify.
func (l *Local) Notify(ctx context.Context, agent, group, eventID, kind, message string) error {
	return l.Relay.NotifyAgent(ctx, agent, group, eventID, kind, message)
}

// Outbound is a message an agent sends (C2A chat.send_message).
type Outbound struct {
	From string // the sending agent
	To   string // receiver address: an agent, "@role", or ALL
	// Directedness is what the sender means the receivers to get: to_me
	// (one named receiver must act), to_my_role (a role or pool: one
	// claims), ambient (no obligation; BROADCAST). It must agree with To
	// and Intent (C2A "Outbound Posture").
	Directedness attention.Directedness
	Intent       string
	Body         string
	Context      string
	Thread       string
	Parent       string // parent message id
	Priority     string // "", "normal", "high", "urgent"
	// IdempotencyKey makes the message id stable: the same key (for the
	// same sender) always gives the same id, so a retry records once.
	IdempotencyKey string
	// Obligation, when set, is written as `meta: obligation`
	// (docs/format.md); the relay checks its values.
	Obligation *OutboundObligation
	// Meta are further META blocks, written after the others: a
	// handoff, a blocker, a forward's provenance (docs/format.md §4).
	Meta []envelope.Meta
}

// OutboundObligation is the `meta: obligation` of an Outbound: each
// field as written in the envelope, empty ones left out.
type OutboundObligation struct {
	Blocks        string `json:"blocks,omitempty" jsonschema:"what your work is until it is discharged: halted, degraded or none (default)"`
	DefaultAction string `json:"defaultAction,omitempty" jsonschema:"what you will do if nobody answers in time"`
	Delegate      string `json:"delegate,omitempty" jsonschema:"an agent that may discharge it besides you"`
	Deadline      string `json:"deadline,omitempty" jsonschema:"an RFC 3339 time or a duration from receipt such as 30m"`
}

// MaxBody bounds an outbound body: what fits in one envelope.
const MaxBody = envelope.MaxEnvelopeSize - 16<<10

// MessageID returns the message id an idempotency key stands for: a ULID
// made from the SHA-256 of sender and key.
func MessageID(from, key string) string {
	sum := sha256.Sum256([]byte("crosstalk-c2a-send\x00" + strings.ToLower(from) + "\x00" + key))
	return envelope.IDFromHash(sum[:])
}

// CheckDirectedness reports whether to and intent give receivers the
// directedness d; the error says what to change.
func CheckDirectedness(book *gateway.AddressBook, to, intent string, d attention.Directedness) error {
	broadcast := envelope.IsBroadcast(to) || strings.EqualFold(intent, envelope.IntentBroadcast)
	role := !broadcast && strings.HasPrefix(to, "@")
	if !role && book != nil && !broadcast {
		if _, isAgent := book.Agent(to); !isAgent {
			for _, a := range book.Agents() {
				for _, r := range a.Roles {
					if attention.SameActor(r, to) {
						role = true
					}
				}
			}
		}
	}
	var got attention.Directedness
	switch {
	case broadcast:
		got = attention.Ambient
	case role:
		got = attention.ToMyRole
	default:
		got = attention.ToMe
	}
	if got == d {
		return nil
	}
	switch got {
	case attention.Ambient:
		return fmt.Errorf("to %q with intent %s is ambient (a broadcast), not %s: name one agent to create an obligation, or a @role to offer the work", to, intent, d)
	case attention.ToMyRole:
		return fmt.Errorf("to %q is a role, so receivers get to_my_role, not %s: address one agent for to_me, or ALL with BROADCAST for ambient", to, d)
	}
	return fmt.Errorf("to %q names one receiver, who gets to_me, not %s: use a @role for to_my_role, or to ALL with intent BROADCAST for ambient", to, d)
}

// Compose builds the canonical envelope text of o. The message id comes
// from o.IdempotencyKey.
func Compose(o Outbound) ([]byte, *envelope.Envelope, error) {
	if strings.TrimSpace(o.To) == "" || strings.TrimSpace(o.From) == "" {
		return nil, nil, errors.New("c2a: a message needs a sender and a receiver")
	}
	if len(o.Body) > MaxBody {
		return nil, nil, fmt.Errorf("c2a: %s: body of %d bytes exceeds %d", envelope.CodeTooLarge, len(o.Body), MaxBody)
	}
	intent, _, _ := envelope.NormalizeIntent(strings.TrimSpace(o.Intent))
	env := envelope.New(o.From, strings.TrimSpace(o.To), intent, envelope.CleanBody(o.Body))
	env.Context, env.Parent = o.Context, o.Parent
	if o.Thread != "" {
		env.Thread = o.Thread
	}
	if o.IdempotencyKey != "" {
		env.Message = MessageID(o.From, o.IdempotencyKey)
		if o.Thread == "" {
			env.Thread = env.Message
		}
	}
	if p := strings.ToLower(o.Priority); p == "high" || p == "urgent" {
		env.Meta = append(env.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: p}}})
	}
	if ob := o.Obligation; ob != nil {
		var fs []envelope.Field
		for _, f := range []envelope.Field{{Key: "Blocks", Value: ob.Blocks}, {Key: "Default-Action", Value: ob.DefaultAction},
			{Key: "Delegate", Value: ob.Delegate}, {Key: "Deadline", Value: ob.Deadline}} {
			if f.Value = strings.TrimSpace(f.Value); f.Value != "" {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			fs = []envelope.Field{{Key: "Blocks", Value: "none"}}
		}
		env.Meta = append(env.Meta, envelope.Meta{Namespace: "obligation", Fields: fs})
	}
	env.Meta = append(env.Meta, o.Meta...)
	text, err := envelope.Marshal(env)
	if err != nil {
		return nil, nil, fmt.Errorf("c2a: composing: %w", err)
	}
	if len(text) > envelope.MaxEnvelopeSize {
		return nil, nil, fmt.Errorf("c2a: %s: envelope of %d bytes exceeds %d", envelope.CodeTooLarge, len(text), envelope.MaxEnvelopeSize)
	}
	return text, env, nil
}

// FindDelivery returns agent's delivery of event id (in group, or any
// group when ""), or ok=false when the event was never delivered to the
// agent: it does not exist, is the agent's own, or is bookkeeping. It
// asks for one delivery per event (gateway.PerEvent): an event merged
// into a buffered delivery, or summarised in a digest, is found alone.
//
// A Backend that is also a DeliveryFinder (Local, Remote) answers from
// the one event; any other is asked for every delivery and searched.
func FindDelivery(ctx context.Context, b Backend, agent, group, id string) (gateway.Delivery, bool, error) {
	if f, ok := b.(DeliveryFinder); ok {
		return f.Delivery(ctx, agent, group, id)
	}
	return searchDeliveries(ctx, b, agent, group, id)
}

// searchDeliveries finds event id among every delivery of agent.
func searchDeliveries(ctx context.Context, b Backend, agent, group, id string) (gateway.Delivery, bool, error) {
	ds, err := b.Deliveries(gateway.PerEvent(ctx), agent, group, 0, 0)
	if err != nil {
		return gateway.Delivery{}, false, err
	}
	for _, d := range ds {
		if d.EventID == id {
			return d, true, nil
		}
	}
	return gateway.Delivery{}, false, nil
}

// EventText returns the message text of the ledger event at seq in group.
func EventText(ctx context.Context, b Backend, group string, seq int64) (string, ledger.Event, error) {
	evs, err := b.Events(ctx, group, seq-1, nil, 1)
	if err != nil {
		return "", ledger.Event{}, err
	}
	if len(evs) == 0 || evs[0].Seq != seq {
		return "", ledger.Event{}, fmt.Errorf("c2a: no event %d in group %q", seq, group)
	}
	d, err := gateway.ParseData(evs[0])
	if err != nil {
		return "", evs[0], fmt.Errorf("c2a: event %s: %w", evs[0].ID, err)
	}
	text := d.Text
	if text == "" {
		text = d.Message
	}
	return text, evs[0], nil
}
