package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestHandoffBlockedForward runs `crosstalk handoff`, `blocked`, `ack` and
// `forward` against an in-process relay: the events carry BeadBoard §6.2's
// fields and CCCS §9's provenance, the addressee's ack settles a handoff
// for both sides, and bad flags are usage errors.
func TestHandoffBlockedForward(t *testing.T) {
	r := testrelay.Start(t, nil)
	cli := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{args[0], "--relay", r.URL}, args[1:]...)
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != want {
			t.Fatalf("run(%q) = %d, want %d; stdout %s stderr %s", args, code, want, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	result := func(out string) api.Result {
		t.Helper()
		var ans struct{ Results []api.Result }
		if err := json.Unmarshal([]byte(out), &ans); err != nil || len(ans.Results) != 1 {
			t.Fatalf("answer %q: %v", out, err)
		}
		return ans.Results[0]
	}
	h := result(cli(exitOK, "handoff", "--agent", "claude", "--to", "chatgpt", "--group", "deploy", "--subject", "auth", "--summary", "half done", "--next-action", "finish the refresh path", "--json"))
	ev, err := r.Relay.Store().Get(t.Context(), h.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := gateway.ParseData(ev); d.Protocol == nil || d.Protocol.NextAction != "finish the refresh path" || d.Text != "half done" || ev.GroupID != "deploy" {
		t.Errorf("handoff event = %+v %q in %s", d.Protocol, d.Text, ev.GroupID)
	}
	if out := cli(exitOK, "inbox", "--agent", "claude", "--waiting"); !strings.Contains(out, "Passed to chatgpt") {
		t.Errorf("author's waiting = %q, want Passed to chatgpt", out)
	}
	if out := cli(exitOK, "inbox", "--agent", "chatgpt", "--owe"); !strings.Contains(out, `Passed to: "auth"`) {
		t.Errorf("addressee's owe = %q, want the handoff labelled", out)
	}
	cli(exitOK, "ack", "--agent", "chatgpt", "--group", "deploy", h.EventID)
	if out := cli(exitOK, "inbox", "--agent", "claude", "--waiting"); !strings.Contains(out, "waiting on nothing") {
		t.Errorf("author's waiting after the ack = %q", out)
	}

	out := cli(exitOK, "blocked", "--agent", "chatgpt", "--on", "claude", "--group", "deploy", "--subject", "db", "--blocker", "no credentials", "--requested-action", "share them", "--urgency", "high")
	if !strings.Contains(out, "blocked on claude: recorded as event") {
		t.Errorf("blocked = %q", out)
	}
	if out := cli(exitOK, "inbox", "--agent", "chatgpt", "--waiting"); !strings.Contains(out, "Needs input claude") || !strings.Contains(out, "halted") {
		t.Errorf("blocked agent's waiting = %q", out)
	}
	cli(exitUsage, "blocked", "--agent", "chatgpt", "--on", "claude", "--subject", "db", "--blocker", "b", "--requested-action", "r", "--urgency", "urgent")
	cli(exitUsage, "handoff", "--agent", "claude", "--to", "chatgpt", "--subject", "s")

	src := r.Send(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "review the checklist", "deploy", "")
	f := result(cli(exitOK, "forward", "--agent", "chatgpt", "--to-group", "release", "--summary", "checklist", "--json", src.ID))
	fe, err := r.Relay.Store().Get(t.Context(), f.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := gateway.ParseData(fe); fe.GroupID != "release" || d.SrcGroupID != "deploy" || d.SrcEventID != src.ID || !d.Summarized {
		t.Errorf("forwarded = %s %+v", fe.GroupID, d.Provenance)
	}
	cli(exitFailure, "forward", "--agent", "gemini", "--to-group", "release", src.ID) // never shown it
	cli(exitUsage, "forward", "--agent", "chatgpt", src.ID)
}
