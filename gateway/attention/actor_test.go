package attention

import (
	"testing"
)

// TestSameActorNoUnicodeFold: a recipient, author, role or delegate
// matches an agent without regard to the case of ASCII letters only. A
// name that only a Unicode case fold (strings.EqualFold) or a Unicode
// lower-casing joins to the agent's is another actor, as the ledger
// records it: long s (U+017F) folds to s, the Kelvin sign (U+212A) to k;
// Turkish dotted İ lower-cases to i and dotless ı upper-cases to I.
func TestSameActorNoUnicodeFold(t *testing.T) {
	sam := Agent{ID: "sam", Roles: []string{"support"}}
	kate := Agent{ID: "kate"}
	kim := Agent{ID: "kim"}
	user := Agent{ID: "user"}
	tests := []struct {
		name string
		to   string
		a    Agent
		want Directedness
	}{
		{"ASCII upper case is the agent", "SAM", sam, ToMe},
		{"ASCII mixed case is the agent", "KaTe", kate, ToMe},
		{"long s", "ſam", sam, ToOther},
		{"long s, upper case", "ſAM", sam, ToOther},
		{"Kelvin sign", "\u212aate", kate, ToOther},
		{"Kelvin sign, upper case", "\u212aATE", kate, ToOther},
		{"Turkish dotted capital I", "K\u0130M", kim, ToOther},
		{"Turkish dotless small i", "k\u0131m", kim, ToOther},
		{"Turkish dotless i, upper case rest", "K\u0131M", kim, ToOther},
		{"long s in the user selector", "uſer", user, ToOther},
		{"ASCII user selector", "USER", user, ToMe},
		{"long s in a role", "@ſupport", sam, ToOther},
		{"role in ASCII upper case", "@SUPPORT", sam, ToMyRole},
		{"Kelvin sign in a selector role", "@\u212aate", Agent{ID: "x", Roles: []string{"kate"}}, ToOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ev(IntentRequest, tt.to)
			if got := DirectednessOf(e, tt.a, State{}, t0); got != tt.want {
				t.Errorf("DirectednessOf(to %q, agent %q) = %s, want %s", tt.to, tt.a.ID, got, tt.want)
			}
			d := Decide(e, tt.a, State{}, t0)
			if mustAnswer := d.Policy == MustRespond; mustAnswer != (tt.want == ToMe) {
				t.Errorf("Decide(to %q, agent %q).Policy = %s (%s)", tt.to, tt.a.ID, d.Policy, d.Reason)
			}
		})
	}

	authors := []struct {
		from  string
		agent string
		own   bool
	}{
		{"SAM", "sam", true},
		{"ſam", "sam", false},
		{"\u212aate", "kate", false},
		{"K\u0130M", "kim", false},
		{"k\u0131m", "kim", false},
	}
	for _, tt := range authors {
		e := ev(IntentRequest, "@all").with(func(e *Event) { e.From = tt.from })
		d := Decide(e, Agent{ID: tt.agent}, State{}, t0)
		if own := d.Reason == ReasonOwnEvent; own != tt.own {
			t.Errorf("Decide(from %q, agent %q): own event %v (%s), want %v", tt.from, tt.agent, own, d.Reason, tt.own)
		}
	}

	discharge := []struct {
		author, delegate, actor string
		want                    bool
	}{
		{"sam", "", "SAM", true},
		{"ſam", "", "sam", false},
		{"sam", "", "ſam", false},
		{"gemini", "kate", "KATE", true},
		{"gemini", "\u212aate", "kate", false},
		{"gemini", "kim", "K\u0130M", false},
		{"gemini", "k\u0131m", "kim", false},
	}
	for _, tt := range discharge {
		ob := Obligation{Delegate: tt.delegate}
		if got := ob.CanDischarge(tt.author, tt.actor); got != tt.want {
			t.Errorf("Obligation{Delegate: %q}.CanDischarge(%q, %q) = %v, want %v", tt.delegate, tt.author, tt.actor, got, tt.want)
		}
	}
}
