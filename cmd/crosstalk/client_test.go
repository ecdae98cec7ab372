package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestInboxJSONFlag runs `crosstalk inbox` against an in-process relay:
// the human form ends with the agent's liveness, --json and --json=true
// print JSON only, and --json=false is the human form (the flag package
// parses it, no command looks at the arguments itself).
func TestInboxJSONFlag(t *testing.T) {
	r := testrelay.Start(t, nil)
	r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?", "deploy", "")
	for _, tc := range []struct {
		flag string
		json bool
	}{{"", false}, {"--json=false", false}, {"--json", true}, {"--json=true", true}} {
		args := []string{"inbox", "--agent", "chatgpt", "--relay", r.URL}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		out := stdout.String()
		if tc.json {
			var v map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || strings.Contains(out, "liveness:") {
				t.Errorf("run(%q) = %q, want JSON alone (%v)", args, out, err)
			}
			continue
		}
		if !strings.Contains(out, "must_respond") || !strings.Contains(out, "liveness: chatgpt is ") {
			t.Errorf("run(%q) = %q, want the table and the liveness line", args, out)
		}
	}
}

// TestInboxSettled: an acknowledged attention message is listed as
// settled, after what is still owed, not as "must_respond (acked)".
func TestInboxSettled(t *testing.T) {
	r := testrelay.Start(t, nil)
	owed := r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "Still open?", "deploy", "")
	done := r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentHandoff, "Take the deploy", "deploy", "")
	if _, err := r.Relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionAck, Group: done.GroupID, EventID: done.ID, Actor: "chatgpt"}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"inbox", "--agent", "chatgpt", "--relay", r.URL}
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
	}
	out := stdout.String()
	o, d := strings.Index(out, owed.ID), strings.Index(out, done.ID)
	if strings.Contains(out, "(acked)") || !strings.Contains(out, "settled (acknowledged)") || o < 0 || d < o {
		t.Errorf("inbox = %q, want the open request first and the acknowledged handoff listed as settled after it", out)
	}
}

// TestInboxOweWaiting: --owe lists the open obligation and the unanswered
// request, --waiting lists the author's open obligation with who answered.
func TestInboxOweWaiting(t *testing.T) {
	r := testrelay.Start(t, nil)
	env := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Review before I ship")
	env.Context = "deploy"
	env.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}, {Key: "Default-Action", Value: "ship anyway"}}}}
	text, err := envelope.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := r.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(text)})
	if err != nil || !outs[0].Accepted() {
		t.Fatalf("Ingest = %+v, %v", outs, err)
	}
	ob := outs[0].Event
	open := r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "Unanswered?", "deploy", "")
	r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRespond, "FYI", "deploy", "")
	inbox := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"inbox", "--relay", r.URL}, args...)
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	out := inbox("--agent", "chatgpt", "--owe")
	if !strings.Contains(out, ob.ID) || !strings.Contains(out, open.ID) || strings.Contains(out, "FYI") || !strings.Contains(out, "obligation, blocks halted") {
		t.Errorf("inbox --owe = %q, want the obligation and the open request only", out)
	}
	out = inbox("--agent", "claude", "--waiting")
	if !strings.Contains(out, ob.ID) || !strings.Contains(out, "halted") || !strings.Contains(out, `"ship anyway"`) {
		t.Errorf("inbox --waiting = %q, want claude's open obligation", out)
	}
	if out = inbox("--agent", "chatgpt", "--waiting", "--json"); !strings.Contains(out, `"waiting":[]`) {
		t.Errorf("inbox --waiting --json for chatgpt = %q, want an empty list", out)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"discharge", "--relay", r.URL, "--agent", "chatgpt", "--group", ob.GroupID, ob.ID}
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code == exitOK {
		t.Errorf("run(%q) = ok, want the recipient refused", args)
	}
	args[4] = "claude"
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
	}
	if out = inbox("--agent", "claude", "--waiting"); !strings.Contains(out, "waiting on nothing") {
		t.Errorf("inbox --waiting after the discharge = %q", out)
	}
	if out = inbox("--agent", "chatgpt", "--owe"); strings.Contains(out, ob.ID) || !strings.Contains(out, open.ID) {
		t.Errorf("inbox --owe after the discharge = %q, want only the open request", out)
	}
	// --all shows what is settled too, after what is still owed.
	out = inbox("--agent", "chatgpt", "--owe", "--all")
	if o, s := strings.Index(out, open.ID), strings.Index(out, ob.ID); o < 0 || s < o || !strings.Contains(out, "settled (discharged)") {
		t.Errorf("inbox --owe --all = %q, want the open request, then the discharged obligation as settled", out)
	}
	var owe struct {
		Deliveries []gateway.Delivery `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(inbox("--agent", "chatgpt", "--owe", "--all", "--json")), &owe); err != nil || len(owe.Deliveries) != 2 {
		t.Errorf("inbox --owe --all --json = %+v, %v, want 2 deliveries", owe, err)
	}
	if out = inbox("--agent", "claude", "--waiting", "--all"); !strings.Contains(out, ob.ID) || !strings.Contains(out, "discharged by claude") {
		t.Errorf("inbox --waiting --all = %q, want the discharged obligation", out)
	}
	var waiting struct {
		Waiting []gateway.Waiting `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(inbox("--agent", "claude", "--waiting", "--all", "--json")), &waiting); err != nil ||
		len(waiting.Waiting) != 1 || waiting.Waiting[0].DischargedBy != "claude" {
		t.Errorf("inbox --waiting --all --json = %+v, %v, want the obligation discharged by claude", waiting, err)
	}
}

