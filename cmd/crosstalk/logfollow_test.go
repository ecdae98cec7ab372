package main

import (
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestLogFollowRelayGone: `crosstalk log --follow` prints the events as
// they come and, when the relay shuts down (cleanly), keeps trying for
// --reconnect and then exits 1 with the reason; interrupted by the user
// it exits 0.
func TestLogFollowRelayGone(t *testing.T) {
	post := func(t *testing.T, url, body string) {
		t.Helper()
		e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, body)
		e.Context = "follow"
		text, err := envelope.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := postEnvelope(url, string(text)); !ok {
			t.Fatalf("POST %s failed", url)
		}
	}

	t.Run("relay gone", func(t *testing.T) {
		r := startTestRelay(t, t.TempDir(), nil)
		post(t, r.url, "first")
		b := startCLI(t, "log", "--relay", r.url, "--group", "follow", "--follow", "--reconnect", "1s")
		b.waitOutput(t, 1, 10*time.Second)
		post(t, r.url, "second")
		b.waitOutput(t, 2, 10*time.Second)
		if err := r.shutdown(); err != nil {
			t.Fatal(err)
		}
		// A bound against a hang, not a timing requirement.
		select {
		case code := <-b.done:
			b.done <- code
			if code != exitFailure || !strings.Contains(b.stderr.String(), "crosstalk: error: following follow") {
				t.Errorf("log --follow after the relay stopped = %d, stderr %q; want %d and the reason", code, b.stderr.String(), exitFailure)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("log --follow still runs 30s after the relay stopped; stderr %q", b.stderr.String())
		}
		if out := b.stdout.String(); !strings.Contains(out, `"first"`) || !strings.Contains(out, `"second"`) {
			t.Errorf("stdout = %q, want both events", out)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		r := startTestRelay(t, t.TempDir(), nil)
		defer r.shutdown()
		post(t, r.url, "first")
		b := startCLI(t, "log", "--relay", r.url, "--group", "follow", "--follow")
		b.waitOutput(t, 1, 10*time.Second)
		if code := b.stop(t); code != exitOK {
			t.Errorf("log --follow interrupted = %d, want %d; stderr %q", code, exitOK, b.stderr.String())
		}
	})

	t.Run("bad reconnect", func(t *testing.T) {
		if _, _, code := runCLI(t, "", "log", "--follow", "--reconnect", "1m"); code != exitUsage {
			t.Errorf("log --reconnect 1m = %d, want %d", code, exitUsage)
		}
	})
}
