package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// ActionError is a refused action (ack, read, react, claim, defer,
// resolve): Code says which HTTP status and error envelope the API gives.
type ActionError struct {
	Code   string // "not_found", "permission_denied", "invalid_request", "conflict" (CCCS §11)
	Reason string
	// Claim is the claim in force when Code is "conflict" on a claim.
	Claim *ledger.Claim
}

// Error returns the reason, prefixed with the package name.
func (e *ActionError) Error() string { return "gateway: " + e.Reason }

// CCCS §11 error codes used by ActionError.
const (
	CodeNotFound     = "not_found"
	CodePermission   = "permission_denied"
	CodeInvalid      = "invalid_request"
	CodeConflict     = "conflict"
	CodeNotAttention = "not_an_attention_message"
	// CodeInternal and CodeUnavailable are the API's answers when the
	// relay itself failed: a bug or an unreadable ledger (500), or a
	// ledger that could not be written for now, worth a retry (503).
	CodeInternal    = "internal"
	CodeUnavailable = "daemon_unavailable"
)

func actionErr(code, format string, args ...any) error {
	return &ActionError{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Action is one of the agent actions on an event (docs/design.md §5.6).
type Action string

// The actions of POST /v1/groups/{group}/events/{id}/{action}.
const (
	ActionAck     Action = "ack"
	ActionRead    Action = "read"
	ActionReact   Action = "react"
	ActionClaim   Action = "claim"
	ActionDefer   Action = "defer"
	ActionResolve Action = "resolve"
	// ActionDelivered moves the actor's delivery cursor: the position an
	// agent channel resumes from, advanced only by the channel's delivery
	// acks and never moved backwards. It records no ledger event and is
	// independent of the read cursor (issue #14: reading a newer event
	// must not skip older unacknowledged ones on resume).
	ActionDelivered Action = "delivered"
	// ActionDischarge discharges an obligation (`meta: obligation`): only
	// its author or delegate may, once (issue #14). An ACK envelope from
	// them whose parent is the obligation's message does the same.
	ActionDischarge Action = "discharge"
)

// deliveredActor is the cursor key of actor's delivery cursor in the
// ledger's cursor table, beside its read cursor (keyed by the actor id).
// The prefix holds a space, which no actor id does.
func deliveredActor(actor string) string { return "delivered to " + actor }

// DeliveryCursor returns actor's delivery cursor in group: the last event
// its agent channel confirmed, in a contiguous run from the start (see
// ActionDelivered). A group the actor never confirmed anything in gives
// ledger.ErrNotFound.
func (r *Relay) DeliveryCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	c, err := r.store.GetCursor(ctx, group, deliveredActor(r.book.ActorID(actor)))
	c.Actor = r.book.ActorID(actor)
	return c, err
}

// DeliveryCursors returns actor's delivery cursors in groups (as
// Relay.Groups lists them) by group id: the seq of each, leaving out the
// groups where it has none. It reads them with one store call when the
// ledger can (ledger.CursorLister), else one DeliveryCursor per group.
func (r *Relay) DeliveryCursors(ctx context.Context, actor string, groups []ledger.Group) (map[string]int64, error) {
	actor = r.book.ActorID(actor)
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.ID
	}
	cs, err := ledger.CursorsIn(ctx, r.store, deliveredActor(actor), ids)
	if err != nil {
		return nil, fmt.Errorf("gateway: delivery cursors of %s: %w", actor, err)
	}
	out := make(map[string]int64, len(cs))
	for g, c := range cs {
		out[g] = c.Seq
	}
	return out, nil
}

// shownTo reports whether actor was shown ev (with data d): a message or
// notice addressed to it (by id, role, @all or broadcast) or its own; the
// human user is shown every one. Other kinds (reactions, acks, claims,
// dispositions) address nobody and are shown to every member of the group
// as notes. chat.read of a message or notice aimed only at others is
// refused (CCCS §6.3: "reject watermarks for events that are not
// addressed to actor_id").
func (r *Relay) shownTo(ev ledger.Event, d EventData, actor string) bool {
	switch {
	case ev.Kind != KindMessage && ev.Kind != KindNotify:
		return true
	case actor == "user", attention.SameActor(ev.By, actor):
		return true
	case ev.Kind == KindNotify:
		return d.TargetActorID == "" || attention.SameActor(d.TargetActorID, actor)
	}
	return r.addressedTo(d.To, actor)
}