// TestSend runs `crosstalk send` against an in-process relay: the receipt
// envelopes on stdout, exit 0 when every envelope was recorded, 1 with the
// ERROR receipt when one was refused (and on stderr, naming the input and
// the line, for a terminal whose stdout goes to a file), 1 with a line on
// stderr for an edited resend that the relay did not record (Differs), and a relay that is not there an
// error with the hint (no retries with --retries 0).
func TestSend(t *testing.T) {
	r := testrelay.Start(t, nil)
	ok := testrelay.Envelope("CLAUDE", "CHATGPT", envelope.IntentRequest, "deploy", "Is the deploy blocked?")
	okEnv, err := envelope.Unmarshal([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	okID := okEnv.Message
	for _, tc := range []struct {
		name, stdin, relay string
		code               int
		stdout, stderr     string
	}{
		{"recorded", ok, r.URL, exitOK, "Event-ID", ""},
		{"again, recorded once", ok, r.URL, exitOK, "Event-ID", ""},
		{"edited, not recorded", strings.Replace(ok, "Is the deploy blocked?", "Is the deploy done?", 1), r.URL, exitFailure, "Differs: true",
			"crosstalk: <stdin>: message " + okID + " was already recorded with other content; the relay kept the first"},
		{"refused", "[[CLAUDE→CHATGPT v1]]\nno header\n[[END]]\n", r.URL, exitFailure, "E-", "crosstalk: <stdin>: refused by the relay: E-FORMAT: line 2: "},
		{"second refused", ok + "\n[[CLAUDE→CHATGPT v1]]\nintent REQUEST\n[[END]]\n", r.URL, exitFailure, "Event-ID", fmt.Sprintf("crosstalk: <stdin>: refused by the relay: E-FORMAT: line %d: ", strings.Count(ok, "\n")+3)},
		{"no relay", ok, "http://127.0.0.1:1", exitFailure, "", "is the relay running?"},
	} {
		stdout, stderr, code := runCLI(t, tc.stdin, "send", "--relay", tc.relay, "--retries", "0")
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: send = %d, stdout %q, stderr %q; want %d, %q, %q", tc.name, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	evs, err := r.Store.Log(context.Background(), 0, 100)
	messages := 0
	for _, ev := range evs {
		if ev.Kind == gateway.KindMessage {
			messages++
		}
	}
	if err != nil || messages != 1 {
		t.Errorf("ledger after sending twice: %d messages (%v), want 1", messages, err)
	}
}

// TestInboxBufferedAndDigest: `crosstalk inbox` shows a buffering
// agent's consecutive fragments as one merged row and, for a digest
// agent, the digest instead of the broadcast, in the paged view and in
// --all.
func TestInboxBufferedAndDigest(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agents: testrelay.InjectionAgents})
	a, b, bc := r.Fragments(t)
	until := r.EndHour()
	if _, err := r.Relay.WriteDigests(t.Context(), "claude", until); err != nil { // as the relay's loop does at the hour
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--all"}} {
		args := append([]string{"inbox", "--agent", "claude", "--relay", r.URL, "--json"}, extra...)
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("run(%q) = %d; stderr: %s", args, code, stderr.String())
		}
		var res struct {
			Deliveries []gateway.Delivery `json:"deliveries"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range res.Deliveries {
			row := d.Kind + " " + d.EventID
			for _, f := range d.Fragments {
				row += " " + f.EventID
			}
			if d.Digest != nil {
				row += " of " + strings.Join(d.Digest.Entries[0].EventIDs, " ")
			}
			got = append(got, row)
		}
		digest := ""
		if len(res.Deliveries) == 2 {
			digest = res.Deliveries[1].EventID
		}
		want := []string{"chat.message " + b.ID + " " + a.ID + " " + b.ID, gateway.KindDigest + " " + digest + " of " + bc.ID}
		if !slices.Equal(got, want) {
			t.Errorf("run(%q) deliveries = %q, want %q", args, got, want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inbox", "--agent", "claude", "--relay", r.URL}, strings.NewReader(""), &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), `(2 merged) "first half`) || !strings.Contains(stdout.String(), `"Digest: 1 message(s)`) {
		t.Errorf("inbox table = %q, want the merged row and the digest", stdout.String())
	}
}

// TestUnknownTokenHint: a relay with tokens refuses a command without
// one, or with one it does not know (401); the command says so on
// standard error and names what the user lacks (--token,
// CROSSTALK_TOKEN, minting in the relay's data dir). send printed only
// the ERROR envelope on standard output, nothing on standard error.
func TestUnknownTokenHint(t *testing.T) {
	r := startTestRelay(t, t.TempDir(), func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "a-token-of-claude-0123", Principal: "claude"}}
	})
	ok := testrelay.Envelope("CLAUDE", "CHATGPT", envelope.IntentRequest, "deploy", "Is the deploy blocked?")
	t.Setenv("CROSSTALK_TOKEN", "")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"send without a token", ok, []string{"send", "--retries", "0"}},
		{"send with a wrong token", ok, []string{"send", "--retries", "0", "--token", "not-a-token-of-this-relay"}},
		{"log with a wrong token", "", []string{"log", "--token", "not-a-token-of-this-relay"}},
		{"inbox without a token", "", []string{"inbox", "--agent", "claude"}},
	} {
		args := append(tc.args, "--relay", r.url)
		_, stderr, code := runCLI(t, tc.stdin, args...)
		if code != exitFailure || !strings.Contains(stderr, "bearer token") || !strings.Contains(stderr, "hint: ") ||
			!strings.Contains(stderr, "--token") || !strings.Contains(stderr, "CROSSTALK_TOKEN") {
			t.Errorf("%s: exit %d, stderr %q; want %d and the refusal with a hint naming --token and CROSSTALK_TOKEN", tc.name, code, stderr, exitFailure)
		}
	}
	if _, stderr, code := runCLI(t, ok, "send", "--relay", r.url, "--token", "a-token-of-claude-0123"); code != exitOK || strings.Contains(stderr, "hint") {
		t.Errorf("send with the right token: exit %d, stderr %q", code, stderr)
	}
}
