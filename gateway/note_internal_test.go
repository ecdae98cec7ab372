package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestOneLineNote: a note is one line of at most 1000 bytes, cut at a
// character's start, never inside one.
func TestOneLineNote(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"short", "a\n b\t c"},
		{"ascii", strings.Repeat("x", 1500)},
		{"two-byte at the cut", strings.Repeat("x", 999) + strings.Repeat("é", 10)},
		{"four-byte at the cut", strings.Repeat("x", 998) + strings.Repeat("😀", 10)},
	} {
		got := oneLineNote(tc.in)
		if len(got) > 1000 || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\t") || !strings.HasPrefix(strings.Join(strings.Fields(tc.in), " "), got) {
			t.Errorf("%s: oneLineNote = %d bytes, valid UTF-8 %v: %q…", tc.name, len(got), utf8.ValidString(got), got[max(0, len(got)-8):])
		}
	}
}

// TestNotifyAgentNamesReporter: a notice an agent reports (POST
// /v1/agents/{agent}/notify) is recorded by system, naming the agent as
// who reported it: its message is the agent's text, not the relay's.
func TestNotifyAgentNamesReporter(t *testing.T) {
	r := New(memory.New(nil), nil)
	if err := r.NotifyAgent(t.Context(), "CLAUDE", "g", "", "harness_failed", "text of the harness's own"); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Store().Log(t.Context(), 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("log = %v, %v", evs, err)
	}
	d, err := ParseData(evs[0].Event)
	if err != nil || evs[0].By != "system" || d.ActorID != "claude" || d.TargetActorID != "claude" {
		t.Errorf("notice by %s, data %+v (%v); want by system, reported by claude for claude", evs[0].By, d, err)
	}
}