// ShownTo reports whether actor was shown ev: a message or notice
// addressed to it (by id, role, @all or broadcast) or its own, every
// other kind, and everything for the human user (the events a read
// watermark may name, CCCS §6.3). An event whose data does not decode is
// not shown.
func (r *Relay) ShownTo(ev ledger.Event, actor string) bool {
	actor = r.book.ActorID(actor)
	if actor == "user" || ev.Kind != KindMessage && ev.Kind != KindNotify || ev.By == actor {
		return true // without decoding the data
	}
	// Only what shownTo reads: decoding the whole data (an envelope's
	// raw text and parsed fields) cost the web inbox's unread counts
	// 4–5 µs per message of others' that they skip.
	var d struct {
		To            []string `json:"to"`
		TargetActorID string   `json:"target_actor_id"`
	}
	if len(ev.Data) > 0 && json.Unmarshal(ev.Data, &d) != nil {
		return false
	}
	return r.shownTo(ev, EventData{To: d.To, TargetActorID: d.TargetActorID}, actor)
}

// LastShown returns the latest event of group at or before seq last that
// actor was shown (the events a read watermark may name, CCCS §6.3), or
// ok false when none of the latest maxLastShown is. A "mark all read"
// names it: the group's last event may be a message aimed only at others.
func (r *Relay) LastShown(ctx context.Context, group, actor string, last int64) (ev ledger.Event, ok bool, err error) {
	actor = r.book.ActorID(actor)
	for end := last; end > 0 && last-end < maxLastShown; {
		since := max(0, end-lastShownPage)
		evs, err := r.store.Range(ctx, group, since, nil, int(end-since))
		if err != nil {
			return ledger.Event{}, false, fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Seq <= end && r.ShownTo(evs[i], actor) {
				return evs[i], true, nil
			}
		}
		end = since
	}
	return ledger.Event{}, false, nil
}

// How far LastShown looks back, and in pages of how many events.
const (
	maxLastShown  = 4096
	lastShownPage = 256
)

// ActionRequest is an action by Actor (the calling principal) on the event
// EventID of Group.
type ActionRequest struct {
	Action  Action
	Group   string
	EventID string
	Actor   string
	Signal  string // react: a C2A signal (agree, declined, claimed, done, …)
	Note    string // defer, resolve: free text
	// TakeoverStale (claim) takes over a claim whose holder is stale, not
	// only evicted (BeadBoard §4.4; an active holder's claim never).
	TakeoverStale bool
}

// ActionResult is what an action recorded.
type ActionResult struct {
	Event     ledger.Event   `json:"event,omitzero"` // none for delivered, which records no event
	Duplicate bool           `json:"duplicate,omitempty"`
	Claim     *ledger.Claim  `json:"claim,omitempty"`
	Cursor    *ledger.Cursor `json:"cursor,omitempty"`
}

