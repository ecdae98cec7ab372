package attention

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknown is wrapped by every Parse function when the input is not one of
// the values the spec defines.
var ErrUnknown = errors.New("attention: unknown value")

// Directedness says whether an event is aimed at an agent (C2A "Directedness";
// docs/design.md §5.4).
type Directedness string

// Directedness values, spelled as in C2A.
const (
	// ToMe: the event names this agent as a receiver (a DM, a direct
	// mention, a POLL target).
	ToMe Directedness = "to_me"
	// ToMyRole: the event names a selector or role the agent holds, or sits
	// in a thread the agent claimed or participates in.
	ToMyRole Directedness = "to_my_role"
	// ToOther: the event is addressed to another agent or the user.
	ToOther Directedness = "to_other"
	// Ambient: the event is addressed to no one in particular (BROADCAST,
	// empty receiver list, @all).
	Ambient Directedness = "ambient"
)

// Policy is the response rule attached to an event for one agent (C2A
// "Response Policy").
type Policy string

// Policy values, spelled as in C2A.
const (
	// MustRespond: answer, or explicitly defer through a tool or reaction.
	MustRespond Policy = "must_respond"
	// MayRespond: answer only when owning the work or materially helping.
	MayRespond Policy = "may_respond"
	// AckOnly: react or send a short receipt; no substantive reply.
	AckOnly Policy = "ack_only"
	// MustNotRespond: do not send chat in response to this event.
	MustNotRespond Policy = "must_not_respond"
)

// Injection is how an event becomes model-visible context (C2A "Injection
// Modes").
type Injection string

// Injection values, spelled as in C2A.
const (
	// Immediate: inject now, even mid-task.
	Immediate Injection = "immediate"
	// Buffered: inject as one model turn once the author's fragments are
	// merged (see Merge).
	Buffered Injection = "buffered"
	// Notify: inject a Knock only; the content is pulled with a tool.
	Notify Injection = "notify"
	// ToolMailbox: store, readable with tools, never injected.
	ToolMailbox Injection = "tool_mailbox"
	// Digest: summarised periodically (see DigestOf).
	Digest Injection = "digest"
	// Silent: persisted for audit only; the model never needs it.
	Silent Injection = "silent"
)

// Reason says why a Policy was chosen. The values are this package's
// vocabulary; C2A shows only "direct_message" and "edited_after_response"
// as examples and leaves the rest to the host.
type Reason string

// Reason values.
const (
	ReasonDirectMessage     Reason = "direct_message"     // to_me, the only receiver
	ReasonDirectMention     Reason = "direct_mention"     // to_me, one of several receivers
	ReasonPollTarget        Reason = "poll_target"        // POLL naming this agent
	ReasonAssignment        Reason = "assignment"         // HANDOFF to this agent
	ReasonEscalation        Reason = "escalation"         // ESCALATE to this agent
	ReasonReply             Reason = "reply"              // RESPOND to this agent
	ReasonErrorReport       Reason = "error_report"       // ERROR to this agent
	ReasonAttentionAck      Reason = "attention_ack"      // attention event to_me with nothing to answer
	ReasonAcknowledgement   Reason = "acknowledgement"    // ACK or NACK
	ReasonBroadcast         Reason = "broadcast"          // BROADCAST
	ReasonClosed            Reason = "closed"             // CLOSE
	ReasonRevocation        Reason = "revocation"         // REVOKE
	ReasonClaimRequired     Reason = "claim_required"     // role event, nobody holds a claim yet
	ReasonClaimed           Reason = "claimed"            // this agent holds the claim
	ReasonClaimedByOther    Reason = "claimed_by_other"   // another agent holds the claim
	ReasonThreadParticipant Reason = "thread_participant" // reply in a thread this agent takes part in
	ReasonAddressedToOther  Reason = "addressed_to_other" // to_other
	ReasonAmbient           Reason = "ambient"            // no receiver
	ReasonOwnEvent          Reason = "own_event"          // this agent wrote the event
	ReasonBookkeeping       Reason = "bookkeeping"        // read cursors, claims, dispositions, notify acks
	ReasonUnknownIntent     Reason = "unknown_intent"     // intent this package does not know
	ReasonObligation        Reason = "obligation"         // an open obligation addressed to this agent
)

// Liveness is an agent's presence state derived from its last activity
// (Beadboard Operative Protocol §4.3; docs/design.md §5.4).
type Liveness string

// Liveness values, spelled as in the Beadboard protocol.
const (
	Active  Liveness = "active"
	Stale   Liveness = "stale"
	Evicted Liveness = "evicted"
)

// Disposition is how a delivered event ended for an agent (C2A "Event
// Disposition").
type Disposition string

