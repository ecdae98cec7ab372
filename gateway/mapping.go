package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Event kinds the relay writes (CCCS §6, §7; x.crosstalk.* for C2A state):
// package ledger's, under the names this package has always used.
const (
	KindMessage     = ledger.KindMessage
	KindAck         = ledger.KindAck
	KindRead        = ledger.KindRead
	KindReaction    = ledger.KindReaction
	KindNotify      = ledger.KindNotify
	KindNotifyAck   = ledger.KindNotifyAck
	KindClaim       = ledger.KindClaim
	KindDisposition = ledger.KindDisposition
	KindDischarge   = ledger.KindDischarge
)

// XCrosstalk is data.x_crosstalk of every event made from an envelope
// (docs/design.md §5.2): the envelope's JSON form, its raw text, how it came and
// how it was checked.
type XCrosstalk struct {
	Envelope       *envelope.Envelope `json:"envelope"`
	Raw            string             `json:"raw"`
	Transport      string             `json:"transport"`
	Source         string             `json:"source,omitempty"`
	Sender         string             `json:"sender"`
	Principal      string             `json:"principal,omitempty"`
	Verified       bool               `json:"verified"`
	Verification   string             `json:"verification"`
	Pkid           string             `json:"pkid,omitempty"`
	AssignedIDs    bool               `json:"assigned_ids,omitempty"`
	IdempotencyKey string             `json:"idempotency_key,omitempty"`
	Warnings       []string           `json:"warnings,omitempty"`
	// Route is where the envelope came from before this relay: the hops
	// of its `meta: routing` X-Route, oldest first. A relay passing an
	// unsigned envelope on appends itself (relay://NAME), so the last hop
	// of one relayed from another relay names that relay; a signed one is
	// passed on verbatim and keeps the route it was signed with.
	Route []string `json:"route,omitempty"`
}

// EventData is the union of the data members the relay writes and reads.
// Unknown members are ignored, as CCCS §4.1 asks.
type EventData struct {
	// chat.message
	Text     string   `json:"text,omitempty"`
	Format   string   `json:"format,omitempty"`
	Priority string   `json:"priority,omitempty"`
	To       []string `json:"to,omitempty"`
	ReplyTo  string   `json:"reply_to,omitempty"`
	ClientID string   `json:"client_id,omitempty"`
	// Obligation is the message's `meta: obligation`, its Delegate an
	// actor id.
	Obligation *attention.Obligation `json:"obligation,omitempty"`
	// Protocol is the message's BeadBoard HANDOFF or BLOCKED
	// (`meta: handoff`, `meta: blocked`).
	Protocol *Protocol `json:"protocol,omitempty"`
	// Provenance of a forwarded message (CCCS §9.1), inline:
	// src_group_id, src_event_id, summarized.
	Provenance
	// chat.ack, chat.read, chat.reaction, claims, dispositions
	ActorID string `json:"actor_id,omitempty"`
	EventID string `json:"event_id,omitempty"`
	Emoji   string `json:"emoji,omitempty"`
	Signal  string `json:"signal,omitempty"`
	// system.notify
	Kind           string `json:"kind,omitempty"`
	Title          string `json:"title,omitempty"`
	Message        string `json:"message,omitempty"`
	TargetActorID  string `json:"target_actor_id,omitempty"`
	RelatedEventID string `json:"related_event_id,omitempty"`
	RequiresAck    bool   `json:"requires_ack,omitempty"`
	// system.notify_ack
	NotifyEventID string `json:"notify_event_id,omitempty"`
	// x.crosstalk.*
	Disposition string `json:"disposition,omitempty"`
	State       string `json:"state,omitempty"` // x.crosstalk.delivery: delivered or failed
	ExpiresAt   string `json:"expires_at,omitempty"`
	Note        string `json:"note,omitempty"`
	// x.crosstalk.digest
	Digest *Digest `json:"digest,omitempty"`

	X *XCrosstalk `json:"x_crosstalk,omitempty"`
}

// ParseData decodes an event's data.
func ParseData(ev ledger.Event) (EventData, error) {
	var d EventData
	if len(ev.Data) == 0 {
		return d, nil
	}
	err := json.Unmarshal(ev.Data, &d)
	return d, err
}

