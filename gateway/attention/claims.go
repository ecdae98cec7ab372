package attention

import "time"

// DefaultClaimTTL is a claim's lifetime when the request names none
// (docs/design.md §5.4).
const DefaultClaimTTL = 10 * time.Minute

// Claim says that Holder owns the reply to one event or one thread until
// ExpiresAt (C2A "Coordination And Claims"; recorded in the ledger as
// x.crosstalk.claim, docs/design.md §5.2).
//
// A claim with Event set covers that event; Thread is then the event's
// thread, kept for information. A claim with Event empty covers every event
// of Thread. An event claim takes precedence over a thread claim.
type Claim struct {
	Event     string    `json:"event,omitempty"`  // claimed event id, or "" for a thread claim
	Thread    string    `json:"thread,omitempty"` // claimed thread, or the claimed event's thread
	Holder    string    `json:"holder"`           // agent id
	ClaimedAt time.Time `json:"claimed_at"`       // first grant; kept across renewals
	// RenewedAt is the last renewal, zero if never renewed.
	RenewedAt time.Time `json:"renewed_at,omitzero"`
	// ExpiresAt ends the claim: at and after it the claim is not in force.
	ExpiresAt time.Time `json:"expires_at"`
}

// ClaimRequest asks for a claim on Event (or, with Event empty, on Thread).
type ClaimRequest struct {
	Agent string `json:"agent"` // the requesting agent's id
	// Event to claim. When Event is set, Thread should be the event's
	// thread: a claim in force on that thread by another agent blocks the
	// request.
	Event string `json:"event,omitempty"`
	// Thread to claim when Event is empty.
	Thread string `json:"thread,omitempty"`
	// TTL of the claim; zero means DefaultClaimTTL.
	TTL time.Duration `json:"ttl,omitempty"`
	// TakeoverStale allows taking over a claim whose holder is stale
	// (Beadboard §4.4: takeover only with an explicit --takeover-stale).
	TakeoverStale bool `json:"takeover_stale,omitempty"`
}

// ClaimOutcome is the result of a claim request.
type ClaimOutcome string

// ClaimOutcome values.
const (
	// ClaimGranted: nobody held a claim in force; the requester does now.
	ClaimGranted ClaimOutcome = "granted"
	// ClaimRenewed: the requester already held it; the expiry moved.
	ClaimRenewed ClaimOutcome = "renewed"
	// ClaimTakenOver: the previous holder was stale and the request asked
	// to take over.
	ClaimTakenOver ClaimOutcome = "taken_over"
	// ClaimDenied: another agent holds a claim in force.
	ClaimDenied ClaimOutcome = "denied"
	// ClaimInvalid: the request names no agent, or neither event nor thread.
	ClaimInvalid ClaimOutcome = "invalid"
)

// String returns the outcome's spelling.
func (o ClaimOutcome) String() string { return string(o) }

// ClaimDecision is what DecideClaim decided. Claim is the claim now in force
// for the subject: the requester's after granted, renewed or taken_over, the
// blocking holder's after denied, zero after invalid. Previous is the claim
// that was replaced or released (an expired claim, an evicted or stale
// holder's), zero if none; PreviousLiveness is its holder's liveness then.
type ClaimDecision struct {
	Outcome          ClaimOutcome `json:"outcome"` // see ClaimDecision
	Claim            Claim        `json:"claim"`
	Previous         Claim        `json:"previous,omitzero"`
	PreviousLiveness Liveness     `json:"previous_liveness,omitempty"`
}

// holderLiveness is the holder's liveness at now. Making or renewing a claim
// is activity (an API or MCP call), so it counts as the holder being seen
// even when State.LastSeen has no newer entry.
func holderLiveness(st State, c Claim, now time.Time) Liveness {
	seen := st.LastSeen[c.Holder]
	for _, t := range []time.Time{c.ClaimedAt, c.RenewedAt} {
		if t.After(seen) {
			seen = t
		}
	}
	return LivenessAfter(seen, now, st.StaleAfter)
}

// inForce reports whether c still counts at now: not expired, holder not
// evicted (an evicted agent's claims are released, docs/design.md §5.4).
func inForce(st State, c Claim, now time.Time) bool {
	return now.Before(c.ExpiresAt) && holderLiveness(st, c, now) != Evicted
}

func sameSubject(c Claim, event, thread string) bool {
	if event != "" {
		return c.Event == event
	}
	return c.Event == "" && c.Thread == thread
}

// ClaimHolder returns the claim in force at now that covers the event with
// id eventID in thread (either may be empty): a claim on the event, else a
// claim on the thread.
func ClaimHolder(st State, eventID, thread string, now time.Time) (Claim, bool) {
	if eventID != "" {
		for _, c := range st.Claims {
			if c.Event == eventID && inForce(st, c, now) {
				return c, true
			}
		}
	}
	if thread != "" {
		for _, c := range st.Claims {
			if c.Event == "" && c.Thread == thread && inForce(st, c, now) {
				return c, true
			}
		}
	}
	return Claim{}, false
}

