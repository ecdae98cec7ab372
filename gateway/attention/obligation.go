package attention

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Blocks says what an open obligation holds up (issue #14, after C2A's
// later draft): the asker is halted, degraded, or not blocked at all.
type Blocks string

// Blocks values.
const (
	BlocksHalted   Blocks = "halted"
	BlocksDegraded Blocks = "degraded"
	BlocksNone     Blocks = "none"
)

// ReasonDischarged is the reason of the update that tells an obligation's
// addressees, and its author or delegate when the other one closed it,
// that it was discharged (docs/agents.md "Streams learn of discharges").
// Such a delivery is to_me and must_not_respond: it owes nothing.
const ReasonDischarged Reason = "discharged"

// ErrObligation is wrapped by ParseObligation's errors.
var ErrObligation = errors.New("attention: bad obligation")

// maxObligationText bounds Default-Action and Delegate.
const maxObligationText = 500

// Obligation is what an event's author is owed (`meta: obligation`,
// docs/format.md): an answer its addressees must give until the author or
// the delegate discharges it. A recipient's reply or reaction is evidence
// shown to the author, never discharge; read state is never an input.
type Obligation struct {
	// Blocks is what the author's work is while the obligation is open.
	Blocks Blocks `json:"blocks"`
	// DefaultAction is what the author will do if the obligation lapses.
	DefaultAction string `json:"default_action,omitempty"`
	// Delegate is the actor id that may discharge it besides the author.
	Delegate string `json:"delegate,omitempty"`
	// Deadline is when it lapses; zero for none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Ack says an addressee's acknowledgement (chat.ack) settles what
	// that addressee owes: a BeadBoard HANDOFF or BLOCKED (§6.2), which
	// the relay records with this set (docs/agents.md "Handoff and
	// blocked"). The author's side closes as the relay decides.
	Ack bool `json:"ack,omitempty"`
}

// ParseObligation reads the fields of `meta: obligation`: Blocks (halted,
// degraded or none; none when empty), Default-Action and Delegate (one
// line each, at most 500 bytes), and Deadline, an RFC 3339 time or a
// positive duration ("30m", "2h") counted from receivedAt. Errors wrap
// ErrObligation and name the field.
func ParseObligation(blocks, defaultAction, delegate, deadline string, receivedAt time.Time) (Obligation, error) {
	var o Obligation
	switch b := Blocks(strings.ToLower(strings.TrimSpace(blocks))); b {
	case "":
		o.Blocks = BlocksNone
	case BlocksHalted, BlocksDegraded, BlocksNone:
		o.Blocks = b
	default:
		return o, fmt.Errorf("%w: Blocks %q is not halted, degraded or none", ErrObligation, blocks)
	}
	for _, f := range []struct {
		name string
		v    string
		to   *string
	}{{"Default-Action", defaultAction, &o.DefaultAction}, {"Delegate", delegate, &o.Delegate}} {
		v := strings.TrimSpace(f.v)
		if len(v) > maxObligationText || !OneLine(v) {
			return o, fmt.Errorf("%w: %s must be one line of at most %d bytes", ErrObligation, f.name, maxObligationText)
		}
		*f.to = v
	}
	// The delegate discharges as itself, so it is one agent: a role or
	// everyone could never discharge, and a name nobody can see or type
	// matches nobody.
	if d := o.Delegate; d != "" {
		if _, err := envelope.NormalizeIdentifier(d); err != nil {
			return o, fmt.Errorf("%w: Delegate: %v", ErrObligation, err)
		}
		if strings.HasPrefix(d, "@") || SameActor(d, "all") || d == "*" || strings.ContainsAny(d, " ,") {
			return o, fmt.Errorf("%w: Delegate %q is not one agent", ErrObligation, d)
		}
	}
	if strings.TrimSpace(deadline) != "" {
		t, err := ParseDeadline(deadline, receivedAt)
		if err != nil {
			return o, fmt.Errorf("%w: Deadline %q is neither an RFC 3339 time nor a positive duration such as 30m", ErrObligation, deadline)
		}
		o.Deadline = t
	}
	return o, nil
}

// ErrDeadline is returned by ParseDeadline.
var ErrDeadline = errors.New("attention: deadline is neither an RFC 3339 time nor a positive duration such as 30m")

// ParseDeadline reads a deadline as envelopes write it (`meta: obligation`
// Deadline, `meta: routing` X-Deadline): an RFC 3339 time, or a positive
// duration ("30m", "2h") counted from receivedAt. The result is in UTC.
func ParseDeadline(v string, receivedAt time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		dur, derr := time.ParseDuration(v)
		if derr != nil || dur <= 0 {
			return time.Time{}, ErrDeadline
		}
		t = receivedAt.Add(dur)
	}
	// JSON writes years 0 to 9999 only (time.Time.MarshalJSON): a
	// deadline past them ("9999-12-31T23:59:59-01:00" is in year 10000
	// in UTC) could be written neither in the event's data nor in a
	// delivery.
	if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
		return time.Time{}, ErrDeadline
	}
	return t, nil
}

// CanDischarge reports whether actor may discharge the obligation of an
// event written by author: only the author or the delegate may
// (SameActor).
func (o Obligation) CanDischarge(author, actor string) bool {
	return actor != "" && (SameActor(actor, author) || o.Delegate != "" && SameActor(actor, o.Delegate))
}

// OneLine reports whether v is one line a person sees as written
// (envelope.BreaksLine: no control character, bidi control, or line or
// paragraph separator). META values shown in the CLI, the web inbox and
// copied envelopes must be.
func OneLine(v string) bool {
	return !strings.ContainsFunc(v, envelope.BreaksLine)
}
