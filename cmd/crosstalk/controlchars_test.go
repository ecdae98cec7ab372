package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// hostileValue holds what an envelope's author could use to rewrite the
// reader's terminal (clear the screen, move the cursor, set the title) or
// reorder a line: an escape sequence, BEL and a bidi override.
const hostileValue = "REQ\x1b[2J\x1b[1A\x07\u202eUEST"

// noTerminalControls fails when out holds ESC, BEL or a bidi control.
func noTerminalControls(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexAny(out, "\x1b\x07\u202e"); i >= 0 {
		t.Errorf("%s prints a terminal control at byte %d: %q", what, i, out)
	}
}

// TestHumanOutputShowsControls: the human forms of parse and validate show
// the control and bidi characters of an envelope's values visibly
// (⟨U+001B⟩) instead of passing them to the terminal; --json and fmt keep
// the values as they are.
func TestHumanOutputShowsControls(t *testing.T) {
	in := "[[CLAUDE→CHATGPT v1]]\nuser: " + hostileValue + "\nsession: " + hostileValue +
		"\nintent: " + hostileValue + "\nx-note: " + hostileValue + "\n\nbody: |\n  hi\nsig: " + hostileValue + "\n[[END]]\n"
	for _, cmd := range []string{"parse", "validate"} {
		stdout, stderr, _ := runCLI(t, in, cmd)
		noTerminalControls(t, cmd, stdout+stderr)
		if !strings.Contains(stdout, "⟨U+001B⟩") {
			t.Errorf("%s = %q, want the escape shown as ⟨U+001B⟩", cmd, stdout)
		}
	}
	if stdout, _, _ := runCLI(t, in, "parse", "--json"); !strings.Contains(stdout, `\u001b`) {
		t.Errorf("parse --json = %q, want the value kept (JSON-escaped)", stdout)
	}
}

// TestInboxLogShowControls: another sender's intent reaches `crosstalk
// inbox` and `crosstalk log` through the relay; its control characters
// are shown, not sent to the reader's terminal.
func TestInboxLogShowControls(t *testing.T) {
	r := testrelay.Start(t, nil)
	r.Send(t, "CLAUDE", "CHATGPT", hostileValue, "hi", "deploy", "")
	for _, args := range [][]string{
		{"inbox", "--agent", "chatgpt", "--relay", r.URL},
		{"log", "--group", "deploy", "--relay", r.URL},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		noTerminalControls(t, args[0], stdout.String()+stderr.String())
	}
}

// TestFmtNoEnvelope: fmt on text without an envelope says so on standard
// error, like parse, instead of printing nothing at all.
func TestFmtNoEnvelope(t *testing.T) {
	stdout, stderr, code := runCLI(t, "just chat, no envelope\n", "fmt")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no envelope found") {
		t.Errorf("fmt = %d, %q, %q; want exit 0, nothing on stdout, and the note", code, stdout, stderr)
	}
}