// Act performs an action, enforcing the CCCS rules: acks are self-only and
// only for attention messages addressed to the actor (§6.2), read cursors
// are independent of acks (§6.3), the first claim wins (docs/design.md §5.4).
func (r *Relay) Act(ctx context.Context, req ActionRequest) (ActionResult, error) {
	if req.Actor == "" {
		return ActionResult{}, actionErr(CodePermission, "no principal")
	}
	req.Actor = r.book.ActorID(req.Actor)
	r.Touch(req.Actor)
	target, err := r.store.Get(ctx, req.EventID)
	if errors.Is(err, ledger.ErrNotFound) || err == nil && target.GroupID != req.Group {
		return ActionResult{}, actionErr(CodeNotFound, "no event %q in group %q", req.EventID, req.Group)
	}
	if err != nil {
		return ActionResult{}, fmt.Errorf("gateway: %s: %w", req.Action, err)
	}
	td, err := ParseData(target)
	if err != nil {
		return ActionResult{}, fmt.Errorf("gateway: event %s: bad data: %w", target.ID, err)
	}
	rec := ledger.Record{GroupID: req.Group, By: req.Actor}
	d := EventData{ActorID: req.Actor, EventID: target.ID}
	var res ActionResult
	switch req.Action {
	case ActionAck:
		switch {
		case target.Kind == KindNotify && td.RequiresAck:
			if td.TargetActorID != "" && !attention.SameActor(td.TargetActorID, req.Actor) {
				return res, actionErr(CodePermission, "notice %s is for %s; a principal acks only for itself (CCCS §7.2)", target.ID, td.TargetActorID)
			}
			rec.Kind, d = KindNotifyAck, EventData{ActorID: req.Actor, NotifyEventID: target.ID}
		case target.Kind != KindMessage || td.Priority != "attention":
			return res, actionErr(CodeNotAttention, "event %s is not an attention message; only those are acknowledged (CCCS §6.2)", target.ID)
		case !r.addressedTo(td.To, req.Actor):
			return res, actionErr(CodePermission, "event %s is not addressed to %s; a principal acks only for itself (CCCS §6.2)", target.ID, req.Actor)
		default:
			// Addressed to the asker, like an ACK envelope (C2A "Thanks or
			// acknowledgement").
			rec.Kind, d.To = KindAck, []string{target.By}
		}
		rec.DedupeKey = ackDedupeKey(req.Group, req.Actor, target.ID)
	case ActionRead:
		if !r.shownTo(target, td, req.Actor) {
			return res, actionErr(CodePermission, "event %s is not addressed to %s; a read watermark names an event the reader was shown (CCCS §6.3)", target.ID, req.Actor)
		}
		rec.Kind = KindRead
	case ActionDelivered:
		c, err := r.advanceCursor(ctx, req.Group, deliveredActor(req.Actor), target)
		if err != nil {
			return res, fmt.Errorf("gateway: delivery cursor: %w", err)
		}
		c.Actor = req.Actor
		res.Cursor = &c
		// The channel's resume point follows; it is a shortcut only, so
		// failing to move it is no failure of the action.
		if err := r.extendResume(ctx, req.Actor); err != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "moving the channel resume point", slog.String("agent", req.Actor), slog.Any("err", err))
		}
		return res, nil
	case ActionReact:
		sig, err := attention.ParseSignal(req.Signal)
		if err != nil {
			return res, actionErr(CodeInvalid, "react: %v", err)
		}
		rec.Kind, d.Signal, d.Emoji, d.To = KindReaction, string(sig), sig.Glyph(), []string{target.By}
	case ActionClaim:
		ae := AttentionEvent(target, td)
		ag := r.agentOf(req.Actor)
		if !attention.Claimable(ae, ag, attention.State{}, r.now()) {
			return res, actionErr(CodePermission, "event %s is not for %s to claim (it is aimed at someone else or asks for no reply)", target.ID, req.Actor)
		}
		// Claims of evicted agents are released first (docs/design.md §5.4); the
		// ledger's claims only know their TTL.
		if _, _, err := r.releaseClaim(ctx, req.Group, target.ID, req.TakeoverStale); err != nil {
			return res, err
		}
		c, err := r.store.Claim(ctx, req.Group, target.ID, req.Actor, r.claimTTL, r.now())
		if errors.Is(err, ledger.ErrClaimed) {
			return res, &ActionError{Code: CodeConflict, Reason: fmt.Sprintf("event %s is claimed by %s until %s", target.ID, c.Actor, c.ExpiresAt.UTC().Format("15:04:05Z")), Claim: &c}
		}
		if err != nil {
			return res, fmt.Errorf("gateway: claim: %w", err)
		}
		res.Claim = &c
		rec.Kind, d.ExpiresAt = KindClaim, ledger.FormatTime(c.ExpiresAt)
	case ActionDischarge:
		switch {
		case target.Kind != KindMessage || td.Obligation == nil:
			return res, actionErr(CodeInvalid, "event %s carries no obligation to discharge", target.ID)
		case !td.Obligation.CanDischarge(target.By, req.Actor):
			return res, actionErr(CodePermission, "only %s (the author) or its delegate discharges the obligation of %s, not %s", target.By, target.ID, req.Actor)
		}
		rec.Kind, rec.DedupeKey = KindDischarge, dischargeDedupeKey(req.Group, target.ID)
	case ActionDefer, ActionResolve:
		disp, _ := attention.DispositionForAction(string(req.Action))
		rec.Kind, d.Disposition, d.Note = KindDisposition, string(disp), oneLineNote(req.Note)
	default:
		return res, actionErr(CodeInvalid, "unknown action %q", req.Action)
	}
	if rec.Data == nil {
		rec.Data = mustJSON(d)
	}
	out, err := r.store.Append(ctx, []ledger.Record{rec})
	if err != nil {
		return res, fmt.Errorf("gateway: recording %s: %w", req.Action, err)
	}
	res.Event, res.Duplicate = out[0].Event, out[0].Duplicate
	if req.Action == ActionResolve {
		// A BLOCKED's addressee resolving it tells its author (once,
		// even when this resolve is a retry whose notice was lost).
		if err := r.unblock(ctx, target, td, req.Actor, req.Note); err != nil {
			return res, err
		}
	}
	if req.Action == ActionRead {
		c, err := r.advanceCursor(ctx, req.Group, req.Actor, target)
		if err != nil {
			return res, fmt.Errorf("gateway: read cursor: %w", err)
		}
		res.Cursor = &c
	}
	return res, nil
}

// advanceCursor moves the cursor key of group to target unless it already
// stands at or past it: cursors never move backwards, whatever order
// events are marked in, also when relays sharing a ledger mark at once
// (ledger.Store.AdvanceCursor). It returns the cursor as it stands.
func (r *Relay) advanceCursor(ctx context.Context, group, key string, target ledger.Event) (ledger.Cursor, error) {
	return r.store.AdvanceCursor(ctx, group, key, target.ID)
}

