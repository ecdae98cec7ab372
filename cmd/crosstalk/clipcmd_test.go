package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/xvfbtest"
)

// postEnvelope records text on the relay as if it came over HTTP.
func (r *testRelay) post(t *testing.T, text string) {
	t.Helper()
	res, err := http.Post(r.url+"/crosstalk/receive", "text/plain; charset=utf-8", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("posting an envelope: %s", res.Status)
	}
}

// waitClipboard waits until the clipboard holds want.
func waitClipboard(t *testing.T, want string) {
	t.Helper()
	var got []byte
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = xvfbtest.Get(t); string(got) == want {
			return
		}
	}
	t.Fatalf("clipboard = %q, want %q", got, want)
}

// TestClipCopyAndWatch: clip copy puts NAME's pending envelopes on the
// clipboard one after the other, exactly as received, and a clip watch
// sharing the state file does not take them back; it does take what
// someone else copies.
func TestClipCopyAndWatch(t *testing.T) {
	xvfbtest.Start(t)
	relay := newTestRelay(t)
	// Not canonical (arrow, field order, spacing): a re-serialization
	// would show.
	first := "[[ALICE -> CLAUDE v1]]\nintent: REQUEST\ncontext: clitest\nthread: 01J9ZX3C4M8S2Q7W5E6R1T0Y9A\nmessage: 01J9ZX3C4M8S2Q7W5E6R1T0Y9B\n\nbody: |\n  first,   as typed\nsig: none\n[[END]]\n"
	second := testEnvelope(t, "ALICE", "CLAUDE", "REQUEST", "second")
	relay.post(t, first)
	relay.post(t, testEnvelope(t, "ALICE", "BOB", "REQUEST", "not for claude"))
	relay.post(t, testEnvelope(t, "ALICE", "ALL", "BROADCAST", "for everyone, no answer"))
	otherGroup := envelope.New("BOB", "CLAUDE", "HANDOFF", "in another group")
	otherGroup.Context = "elsewhere"
	otherText, err := envelope.Marshal(otherGroup)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // distinct ledger timestamps: the order across groups is by time
	relay.post(t, string(otherText))
	time.Sleep(5 * time.Millisecond)
	relay.post(t, second)

	state := filepath.Join(t.TempDir(), "clipboard.state")
	if err := xvfbtest.Put(t, []byte("nothing yet")); err != nil {
		t.Fatal(err)
	}
	w := startCLI(t, "clip", "watch", "--json", "--interval", "30ms", "--state", state)
	copyArgs := []string{"clip", "copy", "--to", "CLAUDE", "--relay", relay.url, "--state", state}

	stdout, stderr, code := runCLI(t, "", copyArgs...)
	if code != 0 || !strings.Contains(stdout, "copied ALICE → CLAUDE REQUEST 01J9ZX3C4M8S2Q7W5E6R1T0Y9B") {
		t.Fatalf("clip copy = %d, %q, %q; want the first envelope copied", code, stdout, stderr)
	}
	waitClipboard(t, first)

	stdout, stderr, code = runCLI(t, "", copyArgs...)
	if code != 0 || !strings.Contains(stdout, "copied BOB → CLAUDE HANDOFF "+otherGroup.Message+" (group elsewhere, seq 1, must_respond)") {
		t.Fatalf("clip copy = %d, %q, %q; want the envelope of the other group, next in time", code, stdout, stderr)
	}
	waitClipboard(t, string(otherText))

	stdout, stderr, code = runCLI(t, "", append(copyArgs, "--fence")...)
	if code != 0 || !strings.Contains(stdout, "copied ALICE → CLAUDE REQUEST") {
		t.Fatalf("second clip copy = %d, %q, %q", code, stdout, stderr)
	}
	waitClipboard(t, "```\n"+second+"```\n")

	_, stderr, code = runCLI(t, "", copyArgs...)
	if code != 1 || !strings.Contains(stderr, "nothing pending for claude") {
		t.Errorf("third clip copy = %d, %q; want exit 1, nothing pending", code, stderr)
	}

	time.Sleep(150 * time.Millisecond)
	if out := w.stdout.String(); out != "" {
		t.Errorf("clip watch took the copies back: %q", out)
	}
	theirs := testEnvelope(t, "BOB", "ALICE", "RESPOND", "copied from a chat")
	if err := xvfbtest.Put(t, []byte(theirs)); err != nil {
		t.Fatal(err)
	}
	want, _, _ := runCLI(t, theirs, "parse", "--json")
	if got := w.waitOutput(t, 1, 5*time.Second); got != want {
		t.Errorf("clip watch --json printed %q, want parse --json's %q", got, want)
	}
	if code := w.stop(t); code != 0 {
		t.Errorf("clip watch exited %d, want 0; stderr %q", code, w.stderr.String())
	}
}

func TestClipWatchRelay(t *testing.T) {
	xvfbtest.Start(t)
	relay := newTestRelay(t)
	if err := xvfbtest.Put(t, []byte("nothing yet")); err != nil {
		t.Fatal(err)
	}
	w := startCLI(t, "clip", "watch", "--relay", relay.url, "--interval", "30ms", "--state", "")
	text := testEnvelope(t, "BOB", "ALICE", "REQUEST", "forward from the clipboard")
	env, _ := envelope.Unmarshal([]byte(text))
	if err := xvfbtest.Put(t, []byte("some chat\n"+text)); err != nil {
		t.Fatal(err)
	}
	if out := w.waitOutput(t, 1, 5*time.Second); !strings.Contains(out, "clipboard: recorded message "+env.Message+" as event ") {
		t.Errorf("clip watch --relay printed %q, want the receipt", out)
	}
	if got := relay.messages(t, "clitest"); len(got) != 1 || got[0] != env.Message {
		t.Errorf("relay recorded %v, want [%s]", got, env.Message)
	}
}

func TestClipNoClipboard(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	const want = "crosstalk: error: clipboard: no clipboard tool: install xclip or xsel, and run under X11 (DISPLAY is empty)\n"
	for _, args := range [][]string{
		{"clip", "watch", "--state", ""},
		{"clip", "copy", "--to", "CLAUDE", "--relay", "http://127.0.0.1:1", "--state", ""},
	} {
		_, stderr, code := runCLI(t, "", args...)
		if code != 1 || stderr != want {
			t.Errorf("crosstalk %v = %d, %q; want 1, %q", args, code, stderr, want)
		}
	}
}

func TestClipUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"clip"}, 2, "want a subcommand"},
		{[]string{"clip", "paste"}, 2, `unknown subcommand "paste"`},
		{[]string{"clip", "copy"}, 2, "--to NAME is required"},
		{[]string{"clip", "watch", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"clip", "--help"}, 0, "crosstalk clip copy --to NAME"},
		{[]string{"clip", "copy", "--help"}, 0, "usage: crosstalk clip copy"},
		{[]string{"help", "clip"}, 0, "crosstalk clip watch"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runCLI(t, "", tt.args...)
		if code != tt.code || !strings.Contains(stdout+stderr, tt.out) {
			t.Errorf("crosstalk %v = %d, %q; want %d and %q", tt.args, code, stdout+stderr, tt.code, tt.out)
		}
	}
	var b bytes.Buffer
	printUsage(&b)
	for _, name := range []string{"watch", "clip"} {
		if !strings.Contains(b.String(), "  "+name+" ") {
			t.Errorf("crosstalk help does not list %s", name)
		}
	}
}
