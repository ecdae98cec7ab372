package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// BeadBoard §6.2 protocol event types the relay records on a chat.message
// (data.protocol).
const (
	ProtocolHandoff = "HANDOFF"
	ProtocolBlocked = "BLOCKED"
)

// Urgency values of a BLOCKED (BeadBoard §6.2).
const (
	UrgencyLow    = "low"
	UrgencyMedium = "medium"
	UrgencyHigh   = "high"
)

// ValidUrgency reports whether u is low, medium or high, in any case.
func ValidUrgency(u string) bool {
	switch strings.ToLower(strings.TrimSpace(u)) {
	case UrgencyLow, UrgencyMedium, UrgencyHigh:
		return true
	}
	return false
}

// META namespaces of a handoff, a blocker and a forward's provenance
// (docs/format.md §4).
const (
	metaHandoff    = "handoff"
	metaBlocked    = "blocked"
	metaProvenance = "provenance"
)

// KindUnblocked is data.kind of the system.notify the relay appends for a
// BLOCKED's author when its addressee resolves it.
const KindUnblocked = "unblocked"

// maxProtocolText bounds each one-line field of a handoff or a blocker.
const maxProtocolText = 1000

// ErrProtocol is wrapped by the errors of a bad `meta: handoff`,
// `meta: blocked` or `meta: provenance`.
var ErrProtocol = errors.New("gateway: bad protocol block")

// Protocol is data.protocol of a chat.message that is a BeadBoard HANDOFF
// or BLOCKED (BeadBoard §6.2): from_agent is the event's by, to_agent its
// to. Both require the addressee's acknowledgement (requires_ack is always
// true); docs/agents.md "Handoff and blocked" says who closes them.
type Protocol struct {
	EventType string `json:"event_type"` // ProtocolHandoff or ProtocolBlocked
	Subject   string `json:"subject"`
	// HANDOFF
	Summary    string `json:"summary,omitempty"`
	NextAction string `json:"next_action,omitempty"`
	// BLOCKED
	Blocker         string `json:"blocker,omitempty"`
	RequestedAction string `json:"requested_action,omitempty"`
	Urgency         string `json:"urgency,omitempty"`
	RequiresAck     bool   `json:"requires_ack"`
}

// Label is the UI label of the event type (BeadBoard §6.3): "Passed to"
// for a HANDOFF, "Needs input" for a BLOCKED.
func (p Protocol) Label() string {
	if p.EventType == ProtocolBlocked {
		return "Needs input"
	}
	return "Passed to"
}

// Handoff is the API's and MCP's form of a HANDOFF (BeadBoard §6.2).
type Handoff struct {
	Subject    string `json:"subject"`
	Summary    string `json:"summary"`
	NextAction string `json:"next_action"`
}

// Blocked is the API's and MCP's form of a BLOCKED (BeadBoard §6.2).
type Blocked struct {
	Subject         string `json:"subject"`
	Blocker         string `json:"blocker"`
	RequestedAction string `json:"requested_action"`
	Urgency         string `json:"urgency"`
}

// Meta returns h as its `meta: handoff` block.
func (h Handoff) Meta() envelope.Meta {
	return metaBlock(metaHandoff, "Subject", h.Subject, "Summary", h.Summary, "Next-Action", h.NextAction)
}

// Meta returns b as its `meta: blocked` block.
func (b Blocked) Meta() envelope.Meta {
	return metaBlock(metaBlocked, "Subject", b.Subject, "Blocker", b.Blocker, "Requested-Action", b.RequestedAction, "Urgency", b.Urgency)
}

func metaBlock(ns string, kv ...string) envelope.Meta {
	m := envelope.Meta{Namespace: ns}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Fields = append(m.Fields, envelope.Field{Key: kv[i], Value: strings.TrimSpace(kv[i+1])})
	}
	return m
}