func oneLineNote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1000 {
		// At a character's start: half a character is not text.
		n := 1000
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// SendRequest composes an envelope for POST /v1/send (docs/design.md §5.6).
type SendRequest struct {
	From    string          `json:"from,omitempty"` // default: the principal
	To      string          `json:"to"`
	Intent  string          `json:"intent"`
	Context string          `json:"context,omitempty"`
	Thread  string          `json:"thread,omitempty"`
	Parent  string          `json:"parent,omitempty"`
	User    string          `json:"user,omitempty"`
	Session string          `json:"session,omitempty"`
	Meta    []envelope.Meta `json:"meta,omitempty"`
	Body    string          `json:"body"`
	Message string          `json:"message,omitempty"` // idempotency: reuse the same id on retries
	// Handoff makes the envelope a HANDOFF with its `meta: handoff`
	// (BeadBoard §6.2); Intent defaults to HANDOFF.
	Handoff *Handoff `json:"handoff,omitempty"`
	// Blocked makes the envelope a BLOCKED with its `meta: blocked`
	// (BeadBoard §6.2); Intent defaults to REQUEST.
	Blocked *Blocked `json:"blocked,omitempty"`
	// SrcGroupID and SrcEventID say the message is forwarded from that
	// event (`meta: provenance`, CCCS §9.1): both or neither. Summarized
	// says Body is a summary of it.
	SrcGroupID string `json:"src_group_id,omitempty"`
	SrcEventID string `json:"src_event_id,omitempty"`
	Summarized bool   `json:"summarized,omitempty"`
}

// Signer signs composed envelopes for principals whose keys the relay
// holds; it returns the signed text, or ok=false when it has no key for
// the principal.
type Signer interface {
	Sign(ctx context.Context, principal string, text []byte) (signed []byte, ok bool, err error)
}

// Compose builds the canonical envelope text for req as principal and, if
// signer holds the principal's key, signs it.
func (r *Relay) Compose(ctx context.Context, principal string, req SendRequest, signer Signer) ([]byte, error) {
	from := req.From
	if from == "" {
		from = principal
	}
	meta := slices.Clone(req.Meta)
	switch {
	case req.Handoff != nil && req.Blocked != nil:
		return nil, actionErr(CodeInvalid, "send is a handoff or a blocker, not both")
	case req.Handoff != nil:
		req.Intent = cmp.Or(req.Intent, envelope.IntentHandoff)
		meta = append(meta, req.Handoff.Meta())
	case req.Blocked != nil:
		req.Intent = cmp.Or(req.Intent, envelope.IntentRequest)
		meta = append(meta, req.Blocked.Meta())
	}
	if err := checkProvenance(req.SrcGroupID, req.SrcEventID); err != nil {
		return nil, actionErr(CodeInvalid, "%v", err)
	}
	if req.Summarized && req.SrcGroupID == "" {
		return nil, actionErr(CodeInvalid, "\"summarized\" says a forward is a summary: it needs src_group_id and src_event_id")
	}
	if req.SrcGroupID != "" {
		meta = append(meta, ProvenanceMeta(req.SrcGroupID, req.SrcEventID, req.Summarized))
	}
	if req.To == "" || req.Intent == "" {
		return nil, actionErr(CodeInvalid, "send needs \"to\" and \"intent\"")
	}
	intent, _, _ := envelope.NormalizeIntent(strings.TrimSpace(req.Intent))
	env := envelope.New(from, strings.TrimSpace(req.To), intent, envelope.CleanBody(req.Body))
	env.Context, env.User, env.Session, env.Parent = req.Context, req.User, req.Session, req.Parent
	if req.Thread != "" {
		env.Thread = req.Thread
	}
	if req.Message != "" {
		env.Message = req.Message
	}
	env.Meta = meta
	if err := checkProtocol(env); err != nil {
		return nil, actionErr(CodeInvalid, "%v", err)
	}
	text, err := envelope.Marshal(env)
	if errors.Is(err, envelope.ErrIdentifier) {
		// The same refusal, and code, as the envelope endpoint's
		// (docs/format.md §12).
		return nil, actionErr(string(envelope.CodeAddress), "%v", err)
	} else if err != nil {
		return nil, actionErr(CodeInvalid, "%v", err)
	}
	if signer != nil {
		signed, ok, err := signer.Sign(ctx, principal, text)
		if err != nil {
			return nil, fmt.Errorf("gateway: signing for %s: %w", principal, err)
		}
		if ok {
			text = signed
		}
	}
	return text, nil
}