// mustJSON marshals event data: compact JSON (ledger.Record.Compact),
// json.Marshal's bytes; EventData by eventJSON.
func mustJSON(v any) json.RawMessage {
	switch d := v.(type) {
	case EventData:
		return eventJSON(&d)
	case *EventData:
		if d != nil {
			return eventJSON(d)
		}
	}
	return mustJSONMarshal(v)
}

// mustJSONMarshal is mustJSON by json.Marshal.
func mustJSONMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("gateway: marshalling event data: " + err.Error()) // only plain structs are marshalled
	}
	return b
}

// sourceText returns env.Source() as a string without copying it (the
// data of every event holds it): Source is never modified, by its
// contract, and the event's data keeps env, and so its source, as long as
// the string.
func sourceText(env *envelope.Envelope) string {
	src := env.Source()
	return unsafe.String(unsafe.SliceData(src), len(src))
}

// DedupeKey returns the de-duplication key of an envelope (docs/design.md §5.3):
// "msg:" + its message id, or "sha256:" + the hex SHA-256 of its
// signed-bytes payload when it has none.
func DedupeKey(env *envelope.Envelope) string {
	if env.Message != "" {
		return "msg:" + env.Message
	}
	sum := sha256.Sum256(signing.PayloadOf(env.Source()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// record turns one outcome into the record to append: the envelope's event,
// or a system.notify for a rejection; and the data it marshalled into it.
func (r *Relay) record(ctx context.Context, in Intake, o *Outcome) (ledger.Record, *EventData) {
	if o.Reject != nil {
		return r.rejectionRecord(in, o)
	}
	env := o.Envelope
	if env.Message == "" || env.Thread == "" {
		// The ids assigned below are the event's, not the parsed
		// envelope's: a shallow copy, as only those strings change.
		c := *env
		env = &c
	}
	dedupe := DedupeKey(env)
	x := &XCrosstalk{
		Raw:            sourceText(o.Envelope),
		Transport:      in.Transport,
		Source:         in.Source,
		Sender:         o.Actor,
		Principal:      in.Principal,
		Verification:   o.Verification.Status,
		Verified:       o.Verification.Status == StatusVerified || o.Verification.Status == StatusFirstUse,
		Pkid:           o.Verification.Pkid,
		IdempotencyKey: in.IdempotencyKey,
		Warnings:       env.Warnings(),
		Route:          routeOf(env),
	}
	if env.Message == "" {
		// v1.0: assign the deterministic id the dedupe key is made of
		// (docs/design.md §3.1, §5.3), and start a thread named after it.
		sum := sha256.Sum256(signing.PayloadOf(o.Envelope.Source()))
		env.Message = envelope.IDFromHash(sum[:])
		x.AssignedIDs = true
	}
	if env.Thread == "" {
		env.Thread = env.Message
		x.AssignedIDs = true
	}
	x.Envelope = env
	// by is who speaks, as checkEnvelope decided (docs/security.md): the
	// same actor an ACK, NACK or REVOKE acts for.
	rec := ledger.Record{GroupID: r.Group(env.Context), By: o.Actor, DedupeKey: dedupe}
	d := EventData{X: x}
	parentEvent := r.lookupParent(ctx, env.Parent)

	switch env.Intent {
	case envelope.IntentAck, envelope.IntentNack:
		// The directed answer to the asker (C2A "Thanks or
		// acknowledgement"): addressed to the author of parent.
		pe, known := parentEvent.(ledger.Event)
		d.ActorID, d.EventID = x.Sender, eventID(parentEvent)
		if known && pe.By != "" {
			d.To = []string{pe.By}
		}
		var pd EventData // the parent's data, read once: only an ACK of a message uses it
		if env.Intent == envelope.IntentAck && known && pe.Kind == KindMessage {
			pd, _ = ParseData(pe)
		}
		if ob := pd.Obligation; ob != nil && ob.CanDischarge(pe.By, x.Sender) {
			// The author's (or delegate's) ACK of its own obligation
			// discharges it; anyone else's is evidence (below).
			rec.Kind, rec.DedupeKey = KindDischarge, dischargeDedupeKey(rec.GroupID, pe.ID)
			break
		}
		if pd.Priority == "attention" && r.addressedTo(pd.To, x.Sender) {
			rec.Kind = KindAck // self-only ack (CCCS §6.2)
			// One chat.ack per (group, actor, event) whatever the path
			// (CCCS §6.2): the API's ack uses the same key.
			rec.DedupeKey = ackDedupeKey(rec.GroupID, x.Sender, pe.ID)
			break
		}
		sig, _ := attention.SignalForIntent(attention.Intent(env.Intent))
		rec.Kind, d.Signal, d.Emoji = KindReaction, string(sig), sig.Glyph()
	case envelope.IntentError:
		rec.Kind, d.Kind, d.RelatedEventID = KindNotify, "error", eventID(parentEvent)
		code, _ := env.MetaValue("error", "Code")
		reason, _ := env.MetaValue("error", "Reason")
		d.Title = strings.TrimSpace(code + " from " + env.From)
		d.Message = reason
		if d.Message == "" {
			d.Message = env.Body
		}
		d.TargetActorID = r.book.ActorID(env.To)
	case envelope.IntentRevoke:
		rec.Kind, d.Kind, d.Title = KindNotify, "key_revoked", "key revoked by "+o.Actor
		d.Message, _ = env.MetaValue("revoke", "Pkid")
	default:
		// REQUEST RESPOND POLL CLOSE HANDOFF ESCALATE BROADCAST and
		// unknown intents: a chat message.
		rec.Kind, d.Text, d.Format, d.Priority = KindMessage, env.Body, "plain", "normal"
		d.To = r.book.Recipients(env.To)
		if envelope.IsBroadcast(env.To) {
			// ALL with an intent that asks something is a group
			// mention: to_my_role for every member (C2A "Role or group
			// mention"). BROADCAST stays ambient (below).
			d.To = []string{"@all"}
		}
		if env.Intent == envelope.IntentPoll {
			d.To = appendUnique(d.To, r.pollTargets(env)...)
		}
		if p, _ := env.MetaValue("routing", "X-Priority"); strings.EqualFold(p, "high") || strings.EqualFold(p, "urgent") {
			d.Priority = "attention"
		}
		switch env.Intent {
		case envelope.IntentHandoff:
			d.Priority = "attention"
		case envelope.IntentEscalate:
			d.Priority = "attention"
			d.To = appendUnique(d.To, "@user")
		case envelope.IntentBroadcast:
			d.To = nil
		}
		d.ReplyTo = eventID(parentEvent)
		d.ClientID = dedupe
		if ob, ok, _ := r.obligation(env); ok {
			d.Obligation = &ob
		}
		if p, _ := protocolOf(env); p != nil {
			// A HANDOFF or BLOCKED needs its addressee's chat.ack (BeadBoard
			// §6.2 requires_ack) and is owed until then.
			d.Protocol, d.Priority = p, "attention"
			d.Obligation = protocolObligation(p, d.Obligation)
		}
		d.Provenance, _ = provenanceOf(env)
	}
	rec.Data, rec.Compact = eventJSON(&d), true
	return rec, &d
}

// rejectionRecord is the system.notify recording o's rejection, and its
// data.
func (r *Relay) rejectionRecord(in Intake, o *Outcome) (ledger.Record, *EventData) {
	group := DefaultGroup
	var x *XCrosstalk
	if env := o.Envelope; env != nil {
		if g := r.Group(env.Context); !SystemGroup(g) { // never in bookkeeping
			group = g
		}
		x = &XCrosstalk{
			Envelope: env, Raw: sourceText(env), Transport: in.Transport, Source: in.Source,
			Sender: r.book.ActorID(env.From), Principal: in.Principal,
			Verification: o.Verification.Status, Pkid: o.Verification.Pkid, Warnings: env.Warnings(),
		}
	}
	d := EventData{
		Kind: "error", Priority: "high",
		Title:   "rejected envelope (" + string(o.Reject.Code) + ")",
		Message: o.Reject.Error(),
		X:       x,
	}
	if x == nil {
		d.X = &XCrosstalk{Transport: in.Transport, Source: in.Source, Principal: in.Principal}
	}
	return ledger.Record{Kind: KindNotify, GroupID: group, By: "system", Data: eventJSON(&d), Compact: true}, &d
}

// pollTargets reads `meta: poll` `Targets: a, b` (the POLL recipients
// beyond the header's receiver).
func (r *Relay) pollTargets(env *envelope.Envelope) []string {
	v, ok := env.MetaValue("poll", "Targets")
	if !ok {
		return nil
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, r.book.Recipients(t)...)
		}
	}
	return out
}

// lookupParent returns the ledger event of a parent message id, or nil.
func (r *Relay) lookupParent(ctx context.Context, parent string) any {
	if parent == "" {
		return nil
	}
	ev, err := r.store.GetByDedupeKey(ctx, "msg:"+parent)
	if err != nil {
		if !errors.Is(err, ledger.ErrNotFound) {
			r.log.Warn("looking up parent", "parent", parent, "err", err)
		}
		return nil
	}
	return ev
}

// obligation parses env's `meta: obligation`, the delegate mapped to an
// actor id; ok is false when it has none. checkEnvelope refuses the
// envelope when err is set.
func (r *Relay) obligation(env *envelope.Envelope) (ob attention.Obligation, ok bool, err error) {
	if !slices.ContainsFunc(env.Meta, func(m envelope.Meta) bool { return m.Namespace == metaObligation }) {
		return ob, false, nil
	}
	field := func(k string) string { v, _ := env.MetaValue(metaObligation, k); return v }
	ob, err = attention.ParseObligation(field("Blocks"), field("Default-Action"), field("Delegate"), field("Deadline"), r.now())
	if err != nil {
		return ob, false, err
	}
	if ob.Delegate != "" {
		ob.Delegate = r.book.ActorID(ob.Delegate)
	}
	return ob, true, nil
}

// checkObligation refuses a bad `meta: obligation`, or one on an intent
// that asks nothing, and a bad `meta: routing` X-Deadline.
func (r *Relay) checkObligation(env *envelope.Envelope) error {
	_, ok, err := r.obligation(env)
	if err != nil {
		return fmt.Errorf("meta: obligation: %w", err)
	}
	if v, set := env.MetaValue("routing", "X-Deadline"); set {
		if _, err := attention.ParseDeadline(v, r.now()); err != nil {
			return fmt.Errorf("meta: routing X-Deadline %q: %w", v, err)
		}
	}
	if ok {
		switch env.Intent {
		case envelope.IntentAck, envelope.IntentNack, envelope.IntentBroadcast, envelope.IntentRevoke, envelope.IntentError:
			return fmt.Errorf("meta: obligation on a %s: only a message that asks something can oblige its receivers", env.Intent)
		}
	}
	return nil
}

// metaObligation is the META namespace of an obligation (docs/format.md).
const metaObligation = "obligation"

// dischargeDedupeKey makes one discharge per obligation, whoever and
// whatever path discharges it.
func dischargeDedupeKey(group, eventID string) string { return "discharge:" + group + ":" + eventID }

// ackDedupeKey is the de-duplication key of a chat.ack: one per group,
// actor and event (CCCS §6.2), whether the API or an ACK envelope asks.
func ackDedupeKey(group, actor, eventID string) string {
	return "ack:" + group + ":" + actor + ":" + eventID
}

func eventID(parent any) string {
	if ev, ok := parent.(ledger.Event); ok {
		return ev.ID
	}
	return ""
}

// addressedTo reports whether recipient tokens reach actor: a broadcast,
// the actor's id, @user for the user, or a role the actor holds; ids and
// roles compare as attention.SameActor (ASCII case only).
func (r *Relay) addressedTo(to []string, actor string) bool {
	if len(to) == 0 {
		return true
	}
	ag, _ := r.book.Agent(actor)
	for _, t := range to {
		switch {
		case attention.SameActor(t, actor), t == "@all":
			return true
		case (t == "@user" || t == "user") && actor == "user":
			return true
		case strings.HasPrefix(t, "@"):
			for _, role := range ag.Roles {
				if attention.SameActor(t[1:], role) || t == "@peers" && role == "peer" {
					return true
				}
			}
		}
	}
	return false
}

func appendUnique(s []string, more ...string) []string {
	for _, m := range more {
		found := false
		for _, x := range s {
			if x == m {
				found = true
				break
			}
		}
		if !found {
			s = append(s, m)
		}
	}
	return s
}
