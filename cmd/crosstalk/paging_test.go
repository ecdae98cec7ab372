package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestLogAndInboxPage checks that `crosstalk log --group` and `crosstalk
// inbox` show one page by default, name the older page on stderr, and
// that --before and --all reach the rest.
func TestLogAndInboxPage(t *testing.T) {
	r := testrelay.Start(t, nil)
	const n = 130
	for i := range n {
		r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, fmt.Sprintf("question %d", i), "deploy", "")
	}
	cli := func(args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append(args, "--relay", r.URL)
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	lines := func(s string) int { return strings.Count(s, "\n") }

	out, hint := cli("log", "--group", "deploy")
	if lines(out) != 100 || !strings.Contains(out, "question 129") || !strings.Contains(hint, "--before 31") {
		t.Errorf("log --group deploy = %d lines, hint %q; want the last 100 and --before 31", lines(out), hint)
	}
	out, hint = cli("log", "--group", "deploy", "--before", "31")
	if lines(out) != 30 || !strings.Contains(out, "question 0") || hint != "" {
		t.Errorf("log --before 31 = %d lines, hint %q; want the first 30 and no hint", lines(out), hint)
	}
	if out, _ = cli("log", "--group", "deploy", "--all"); lines(out) != n {
		t.Errorf("log --all = %d lines, want %d", lines(out), n)
	}

	out, hint = cli("inbox", "--agent", "chatgpt", "--limit", "50")
	if got := strings.Count(out, "must_respond"); got != 50 || !strings.Contains(hint, "older: crosstalk inbox --agent chatgpt --before ") {
		t.Errorf("inbox --limit 50 = %d deliveries, hint %q; want 50 and an older page", got, hint)
	}
	if out, _ = cli("inbox", "--agent", "chatgpt", "--all"); strings.Count(out, "must_respond") != n {
		t.Errorf("inbox --all = %d deliveries, want %d", strings.Count(out, "must_respond"), n)
	}
}
