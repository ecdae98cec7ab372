package attention

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

func TestParse(t *testing.T) {
	ok := []struct {
		in   string
		fn   func(string) (string, error)
		want string
	}{
		{"to_me", wrap(ParseDirectedness), "to_me"},
		{" TO_MY_ROLE ", wrap(ParseDirectedness), "to_my_role"},
		{"ambient", wrap(ParseDirectedness), "ambient"},
		{"must_respond", wrap(ParsePolicy), "must_respond"},
		{"Ack_Only", wrap(ParsePolicy), "ack_only"},
		{"tool_mailbox", wrap(ParseInjection), "tool_mailbox"},
		{"digest", wrap(ParseInjection), "digest"},
		{"stale", wrap(ParseLiveness), "stale"},
		{"deferred", wrap(ParseDisposition), "deferred"},
		{"superseded", wrap(ParseDisposition), "superseded"},
		{"agree", wrap(ParseSignal), "agree"},
		{"DECLINED", wrap(ParseSignal), "declined"},
	}
	for _, tt := range ok {
		if g, err := tt.fn(tt.in); err != nil || g != tt.want {
			t.Errorf("Parse(%q) = %q, %v, want %q, nil", tt.in, g, err, tt.want)
		}
	}
	bad := []struct {
		in string
		fn func(string) (string, error)
	}{
		{"to-me", wrap(ParseDirectedness)},
		{"", wrap(ParsePolicy)},
		{"must respond", wrap(ParsePolicy)},
		{"interrupt", wrap(ParseInjection)},
		{"dead", wrap(ParseLiveness)},
		{"resolved", wrap(ParseDisposition)},
		{"👍", wrap(ParseSignal)},
	}
	for _, tt := range bad {
		if g, err := tt.fn(tt.in); !errors.Is(err, ErrUnknown) || g != "" {
			t.Errorf("Parse(%q) = %q, %v, want \"\", ErrUnknown", tt.in, g, err)
		}
	}
}

func wrap[T ~string](f func(string) (T, error)) func(string) (string, error) {
	return func(s string) (string, error) {
		v, err := f(s)
		return string(v), err
	}
}

func TestValidAndString(t *testing.T) {
	for _, d := range allDirectedness {
		if !d.Valid() || d.String() != string(d) {
			t.Errorf("Directedness(%q).Valid() = false", d)
		}
	}
	for _, v := range allPolicies {
		if !v.Valid() || v.String() != string(v) {
			t.Errorf("Policy(%q).Valid() = false", v)
		}
	}
	for _, v := range allInjections {
		if !v.Valid() || v.String() != string(v) {
			t.Errorf("Injection(%q).Valid() = false", v)
		}
	}
	for _, v := range allLiveness {
		if !v.Valid() || v.String() != string(v) {
			t.Errorf("Liveness(%q).Valid() = false", v)
		}
	}
	for _, v := range allDispositions {
		if !v.Valid() || v.String() != string(v) {
			t.Errorf("Disposition(%q).Valid() = false", v)
		}
	}
	for _, v := range allSignals {
		if !v.Valid() || v.String() != string(v) {
			t.Errorf("Signal(%q).Valid() = false", v)
		}
	}
	if Directedness("TO_ME").Valid() || Policy("").Valid() || Injection("interrupt").Valid() ||
		Liveness("gone").Valid() || Disposition("done").Valid() || Signal("responded").Valid() {
		t.Errorf("Valid() = true for a value the spec does not define")
	}
	if ReasonClaimRequired.String() != "claim_required" || ClaimTakenOver.String() != "taken_over" ||
		IntentRequest.String() != "REQUEST" {
		t.Errorf("String() does not return the spelling")
	}
	b, _ := json.Marshal(struct {
		D Directedness
		P Policy
		I Injection
		L Liveness
	}{ToMyRole, MustNotRespond, ToolMailbox, Evicted})
	if string(b) != `{"D":"to_my_role","P":"must_not_respond","I":"tool_mailbox","L":"evicted"}` {
		t.Errorf("json.Marshal(values) = %s", b)
	}
}