func hasMeta(env *envelope.Envelope, ns string) bool {
	return slices.ContainsFunc(env.Meta, func(m envelope.Meta) bool { return m.Namespace == ns })
}

// protocolOf reads env's `meta: handoff` or `meta: blocked`; nil when it
// has neither. Errors wrap ErrProtocol and name the field.
func protocolOf(env *envelope.Envelope) (*Protocol, error) {
	h, b := hasMeta(env, metaHandoff), hasMeta(env, metaBlocked)
	switch {
	case !h && !b:
		return nil, nil
	case h && b:
		return nil, fmt.Errorf("%w: an envelope is a handoff or a blocker, not both", ErrProtocol)
	}
	ns := metaHandoff
	if b {
		ns = metaBlocked
	}
	field := func(key string, required bool) (string, error) {
		v, _ := env.MetaValue(ns, key)
		v = strings.TrimSpace(v)
		switch {
		case required && v == "":
			return "", fmt.Errorf("%w: meta: %s needs %s (BeadBoard §6.2)", ErrProtocol, ns, key)
		case len(v) > maxProtocolText || !attention.OneLine(v):
			return "", fmt.Errorf("%w: meta: %s %s must be one line of at most %d bytes", ErrProtocol, ns, key, maxProtocolText)
		}
		return v, nil
	}
	p := &Protocol{RequiresAck: true}
	var keys []string
	var to []*string
	if h {
		p.EventType = ProtocolHandoff
		keys, to = []string{"Subject", "Summary", "Next-Action"}, []*string{&p.Subject, &p.Summary, &p.NextAction}
		if env.Intent != envelope.IntentHandoff {
			return nil, fmt.Errorf("%w: meta: handoff belongs on a HANDOFF, not a %s", ErrProtocol, env.Intent)
		}
	} else {
		p.EventType = ProtocolBlocked
		keys, to = []string{"Subject", "Blocker", "Requested-Action", "Urgency"}, []*string{&p.Subject, &p.Blocker, &p.RequestedAction, &p.Urgency}
		if env.Intent != envelope.IntentRequest && env.Intent != envelope.IntentEscalate {
			return nil, fmt.Errorf("%w: meta: blocked belongs on a REQUEST or an ESCALATE, not a %s", ErrProtocol, env.Intent)
		}
	}
	for i, k := range keys {
		v, err := field(k, true)
		if err != nil {
			return nil, err
		}
		*to[i] = v
	}
	if b {
		p.Urgency = strings.ToLower(p.Urgency)
		if !ValidUrgency(p.Urgency) {
			return nil, fmt.Errorf("%w: meta: blocked Urgency %q is not low, medium or high", ErrProtocol, p.Urgency)
		}
	}
	if envelope.IsBroadcast(env.To) || strings.HasPrefix(strings.TrimSpace(env.To), "@") {
		// One agent owes the acknowledgement: not everyone, not a role.
		return nil, fmt.Errorf("%w: a %s names one agent, not %s", ErrProtocol, p.EventType, env.To)
	}
	return p, nil
}

// checkProtocol refuses a bad `meta: handoff`, `meta: blocked` or
// `meta: provenance` (checkEnvelope turns the error into E-FORMAT).
func checkProtocol(env *envelope.Envelope) error {
	if _, err := protocolOf(env); err != nil {
		return err
	}
	_, err := provenanceOf(env)
	return err
}

// protocolObligation is the obligation a HANDOFF or BLOCKED carries: the
// addressee owes an acknowledgement (attention.Obligation.Ack), and the
// author of a BLOCKED is halted. An explicit `meta: obligation` on the
// same envelope keeps its deadline, default action and delegate.
func protocolObligation(p *Protocol, explicit *attention.Obligation) *attention.Obligation {
	ob := attention.Obligation{Blocks: attention.BlocksNone}
	if explicit != nil {
		ob = *explicit
	}
	if p.EventType == ProtocolBlocked && ob.Blocks == attention.BlocksNone {
		ob.Blocks = attention.BlocksHalted
	}
	ob.Ack = true
	return &ob
}

