package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/client"
)

var cmdHandoff = &command{
	name:    "handoff",
	args:    "--agent A --to B [--group G] --subject S --summary TEXT --next-action TEXT [--body TEXT] [--json]",
	summary: "pass work to another agent (a HANDOFF it must acknowledge)",
	run:     runHandoff,
}

var cmdBlocked = &command{
	name:    "blocked",
	args:    "--agent A --on B [--group G] --subject S --blocker TEXT --requested-action TEXT --urgency low|medium|high [--body TEXT] [--json]",
	summary: "tell an agent you are blocked on it (a BLOCKED it must acknowledge)",
	run:     runBlocked,
}

var cmdForward = &command{
	name:    "forward",
	args:    "--agent A --to-group G [--summary TEXT] [--to B] [--json] EVENT-ID",
	summary: "forward a message into another group, with its provenance",
	run:     runForward,
}

func runHandoff(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Handoff sends a HANDOFF from the agent to another (BeadBoard §6.2, shown as
"Passed to"): what the work is (--subject), where it stands (--summary) and what
to do next (--next-action). The addressee owes an acknowledgement
(crosstalk ack) until it gives one; the author sees it in
crosstalk inbox --waiting until then, and may withdraw it with
crosstalk discharge (docs/agents.md "Handoff and blocked").`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` handing off (required)")
	to := fs.String("to", "", "agent `name` taking over (required)")
	group := fs.String("group", "", "group (envelope context; default group when empty)")
	var h gateway.Handoff
	fs.StringVar(&h.Subject, "subject", "", "what is handed off (required)")
	fs.StringVar(&h.Summary, "summary", "", "where the work stands (required)")
	fs.StringVar(&h.NextAction, "next-action", "", "what the addressee does next (required)")
	body := fs.String("body", "", "message body (default: the summary)")
	asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		return usagef("handoff: unexpected argument %q", rest[0])
	}
	if *agent == "" || *to == "" || h.Subject == "" || h.Summary == "" || h.NextAction == "" {
		return usagef("handoff: want --agent A --to B --subject S --summary TEXT --next-action TEXT")
	}
	req := gateway.SendRequest{From: *agent, To: *to, Context: *group, Body: cmp.Or(*body, h.Summary), Handoff: &h}
	return sendProtocol(ctx, e, rf, *agent, "handoff to "+*to, req, *asJSON)
}

func runBlocked(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Blocked sends a BLOCKED from the agent to the one it waits on (BeadBoard §6.2,
shown as "Needs input"): what it is about (--subject), what blocks it
(--blocker), what it asks for (--requested-action) and how urgent it is. The
addressee owes an acknowledgement (crosstalk ack); when it resolves the blocker
(the resolve action, or a CLOSE answering it) the relay notifies the blocked
agent with a system.notify "unblocked" (docs/agents.md "Handoff and blocked").`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` that is blocked (required)")
	on := fs.String("on", "", "agent `name` it waits on (required)")
	group := fs.String("group", "", "group (envelope context; default group when empty)")
	var b gateway.Blocked
	fs.StringVar(&b.Subject, "subject", "", "what the blocker is about (required)")
	fs.StringVar(&b.Blocker, "blocker", "", "what blocks the agent (required)")
	fs.StringVar(&b.RequestedAction, "requested-action", "", "what the addressee should do (required)")
	fs.StringVar(&b.Urgency, "urgency", "", "low, medium or high (required)")
	body := fs.String("body", "", "message body (default: the blocker)")
	asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		return usagef("blocked: unexpected argument %q", rest[0])
	}
	if *agent == "" || *on == "" || b.Subject == "" || b.Blocker == "" || b.RequestedAction == "" || b.Urgency == "" {
		return usagef("blocked: want --agent A --on B --subject S --blocker TEXT --requested-action TEXT --urgency low|medium|high")
	}
	if !gateway.ValidUrgency(b.Urgency) {
		return usagef("blocked: --urgency %q is not low, medium or high", b.Urgency)
	}
	req := gateway.SendRequest{From: *agent, To: *on, Context: *group, Body: cmp.Or(*body, b.Blocker), Blocked: &b}
	return sendProtocol(ctx, e, rf, *agent, "blocked on "+*on, req, *asJSON)
}

func runForward(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Forward appends the message EVENT-ID to another group as a chat.message by the
agent carrying src_group_id and src_event_id (CCCS §9.1): the source group is
found from the event id. The text is the original, verbatim, unless --summary
replaces it; the message then starts "[Summarized] " and says so
(data.summarized). The agent must have been shown the event.`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` forwarding (required)")
	var req gateway.ForwardRequest
	fs.StringVar(&req.ToGroup, "to-group", "", "destination `group` (required)")
	fs.StringVar(&req.Summary, "summary", "", "forward this summary instead of the original text")
	fs.StringVar(&req.To, "to", "", "addressee in the destination group (default: everyone, as a BROADCAST)")
	asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *agent == "" || req.ToGroup == "" {
		return usagef("forward: want --agent A --to-group G EVENT-ID")
	}
	if req.To != "" {
		req.Intent = envelope.IntentRequest
	}
	req.EventID, req.Message = pos[0], envelope.NewID()
	return postSend(ctx, e, rf, "/v1/forward", *agent, "forwarded "+pos[0], req, *asJSON)
}

// sendProtocol posts req to POST /v1/send with a fresh message id, so a
// retry records once.
func sendProtocol(ctx context.Context, e *env, rf relayFlags, agent, what string, req gateway.SendRequest, asJSON bool) error {
	req.Message = envelope.NewID()
	return postSend(ctx, e, rf, "/v1/send", agent, what, req, asJSON)
}

// postSend posts body to path and prints the one result.
func postSend(ctx context.Context, e *env, rf relayFlags, path, agent, what string, body any, asJSON bool) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var ans struct {
		Results []api.Result `json:"results"`
	}
	// The message id makes a retry a duplicate, so even a POST is retried.
	if err := rf.call(ctx, client.Request{Method: http.MethodPost, Path: path, Agent: agent, Body: b, Retry: true}, &ans); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(ans)
	}
	for _, r := range ans.Results {
		if r.Error != nil {
			fmt.Fprintf(e.stdout, "%s: refused: %s %s\n", what, r.Error.Code, r.Error.Message)
			return failedError{}
		}
		dup := ""
		if r.Duplicate {
			dup = " — already recorded before"
		}
		fmt.Fprintf(e.stdout, "%s: recorded as event %s in group %s (seq %d)%s\n", what, r.EventID, r.GroupID, r.Seq, dup)
	}
	return nil
}
