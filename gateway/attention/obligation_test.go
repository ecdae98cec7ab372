package attention

import (
	"errors"
	"testing"
	"time"
)

func TestParseObligation(t *testing.T) {
	tests := []struct {
		blocks, action, delegate, deadline string
		want                               Obligation
		err                                bool
	}{
		{"halted", "ship without the review", "lead", "2026-12-01T12:00:00Z",
			Obligation{Blocks: BlocksHalted, DefaultAction: "ship without the review", Delegate: "lead", Deadline: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}, false},
		{" Degraded ", "", "", "30m", Obligation{Blocks: BlocksDegraded, Deadline: t0.Add(30 * time.Minute)}, false},
		{"", "", "", "", Obligation{Blocks: BlocksNone}, false},
		{"stuck", "", "", "", Obligation{}, true},
		{"none", "", "", "-5m", Obligation{}, true},
		{"none", "", "", "tomorrow", Obligation{}, true},
		{"none", "two\nlines", "", "", Obligation{}, true},
		{"none", "bell\a", "", "", Obligation{}, true},
		{"none", "", "@reviewer", "", Obligation{}, true},
		{"none", "", "ALL", "", Obligation{}, true},
		{"none", "", "le\u200bad", "", Obligation{}, true},
		{"none", "", "lead, pat", "", Obligation{}, true},
		{"none", "", "le\u2029ad", "", Obligation{}, true},
	}
	for _, tt := range tests {
		got, err := ParseObligation(tt.blocks, tt.action, tt.delegate, tt.deadline, t0)
		if tt.err {
			if !errors.Is(err, ErrObligation) {
				t.Errorf("ParseObligation(%q, %q, %q, %q) error = %v, want ErrObligation", tt.blocks, tt.action, tt.delegate, tt.deadline, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseObligation(%q, %q, %q, %q) = %+v, %v, want %+v", tt.blocks, tt.action, tt.delegate, tt.deadline, got, err, tt.want)
		}
	}
}

// TestObligationPolicy: an open obligation is must_respond and immediate
// for every addressee, never stale; once discharged the ordinary rules
// apply; bystanders and the author are unaffected.
func TestObligationPolicy(t *testing.T) {
	ob := &Obligation{Blocks: BlocksHalted, Deadline: t0.Add(time.Minute)}
	with := func(e Event) Event { e.Obligation = ob; return e }
	claimBy := func(holder string) State {
		return State{Claims: []Claim{{Event: "01JEVT", Holder: holder, ClaimedAt: t0, ExpiresAt: t0.Add(DefaultClaimTTL)}}}
	}
	tests := []struct {
		name string
		ev   Event
		st   State
		now  time.Time
		want want
	}{
		{"to me", with(ev(IntentRespond, "claude")), State{}, t0, want{ToMe, MustRespond, ReasonObligation, Immediate}},
		{"to my role", with(ev(IntentRequest, "@backend")), State{}, t0, want{ToMyRole, MustRespond, ReasonObligation, Immediate}},
		{"to @all", with(ev(IntentRequest, "@all")), State{}, t0, want{ToMyRole, MustRespond, ReasonObligation, Immediate}},
		{"role claimed by another", with(ev(IntentRequest, "@backend")), claimBy("codex"), t0, want{ToMyRole, MustNotRespond, ReasonClaimedByOther, ToolMailbox}},
		{"lapsed: still owed", with(ev(IntentRequest, "claude")), State{}, t0.Add(time.Hour), want{ToMe, MustRespond, ReasonObligation, Immediate}},
		{"to another", with(ev(IntentRequest, "chatgpt")), State{}, t0, want{ToOther, MustNotRespond, ReasonAddressedToOther, ToolMailbox}},
		{"my own", with(ev(IntentRequest, "chatgpt")).with(func(e *Event) { e.From = "claude" }), State{}, t0, want{ToOther, MustNotRespond, ReasonOwnEvent, Silent}},
		{"discharged", with(ev(IntentRequest, "claude")).with(func(e *Event) { e.Discharged = true }), State{}, t0, want{ToMe, MustRespond, ReasonDirectMessage, Buffered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.ev, me, tt.st, tt.now)
			if g := got(d); g != tt.want {
				t.Errorf("Decide(%s) = %v, want %v", describe(tt.ev), g, tt.want)
			}
			if tt.want.r == ReasonObligation && (!d.Deadline.Equal(ob.Deadline) || d.Expired != tt.now.After(ob.Deadline)) {
				t.Errorf("Decide(%s) deadline %v expired %v, want %v, %v", describe(tt.ev), d.Deadline, d.Expired, ob.Deadline, tt.now.After(ob.Deadline))
			}
		})
	}
	if !ob.CanDischarge("gemini", "GEMINI") || ob.CanDischarge("gemini", "claude") {
		t.Errorf("CanDischarge: only the author (or the delegate) may discharge")
	}
	dl := Obligation{Delegate: "lead"}
	if !dl.CanDischarge("gemini", "lead") || dl.CanDischarge("gemini", "") {
		t.Errorf("CanDischarge: the delegate may discharge")
	}
}

// TestParseDeadlineWritable: every deadline ParseDeadline accepts can be
// written as JSON (time.Time.MarshalJSON: years 0 to 9999 in UTC, which
// it returns): a later one is refused, not left to fail where an event's
// data or a delivery is encoded.
func TestParseDeadlineWritable(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"30m", true},
		{"2026-12-01T10:00:00+02:00", true},
		{"9999-12-31T23:59:59Z", true},
		{"9999-12-31T22:59:59-01:00", true},
		{"9999-12-31T23:59:59-01:00", false},
		{"9999-12-31T23:30:00-00:45", false},
		{"0000-01-01T00:30:00+01:00", false},
		{"0000-01-01T00:30:00Z", true},
	} {
		d, err := ParseDeadline(tc.in, now)
		if (err == nil) != tc.ok {
			t.Errorf("ParseDeadline(%q) = %v, %v; want ok %t", tc.in, d, err, tc.ok)
			continue
		}
		if err == nil {
			if _, err := d.MarshalJSON(); err != nil {
				t.Errorf("ParseDeadline(%q) = %v, which JSON cannot write: %v", tc.in, d, err)
			}
		}
	}
}