// Disposition values, spelled as in C2A.
const (
	// Responded: satisfied with a response, completion signal or resolving action.
	Responded Disposition = "responded"
	// Acknowledged: reacted, marked seen, or sent a lightweight receipt.
	Acknowledged Disposition = "acknowledged"
	// Deferred: responsibility accepted; needs more time or input.
	Deferred Disposition = "deferred"
	// Claimed: owned but not completed.
	Claimed Disposition = "claimed"
	// Ignored: no response required under the policy.
	Ignored Disposition = "ignored"
	// Superseded: an edit, delete or newer merged turn replaced the event.
	Superseded Disposition = "superseded"
	// Failed: the harness could not process the event.
	Failed Disposition = "failed"
)

// Signal is a typed reaction: a zero-turn disposition (C2A "Reaction
// Signals"). C2A carries the signal, not the emoji.
type Signal string

// Signal values, spelled as in C2A.
const (
	SignalSeen     Signal = "seen"     // read, no commitment
	SignalAgree    Signal = "agree"    // acknowledge or approve
	SignalWorking  Signal = "working"  // actively on it now
	SignalQueued   Signal = "queued"   // accepted, behind higher-priority work
	SignalClaimed  Signal = "claimed"  // this agent owns the event
	SignalDone     Signal = "done"     // resolved
	SignalDeclined Signal = "declined" // not this agent, or will not act
	SignalBlocked  Signal = "blocked"  // cannot proceed, needs input
	SignalUnclear  Signal = "unclear"  // needs clarification
)

var (
	allDirectedness = []Directedness{ToMe, ToMyRole, ToOther, Ambient}
	allPolicies     = []Policy{MustRespond, MayRespond, AckOnly, MustNotRespond}
	allInjections   = []Injection{Immediate, Buffered, Notify, ToolMailbox, Digest, Silent}
	allLiveness     = []Liveness{Active, Stale, Evicted}
	allDispositions = []Disposition{Responded, Acknowledged, Deferred, Claimed, Ignored, Superseded, Failed}
	allSignals      = []Signal{SignalSeen, SignalAgree, SignalWorking, SignalQueued, SignalClaimed,
		SignalDone, SignalDeclined, SignalBlocked, SignalUnclear}
)

// parseEnum matches s (trimmed, case-insensitive) against all.
func parseEnum[T ~string](what, s string, all []T) (T, error) {
	t := strings.TrimSpace(s)
	for _, v := range all {
		if strings.EqualFold(t, string(v)) {
			return v, nil
		}
	}
	return "", fmt.Errorf("attention: unknown %s %q: %w", what, s, ErrUnknown)
}

func valid[T ~string](v T, all []T) bool {
	for _, a := range all {
		if v == a {
			return true
		}
	}
	return false
}

// ParseDirectedness parses a directedness as spelled in C2A ("to_me", ...).
// Case and surrounding space are ignored; other input wraps ErrUnknown.
func ParseDirectedness(s string) (Directedness, error) {
	return parseEnum("directedness", s, allDirectedness)
}

// ParsePolicy parses a response policy ("must_respond", ...).
func ParsePolicy(s string) (Policy, error) { return parseEnum("policy", s, allPolicies) }

// ParseInjection parses an injection mode ("tool_mailbox", ...).
func ParseInjection(s string) (Injection, error) { return parseEnum("injection", s, allInjections) }

// ParseLiveness parses a liveness state ("active", "stale", "evicted").
func ParseLiveness(s string) (Liveness, error) { return parseEnum("liveness", s, allLiveness) }

// ParseDisposition parses a disposition ("deferred", ...).
func ParseDisposition(s string) (Disposition, error) {
	return parseEnum("disposition", s, allDispositions)
}

// ParseSignal parses a reaction signal by name ("agree", ...). Use
// SignalForGlyph for emoji.
func ParseSignal(s string) (Signal, error) { return parseEnum("signal", s, allSignals) }

// String returns the spec spelling.
func (d Directedness) String() string { return string(d) }

// String returns the spec spelling.
func (p Policy) String() string { return string(p) }

// String returns the spec spelling.
func (i Injection) String() string { return string(i) }

// String returns the reason's spelling.
func (r Reason) String() string { return string(r) }

// String returns the spec spelling.
func (l Liveness) String() string { return string(l) }

// String returns the spec spelling.
func (d Disposition) String() string { return string(d) }

// String returns the spec spelling.
func (s Signal) String() string { return string(s) }

// Valid reports whether d is one of the four C2A values.
func (d Directedness) Valid() bool { return valid(d, allDirectedness) }

// Valid reports whether p is one of the four C2A policies.
func (p Policy) Valid() bool { return valid(p, allPolicies) }

// Valid reports whether i is one of the six C2A injection modes.
func (i Injection) Valid() bool { return valid(i, allInjections) }

// Valid reports whether l is active, stale or evicted.
func (l Liveness) Valid() bool { return valid(l, allLiveness) }

// Valid reports whether d is one of the seven C2A dispositions.
func (d Disposition) Valid() bool { return valid(d, allDispositions) }

// Valid reports whether s is one of the nine C2A signals.
func (s Signal) Valid() bool { return valid(s, allSignals) }