func TestIntents(t *testing.T) {
	tests := []struct {
		in    Intent
		want  Intent
		known bool
	}{
		{"REQUEST", IntentRequest, true},
		{" close ", IntentClose, true},
		{"QUESTION", IntentRequest, true},
		{"answer", IntentRespond, true},
		{"STATUS", IntentBroadcast, true},
		{"PATCH", IntentRequest, true},
		{"NOTE", IntentBroadcast, true},
		{"vote", "VOTE", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if g := tt.in.Canonical(); g != tt.want || tt.in.Known() != tt.known {
			t.Errorf("Intent(%q).Canonical(), Known() = %q, %v, want %q, %v", tt.in, g, tt.in.Known(), tt.want, tt.known)
		}
	}
	for _, s := range envelope.Intents {
		if in := Intent(s); !in.Known() {
			t.Errorf("Intent(%q).Known() = false, want true", in)
		}
	}
}

// TestSignals checks C2A "Reaction Signals" row by row.
func TestSignals(t *testing.T) {
	tests := []struct {
		s     Signal
		glyph string
		disp  Disposition
		ok    bool
	}{
		{SignalSeen, "👀", Acknowledged, true},
		{SignalAgree, "👍", Acknowledged, true},
		{SignalWorking, "🔧", Claimed, true},
		{SignalQueued, "🕐", Deferred, true},
		{SignalClaimed, "✋", Claimed, true},
		{SignalDone, "✅", Responded, true},
		{SignalDeclined, "🙅", Ignored, true},
		{SignalBlocked, "🚧", Deferred, true},
		{SignalUnclear, "❓", "", false},
		{"shrug", "", "", false},
	}
	for _, tt := range tests {
		if d, ok := tt.s.Disposition(); d != tt.disp || ok != tt.ok {
			t.Errorf("Signal(%q).Disposition() = %q, %v, want %q, %v", tt.s, d, ok, tt.disp, tt.ok)
		}
		if g := tt.s.Glyph(); g != tt.glyph {
			t.Errorf("Signal(%q).Glyph() = %q, want %q", tt.s, g, tt.glyph)
		}
		if tt.glyph != "" {
			if s, ok := SignalForGlyph(tt.glyph + "\uFE0F"); s != tt.s || !ok {
				t.Errorf("SignalForGlyph(%q) = %q, %v, want %q, true", tt.glyph, s, ok, tt.s)
			}
		}
	}
	if s, ok := SignalForGlyph("🦄"); ok {
		t.Errorf("SignalForGlyph(unicorn) = %q, true, want false", s)
	}
	for in, want := range map[Intent]Signal{"ACK": SignalAgree, "nack": SignalDeclined, "REQUEST": "", "": ""} {
		if s, ok := SignalForIntent(in); s != want || ok != (want != "") {
			t.Errorf("SignalForIntent(%q) = %q, %v, want %q", in, s, ok, want)
		}
	}
	for action, want := range map[string]Disposition{"ack": Acknowledged, "claim": Claimed, "Defer": Deferred,
		"resolve": Responded, "read": "", "react": ""} {
		if d, ok := DispositionForAction(action); d != want || ok != (want != "") {
			t.Errorf("DispositionForAction(%q) = %q, %v, want %q", action, d, ok, want)
		}
	}
}

// TestSettles checks C2A "Event Disposition".
func TestSettles(t *testing.T) {
	want := map[Policy][]Disposition{
		MustRespond:    {Responded, Acknowledged, Deferred, Superseded, Failed},
		AckOnly:        {Acknowledged, Ignored, Superseded, Failed},
		MustNotRespond: {Ignored, Superseded, Failed},
		MayRespond:     allDispositions,
		"bogus":        nil,
	}
	for p, settling := range want {
		for _, d := range slices.Concat(allDispositions, []Disposition{"bogus"}) {
			w := false
			for _, s := range settling {
				w = w || s == d
			}
			if g := Settles(p, d); g != w {
				t.Errorf("Settles(%s, %s) = %v, want %v", p, d, g, w)
			}
		}
	}
	if d, ok := DefaultDisposition(MustNotRespond); d != Ignored || !ok {
		t.Errorf("DefaultDisposition(must_not_respond) = %q, %v, want ignored, true", d, ok)
	}
	if d, ok := DefaultDisposition(MustRespond); ok {
		t.Errorf("DefaultDisposition(must_respond) = %q, true, want false", d)
	}
}
