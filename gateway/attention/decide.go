package attention

import (
	"strings"
	"time"
	"unicode"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// maxTopicRunes bounds the context part of a knock topic.
const maxTopicRunes = 64

// Event is the view of one ledger event that the attention rules read. The
// relay fills it from the CCCS event and, for envelopes, from
// data.x_crosstalk (docs/design.md §5.2). It is independent of the ledger and
// envelope packages on purpose. The body is deliberately absent: nothing
// here may depend on untrusted text (C2A "notify").
type Event struct {
	ID    string `json:"id"`              // ledger event id (ULID)
	Seq   int64  `json:"seq"`             // dense per-group sequence
	Group string `json:"group,omitempty"` // group_id
	Kind  string `json:"kind"`            // "chat.message", "chat.ack", ...
	From  string `json:"from"`            // author actor id (event.by)
	// To holds the recipient tokens: actor ids, selectors (@all @peers
	// @foreman @user, or any "@role"), or bare role names. Empty means a
	// broadcast (CCCS §5.2).
	To        []string  `json:"to,omitempty"`
	Intent    Intent    `json:"intent,omitempty"`     // envelope intent, may be unknown or empty
	Thread    string    `json:"thread,omitempty"`     // envelope thread
	Parent    string    `json:"parent,omitempty"`     // replied-to message/event
	Priority  string    `json:"priority,omitempty"`   // CCCS: "normal" or "attention"
	XPriority string    `json:"x_priority,omitempty"` // envelope X-Priority: "high", "urgent", "low" or ""
	Context   string    `json:"context,omitempty"`    // envelope context (topic)
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Deadline is when a must_respond or ack_only event goes stale (the
	// envelope's `meta: routing` X-Deadline); zero for never: without
	// one, what is asked is owed until it is answered or acknowledged.
	// An obligation's deadline is Obligation.Deadline.
	Deadline time.Time `json:"deadline,omitzero"`
	// RequiresAck marks events whose receivers owe an acknowledgement even
	// when the priority is not "attention": a system.notify with
	// requires_ack (CCCS §7.1), a Beadboard HANDOFF or BLOCKED (§6.2).
	RequiresAck bool `json:"requires_ack,omitempty"`
	// Obligation, when set, makes the event must_respond for every
	// addressee until it is Discharged (see Obligation).
	Obligation *Obligation `json:"obligation,omitempty"`
	// Discharged says the author or the delegate discharged Obligation.
	Discharged bool `json:"discharged,omitempty"`
}

// Agent is one agent (or the human user) the relay computes attention for.
type Agent struct {
	ID string `json:"id"` // actor id, as in Event.From and Event.To
	// Roles the agent holds. A recipient token "@x" or "x" reaches the agent
	// when x is one of its roles; the CCCS selectors map to roles:
	// @peers→"peer", @foreman→"foreman", @user→"user".
	Roles []string `json:"roles,omitempty"`
}

// State is what the relay knows beyond the event itself.
type State struct {
	// Claims in force or recently in force, for every agent (see
	// DecideClaim). Expired claims and claims of evicted holders are
	// ignored, so the slice need not be pruned first.
	Claims []Claim `json:"claims,omitempty"`
	// Threads this agent participates in (has written to, or was addressed
	// in).
	Threads []string `json:"threads,omitempty"`
	// LastSeen is each agent's last API/MCP activity, by agent id.
	LastSeen map[string]time.Time `json:"last_seen,omitempty"`
	// StaleAfter is the liveness stale threshold (eviction at twice
	// it); StaleAfter, the package constant, when zero.
	StaleAfter time.Duration `json:"stale_after,omitempty"`
}

// Knock is what a notify injection shows the model instead of the content
// (C2A "notify"): who, where, directedness, policy, priority, a topic made
// by the relay from context + intent, and the tool that pulls the content.
// It never holds body text.
type Knock struct {
	From         string       `json:"from"`         // author actor id
	Where        string       `json:"where"`        // "thread:<id>" or "group:<id>"
	Directedness Directedness `json:"directedness"` // as in the Delivery
	Policy       Policy       `json:"policy"`       // as in the Delivery
	Priority     string       `json:"priority"`     // "urgent", "high", "low", "attention" or "normal"
	Topic        string       `json:"topic"`        // see Topic
	PullWith     string       `json:"pull_with"`    // "chat.read_thread" or "chat.list_events"
}

// Delivery is the attention decision for one event and one agent: the three
// C2A axes plus what the relay needs to deliver it.
type Delivery struct {
	EventID      string       `json:"event_id"`         // Event.ID
	Seq          int64        `json:"seq"`              // Event.Seq: resume point for the agent
	Group        string       `json:"group,omitempty"`  // Event.Group
	Thread       string       `json:"thread,omitempty"` // Event.Thread
	Agent        string       `json:"agent"`            // Agent.ID
	Directedness Directedness `json:"directedness"`
	Policy       Policy       `json:"policy"`
	Reason       Reason       `json:"reason"` // why Policy was chosen
	Injection    Injection    `json:"injection"`
	// Priority is X-Priority when set, else the CCCS priority, else "normal".
	Priority string `json:"priority"`
	// Knock is set exactly when Injection is notify.
	Knock *Knock `json:"knock,omitempty"`
	// ThreadContext asks the harness to inject the surrounding thread
	// window with the event (C2A matrix: "buffered + thread context").
	ThreadContext bool `json:"thread_context,omitempty"`
	// Deadline is when a must_respond or ack_only event goes stale; zero
	// when the event carries none (it never does).
	Deadline time.Time `json:"deadline,omitzero"`
	// Expired is set when now is at or past Deadline; a must_respond event
	// is then downgraded to may_respond (C2A "Stale Events") and Reason
	// keeps the original reason.
	Expired bool `json:"expired,omitempty"`
	// IdempotencyKey is "<eventID>:<agentID>" (C2A "reliability").
	IdempotencyKey string `json:"idempotency_key"`
}

// via records how directedness was established; policy depends on it.
type via int

const (
	viaNone        via = iota
	viaSole            // the only named receiver
	viaNamed           // one of several named receivers
	viaRole            // a selector or role the agent holds
	viaClaim           // a thread or event the agent holds a claim on
	viaParticipant     // a thread the agent participates in
)

var selectorRoles = map[string]string{
	"peers":   "peer",
	"foreman": "foreman",
	"user":    "user",
}

// normToken canonicalises a recipient token: trimmed, and the CCCS
// compatibility spellings "user" → "@user", "ALL"/"*" → "@all" (CCCS §5.1;
// docs/design.md §5.2).
func normToken(t string) string {
	t = strings.TrimSpace(t)
	switch {
	case SameActor(t, "user"):
		return selectorUser
	case SameActor(t, "all"), t == "*", SameActor(t, selectorAll):
		return selectorAll
	}
	return t
}

func isMe(tok string, a Agent) bool {
	if a.ID == "" {
		return false
	}
	if SameActor(tok, a.ID) {
		return true
	}
	// The human user is addressed as @user (CCCS §5.1).
	return tok == selectorUser && normToken(a.ID) == selectorUser
}

func holdsRole(tok string, a Agent) bool {
	name := strings.TrimPrefix(tok, "@")
	if name == "" || SameActor(name, "all") {
		return false
	}
	alt := selectorRoles[toLowerASCII(name)]
	for _, r := range a.Roles {
		r = strings.TrimPrefix(strings.TrimSpace(r), "@")
		if r != "" && (SameActor(r, name) || SameActor(r, alt)) {
			return true
		}
	}
	return false
}

func directedness(ev Event, a Agent, st State, now time.Time) (Directedness, via) {
	if intentOf(ev) == IntentBroadcast {
		return Ambient, viaNone
	}
	var named, all int
	me, role := false, false
	for _, raw := range ev.To {
		tok := normToken(raw)
		switch {
		case tok == "":
			continue
		case isMe(tok, a):
			me = true
		case tok == selectorAll:
			// @all is a group mention: every member holds it (C2A
			// "Role or group mention").
			all++
			role = true
			continue
		case holdsRole(tok, a):
			role = true
		}
		named++
	}
	switch {
	case me && named == 1 && all == 0:
		return ToMe, viaSole
	case me:
		return ToMe, viaNamed
	case role:
		return ToMyRole, viaRole
	}
	if c, ok := ClaimHolder(st, ev.ID, ev.Thread, now); ok && c.Holder == a.ID {
		return ToMyRole, viaClaim
	}
	if ev.Thread != "" {
		for _, t := range st.Threads {
			if t == ev.Thread {
				return ToMyRole, viaParticipant
			}
		}
	}
	if named == 0 {
		return Ambient, viaNone
	}
	return ToOther, viaNone
}

// DirectednessOf says whether ev is aimed at agent a (docs/design.md §5.4; C2A
// "Directedness"). Precedence, first match wins:
//
//  1. intent BROADCAST → ambient;
//  2. a recipient token is a's id (SameActor: ASCII letters in any case) → to_me;
//  3. a token is a selector or role a holds, or @all / ALL / * (a group
//     mention every member holds) → to_my_role;
//  4. a holds a claim in force on the event or its thread, or participates
//     in the thread → to_my_role;
//  5. no recipients → ambient;
//  6. otherwise → to_other.
func DirectednessOf(ev Event, a Agent, st State, now time.Time) Directedness {
	d, _ := directedness(ev, a, st, now)
	return d
}

func ackOwed(ev Event) bool {
	return ev.Priority == priorityAttention || ev.RequiresAck
}

func policy(ev Event, a Agent, st State, now time.Time, d Directedness, v via) (Policy, Reason) {
	in := intentOf(ev)
	switch {
	case a.ID != "" && SameActor(ev.From, a.ID):
		return MustNotRespond, ReasonOwnEvent
	case bookkeeping(ev.Kind):
		return MustNotRespond, ReasonBookkeeping
	case ev.Obligation != nil && !ev.Discharged && (d == ToMe || v == viaRole):
		// An open obligation is owed by every addressee; of a role, by
		// its claimant once someone claims it.
		if c, ok := ClaimHolder(st, ev.ID, ev.Thread, now); ok && d == ToMyRole && c.Holder != a.ID {
			return MustNotRespond, ReasonClaimedByOther
		}
		return MustRespond, ReasonObligation
	case ev.Kind == ledger.KindNotify && ev.RequiresAck && d == ToMe:
		// A notice that asks for system.notify_ack and nothing more
		// (CCCS §7.1, §7.2).
		return AckOnly, ReasonAttentionAck
	}
	// Intents that never call for a reply (docs/design.md §5.4), whatever the
	// directedness; an attention event to_me still owes its chat.ack.
	var quiet Reason
	switch in {
	case IntentACK, IntentNACK:
		quiet = ReasonAcknowledgement
	case IntentBroadcast:
		quiet = ReasonBroadcast
	case IntentClose:
		quiet = ReasonClosed
	case IntentRevoke:
		quiet = ReasonRevocation
	}
	if quiet != "" {
		switch {
		case d == ToMe && (in == IntentACK || in == IntentNACK):
			// A directed answer to the asker: C2A's "Thanks or
			// acknowledgement" row.
			return AckOnly, ReasonAcknowledgement
		case d == ToMe && ackOwed(ev):
			return AckOnly, ReasonAttentionAck
		}
		return MustNotRespond, quiet
	}
	switch d {
	case ToMe:
		switch in {
		case IntentRequest:
			if v == viaSole {
				return MustRespond, ReasonDirectMessage
			}
			return MustRespond, ReasonDirectMention
		case IntentEscalate:
			return MustRespond, ReasonEscalation
		case IntentHandoff:
			return MustRespond, ReasonAssignment
		case IntentPoll:
			return MustRespond, ReasonPollTarget
		case IntentRespond:
			return MayRespond, ReasonReply
		case IntentError:
			return MayRespond, ReasonErrorReport
		}
		return MayRespond, ReasonUnknownIntent
	case ToMyRole:
		if c, ok := ClaimHolder(st, ev.ID, ev.Thread, now); ok {
			if c.Holder == a.ID {
				return MayRespond, ReasonClaimed
			}
			return MustNotRespond, ReasonClaimedByOther
		}
		if v == viaParticipant {
			return MayRespond, ReasonThreadParticipant
		}
		// C2A "may_respond after claim": every holder of the role may
		// answer, after claiming; the reason says the claim comes first.
		return MayRespond, ReasonClaimRequired
	case ToOther:
		return MustNotRespond, ReasonAddressedToOther
	}
	return MustNotRespond, ReasonAmbient
}

// PolicyOf returns the response policy of ev for agent a and why (docs/design.md
// §5.4; C2A "Response Policy", "Default Matrix"). The rules, in order:
//
//   - a's own events, and bookkeeping kinds (chat.read, system.notify_ack,
//     x.crosstalk.claim, x.crosstalk.disposition): must_not_respond;
//   - an open (not Discharged) Obligation, to_me or to a role or @all a
//     holds: must_respond (obligation), injected immediately, never stale;
//     claimed_by_other once another agent claimed a role's obligation;
//   - a system.notify with RequiresAck to_me: ack_only (attention_ack),
//     closed by its system.notify_ack;
//   - ACK, NACK to_me (a directed answer to the asker): ack_only with
//     reason acknowledgement (C2A "Thanks or acknowledgement");
//   - ACK, NACK otherwise, BROADCAST, CLOSE, REVOKE: must_not_respond —
//     except that a to_me CLOSE or REVOKE with priority "attention" or
//     RequiresAck is ack_only, since its chat.ack is still owed (CCCS §6.2);
//   - to_me: REQUEST, ESCALATE, HANDOFF, POLL → must_respond; RESPOND,
//     ERROR, unknown → may_respond;
//   - to_my_role: may_respond for the holder of a claim in force,
//     must_not_respond (claimed_by_other) for everyone else;
//     unclaimed: may_respond, with reason thread_participant in a thread a
//     participates in, otherwise claim_required (C2A "may_respond after
//     claim": every holder of the role may answer once it claims);
//   - to_other, ambient: must_not_respond.
//
// A must_respond event whose deadline has passed at now is downgraded to
// may_respond (C2A "Stale Events"); Decide reports that as Expired.
func PolicyOf(ev Event, a Agent, st State, now time.Time) (Policy, Reason) {
	d := Decide(ev, a, st, now)
	return d.Policy, d.Reason
}

func high(ev Event) bool {
	switch strings.ToLower(strings.TrimSpace(ev.XPriority)) {
	case xPriorityHigh, xPriorityUrgent:
		return true
	}
	return false
}

func injection(ev Event, d Directedness, p Policy, r Reason) Injection {
	in := intentOf(ev)
	switch r {
	case ReasonOwnEvent, ReasonBookkeeping:
		return Silent
	case ReasonObligation:
		return Immediate // never buffered, digested or silenced
	}
	switch d {
	case ToMe:
		switch {
		case in == IntentRevoke:
			return Immediate
		case p == MustNotRespond || p == AckOnly:
			return Notify
		case in == IntentEscalate || high(ev):
			return Immediate
		}
		return Buffered
	case ToMyRole:
		switch r {
		case ReasonClaimed:
			if in == IntentEscalate || high(ev) {
				return Immediate
			}
			return Buffered
		case ReasonClaimedByOther:
			return ToolMailbox
		}
		return Notify
	case Ambient:
		if in == IntentBroadcast {
			return Digest
		}
	}
	return ToolMailbox
}

// InjectionOf returns how ev is shown to agent a (docs/design.md §5.4; C2A
// "Injection Modes"):
//
//   - to_me: buffered; immediate for X-Priority high/urgent, ESCALATE and
//     REVOKE; notify when there is nothing to answer (ACK, NACK, CLOSE and
//     ack_only events: C2A's "Thanks or acknowledgement" row);
//   - to_my_role: notify (a Knock); buffered (or immediate, as for to_me)
//     once a holds the claim; tool_mailbox once another agent does;
//   - to_other: tool_mailbox; ambient: digest for BROADCAST, otherwise
//     tool_mailbox;
//   - a's own events and bookkeeping kinds: silent.
func InjectionOf(ev Event, a Agent, st State, now time.Time) Injection {
	return Decide(ev, a, st, now).Injection
}

// priorityOf is the priority shown in knocks and deliveries: the envelope's
// X-Priority when set, else the CCCS priority, else "normal".
func priorityOf(ev Event) string {
	if p := strings.ToLower(strings.TrimSpace(ev.XPriority)); p != "" {
		return p
	}
	if p := strings.ToLower(strings.TrimSpace(ev.Priority)); p != "" {
		return p
	}
	return defaultPriorityStr
}

// Topic returns the knock topic the relay makes for ev: the lower-cased
// intent, then " about " and the context. The context is the sender's, so
// it is cleaned: control and format characters dropped, white space
// collapsed, cut to 64 runes. Body text is never used.
func Topic(ev Event) string {
	in := strings.ToLower(string(intentOf(ev)))
	if in == "" || !Intent(strings.ToUpper(in)).Known() {
		in = "message"
	}
	ctx := cleanContext(ev.Context)
	if ctx == "" {
		return in
	}
	return in + " about " + ctx
}

func cleanContext(s string) string {
	var b strings.Builder
	n, space := 0, false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == unicode.ReplacementChar:
			continue
		}
		if n == maxTopicRunes {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
			if n == maxTopicRunes {
				b.WriteString("…")
				break
			}
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func knock(ev Event, d Directedness, p Policy) *Knock {
	k := &Knock{
		From:         ev.From,
		Where:        "group:" + ev.Group,
		Directedness: d,
		Policy:       p,
		Priority:     priorityOf(ev),
		Topic:        Topic(ev),
		PullWith:     "chat.list_events",
	}
	if ev.Thread != "" {
		k.Where = "thread:" + ev.Thread
		k.PullWith = "chat.read_thread"
	}
	return k
}

// Decide computes the whole delivery of ev to agent a at now: directedness,
// policy and reason, injection, the knock for notify, the deadline, and the
// idempotency key "<eventID>:<agentID>". It is a pure function: same inputs,
// same Delivery.
func Decide(ev Event, a Agent, st State, now time.Time) Delivery {
	d, v := directedness(ev, a, st, now)
	p, r := policy(ev, a, st, now, d, v)
	del := Delivery{
		EventID:        ev.ID,
		Seq:            ev.Seq,
		Group:          ev.Group,
		Thread:         ev.Thread,
		Agent:          a.ID,
		Directedness:   d,
		Policy:         p,
		Reason:         r,
		Priority:       priorityOf(ev),
		IdempotencyKey: ev.ID + ":" + a.ID,
	}
	if p == MustRespond || p == AckOnly {
		// No default window: a question stays owed until it is answered
		// or acknowledged unless its sender gave it a deadline (issue
		// #14; C2A "Stale Events" applies to events that carry one).
		del.Deadline = ev.Deadline
		if r == ReasonObligation {
			del.Deadline = ev.Obligation.Deadline
		}
		if !del.Deadline.IsZero() && !now.Before(del.Deadline) {
			del.Expired = true
			if p == MustRespond && r != ReasonObligation { // a lapsed obligation is still owed
				p = MayRespond
				del.Policy = p
			}
		}
	}
	del.Injection = injection(ev, d, p, r)
	switch del.Injection {
	case Notify:
		del.Knock = knock(ev, d, p)
	case Immediate, Buffered:
		del.ThreadContext = ev.Thread != "" || ev.Parent != ""
	}
	return del
}