// DecideClaim decides a claim request against the claims in st at now
// (C2A "Coordination And Claims"; docs/design.md §5.4; Beadboard §4.4):
//
//   - first claim wins: a claim in force by another agent denies the
//     request, unless its holder is stale and req.TakeoverStale is set;
//   - the holder may renew: the expiry becomes now+TTL;
//   - expired claims and claims of evicted holders are released: the
//     request is granted and the released claim is reported as Previous;
//   - an event claim is also denied while another agent holds the event's
//     thread (req.Thread).
//
// Races are decided by order: the relay applies decisions one at a time
// (ApplyClaim) and decides the next request against the result, so of two
// requests at the same instant the first applied wins.
func DecideClaim(st State, req ClaimRequest, now time.Time) ClaimDecision {
	if req.Agent == "" || (req.Event == "" && req.Thread == "") {
		return ClaimDecision{Outcome: ClaimInvalid}
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = DefaultClaimTTL
	}
	next := Claim{
		Event:     req.Event,
		Thread:    req.Thread,
		Holder:    req.Agent,
		ClaimedAt: now,
		ExpiresAt: now.Add(ttl),
	}
	var d ClaimDecision
	// An event claim is blocked by another agent's thread claim.
	if req.Event != "" && req.Thread != "" {
		if c, ok := ClaimHolder(st, "", req.Thread, now); ok && c.Holder != req.Agent {
			if l := holderLiveness(st, c, now); l != Stale || !req.TakeoverStale {
				return ClaimDecision{Outcome: ClaimDenied, Claim: c}
			}
		}
	}
	for _, c := range st.Claims {
		if !sameSubject(c, req.Event, req.Thread) {
			continue
		}
		l := holderLiveness(st, c, now)
		switch {
		case !now.Before(c.ExpiresAt) || l == Evicted:
			// Released: keep looking, a live claim may follow.
			if d.Previous.Holder == "" {
				d.Previous, d.PreviousLiveness = c, l
			}
		case c.Holder == req.Agent:
			next.ClaimedAt = c.ClaimedAt
			next.RenewedAt = now
			return ClaimDecision{Outcome: ClaimRenewed, Claim: next}
		case l == Stale && req.TakeoverStale:
			return ClaimDecision{Outcome: ClaimTakenOver, Claim: next, Previous: c, PreviousLiveness: l}
		default:
			return ClaimDecision{Outcome: ClaimDenied, Claim: c}
		}
	}
	d.Outcome = ClaimGranted
	d.Claim = next
	return d
}

// ApplyClaim returns claims updated with d: after granted, renewed or
// taken_over every claim on the same subject is replaced by d.Claim; after
// denied or invalid claims is returned unchanged. The input slice is never
// modified.
func ApplyClaim(claims []Claim, d ClaimDecision) []Claim {
	switch d.Outcome {
	case ClaimGranted, ClaimRenewed, ClaimTakenOver:
	default:
		return claims
	}
	out := make([]Claim, 0, len(claims)+1)
	for _, c := range claims {
		if !sameSubject(c, d.Claim.Event, d.Claim.Thread) {
			out = append(out, c)
		}
	}
	return append(out, d.Claim)
}

// ReleaseClaim returns claims without agent's claim on event (or, with
// event empty, on thread), and whether there was one. Only the holder
// releases its claim.
func ReleaseClaim(claims []Claim, agent, event, thread string) ([]Claim, bool) {
	out := make([]Claim, 0, len(claims))
	found := false
	for _, c := range claims {
		if c.Holder == agent && sameSubject(c, event, thread) {
			found = true
			continue
		}
		out = append(out, c)
	}
	return out, found
}

// PruneClaims splits st.Claims into those still in force at now and those
// released: expired, or held by an evicted agent. Order is kept.
func PruneClaims(st State, now time.Time) (kept, released []Claim) {
	for _, c := range st.Claims {
		if inForce(st, c, now) {
			kept = append(kept, c)
		} else {
			released = append(released, c)
		}
	}
	return kept, released
}

// Claimable reports whether agent a may claim ev at now: the event must be
// to_me or to_my_role for a (C2A: an agent claims a channel event before a
// substantive reply; nobody claims traffic aimed at someone else), not a's
// own, and of a kind that asks for replies (no bookkeeping, no
// ACK/NACK/BROADCAST/CLOSE/REVOKE). Whether another agent holds the claim
// is DecideClaim's question.
func Claimable(ev Event, a Agent, st State, now time.Time) bool {
	d, v := directedness(ev, a, st, now)
	if d != ToMe && d != ToMyRole {
		return false
	}
	_, r := policy(ev, a, st, now, d, v)
	switch r {
	case ReasonOwnEvent, ReasonBookkeeping, ReasonAcknowledgement, ReasonBroadcast,
		ReasonClosed, ReasonRevocation, ReasonAttentionAck:
		return false
	}
	return true
}