// unblock appends, once, the system.notify that tells a BLOCKED's author
// its addressee actor resolved it (docs/agents.md "Handoff and blocked").
// Nothing happens for any other event, or when actor is the author or not
// an addressee.
func (r *Relay) unblock(ctx context.Context, target ledger.Event, td EventData, actor, note string) error {
	p := td.Protocol
	if target.Kind != KindMessage || p == nil || p.EventType != ProtocolBlocked ||
		attention.SameActor(actor, target.By) || !r.addressedTo(td.To, actor) {
		return nil
	}
	msg := fmt.Sprintf("%s resolved your blocker %q", actor, p.Subject)
	if note != "" {
		msg += ": " + note
	}
	d := EventData{Kind: KindUnblocked, Title: "unblocked: " + p.Subject, Message: oneLineNote(msg),
		TargetActorID: target.By, RelatedEventID: target.ID, Priority: "normal", RequiresAck: true, ActorID: actor}
	rec := ledger.Record{Kind: KindNotify, GroupID: target.GroupID, By: "system", Data: mustJSON(d),
		DedupeKey: unblockedDedupeKey(target.GroupID, target.ID)}
	if _, err := r.store.Append(ctx, []ledger.Record{rec}); err != nil {
		return fmt.Errorf("gateway: recording the unblock of %s: %w", target.ID, err)
	}
	return nil
}

// unblockedDedupeKey is the dedupe key of a BLOCKED's unblocked notice:
// one per blocker.
func unblockedDedupeKey(group, eventID string) string { return "unblocked:" + group + ":" + eventID }

// closeBlockers tells the author of each BLOCKED that a recorded CLOSE
// from its addressee answered (the envelope form of the resolve action).
func (r *Relay) closeBlockers(ctx context.Context, outs []Outcome) error {
	for _, o := range outs {
		if o.Reject != nil || o.Envelope == nil || o.Envelope.Intent != envelope.IntentClose || o.Event.Kind != KindMessage {
			continue
		}
		d, err := ParseData(o.Event)
		if err != nil || d.ReplyTo == "" {
			continue
		}
		target, err := r.store.Get(ctx, d.ReplyTo)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("gateway: reading the parent of %s: %w", o.Event.ID, err)
		}
		td, err := ParseData(target)
		if err != nil {
			continue
		}
		if err := r.unblock(ctx, target, td, o.Event.By, firstLine(d.Text)); err != nil {
			return err
		}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// OpenProtocol returns every HANDOFF and BLOCKED still open, over every
// group, oldest first in each group (the web inbox's "Passed to" / "Needs
// input" list): a HANDOFF until its addressee acknowledges it, a BLOCKED
// until its addressee resolves it (Waiting.Acked says who accepted it
// meanwhile), either until its author withdraws it. The relay keeps each
// group's walk between calls and reads only the events appended since,
// so a page costs what is new, not the whole ledger.
func (r *Relay) OpenProtocol(ctx context.Context) ([]Waiting, error) {
	gs, err := r.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: listing groups: %w", err)
	}
	r.protoMu.Lock()
	defer r.protoMu.Unlock()
	if r.protoWalks == nil {
		r.protoWalks = map[string]*obligationWalk{}
	}
	now := r.now()
	var out []Waiting
	for _, g := range gs {
		w, ok := r.protoWalks[g.ID]
		if !ok {
			w = &obligationWalk{keep: func(_ ledger.Event, _ *attention.Obligation, p *Protocol) bool { return p != nil }}
			r.protoWalks[g.ID] = w
		}
		if w.read < g.LastSeq {
			if err := r.advanceWalk(ctx, g.ID, w); err != nil {
				return nil, err
			}
		}
		out = w.appendOpen(out, now)
	}
	return out, nil
}
