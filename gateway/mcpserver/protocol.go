package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
)

type handoffIn struct {
	To             string `json:"to" jsonschema:"the one agent taking the work over"`
	Subject        string `json:"subject" jsonschema:"what is handed off"`
	Summary        string `json:"summary" jsonschema:"where the work stands"`
	NextAction     string `json:"nextAction" jsonschema:"what the addressee does next"`
	Body           string `json:"body,omitempty" jsonschema:"message text (default: the summary)"`
	Context        string `json:"context,omitempty" jsonschema:"topic; the relay files the message under the group of this context"`
	IdempotencyKey string `json:"idempotencyKey,omitempty" jsonschema:"stable key for this handoff; reuse it on every retry"`
}

// handoff sends a BeadBoard HANDOFF (§6.2): the addressee owes an ack.
func (s *server) handoff(ctx context.Context, in handoffIn) (*mcp.CallToolResult, sendOut, error) {
	h := gateway.Handoff{Subject: in.Subject, Summary: in.Summary, NextAction: in.NextAction}
	return s.sendProtocol(ctx, in.To, envelope.IntentHandoff, in.Body, h.Summary, in.Context, in.IdempotencyKey, h.Meta())
}

type blockedIn struct {
	On              string `json:"on" jsonschema:"the one agent you wait on"`
	Subject         string `json:"subject" jsonschema:"what the blocker is about"`
	Blocker         string `json:"blocker" jsonschema:"what blocks you"`
	RequestedAction string `json:"requestedAction" jsonschema:"what you ask the addressee to do"`
	Urgency         string `json:"urgency" jsonschema:"low, medium or high"`
	Body            string `json:"body,omitempty" jsonschema:"message text (default: the blocker)"`
	Context         string `json:"context,omitempty" jsonschema:"topic; the relay files the message under the group of this context"`
	IdempotencyKey  string `json:"idempotencyKey,omitempty" jsonschema:"stable key for this blocker; reuse it on every retry"`
}

// blocked sends a BeadBoard BLOCKED (§6.2): the addressee owes an ack,
// and its resolve notifies this agent.
func (s *server) blocked(ctx context.Context, in blockedIn) (*mcp.CallToolResult, sendOut, error) {
	b := gateway.Blocked{Subject: in.Subject, Blocker: in.Blocker, RequestedAction: in.RequestedAction, Urgency: in.Urgency}
	return s.sendProtocol(ctx, in.On, envelope.IntentRequest, in.Body, b.Blocker, in.Context, in.IdempotencyKey, b.Meta())
}

func (s *server) sendProtocol(ctx context.Context, to, intent, body, def, topic, key string, m envelope.Meta) (*mcp.CallToolResult, sendOut, error) {
	to = strings.TrimSpace(to)
	if to == "" || envelope.IsBroadcast(to) || strings.HasPrefix(to, "@") {
		return nil, sendOut{}, fmt.Errorf("a %s names one agent, not %q", m.Namespace, to)
	}
	if strings.TrimSpace(body) == "" {
		body = def
	}
	o := c2a.Outbound{From: s.opts.Agent, To: to, Directedness: attention.ToMe, Intent: intent, Body: body, Context: topic,
		IdempotencyKey: key, Meta: []envelope.Meta{m}}
	return s.sendOutbound(ctx, o, false)
}

type forwardIn struct {
	EventID        string `json:"eventId" jsonschema:"the message delivered to you that you forward"`
	ToGroup        string `json:"toGroup" jsonschema:"the destination group (its context, as chat.send_message's context)"`
	Summary        string `json:"summary,omitempty" jsonschema:"forward this summary instead of the original text; the message says it is one"`
	To             string `json:"to,omitempty" jsonschema:"one agent in the destination group (default: everyone, as a BROADCAST)"`
	IdempotencyKey string `json:"idempotencyKey,omitempty" jsonschema:"stable key for this forward; reuse it on every retry"`
}

// forward appends a message delivered to this agent to another group with
// its provenance (CCCS §9.1): verbatim, or a summary that says so.
func (s *server) forward(ctx context.Context, in forwardIn) (*mcp.CallToolResult, sendOut, error) {
	d, err := s.delivered(ctx, "", in.EventID)
	if err != nil {
		return nil, sendOut{}, err
	}
	switch {
	case d.Kind != gateway.KindMessage:
		return nil, sendOut{}, fmt.Errorf("event %s is a %s; only a chat.message is forwarded", d.EventID, d.Kind)
	case d.Directedness == attention.ToOther:
		// As the relay's POST /v1/forward: only what was addressed to you.
		return nil, sendOut{}, fmt.Errorf("event %s is addressed to others; you may not forward it", d.EventID)
	}
	if strings.TrimSpace(in.ToGroup) == "" || in.ToGroup == d.Group {
		return nil, sendOut{}, errors.New("toGroup must name another group than the event's own")
	}
	if d, err = s.pull(ctx, d); err != nil {
		return nil, sendOut{}, err
	}
	o := c2a.Outbound{From: s.opts.Agent, To: "ALL", Directedness: attention.Ambient, Intent: envelope.IntentBroadcast,
		Body: d.Content, Context: in.ToGroup, IdempotencyKey: in.IdempotencyKey}
	if to := strings.TrimSpace(in.To); to != "" {
		o.To, o.Directedness, o.Intent = to, attention.ToMe, envelope.IntentRequest
	}
	summary := strings.TrimSpace(in.Summary)
	if summary != "" {
		o.Body = gateway.SummaryPrefix + summary
	}
	o.Meta = []envelope.Meta{gateway.ProvenanceMeta(d.Group, d.EventID, summary != "")}
	return s.sendOutbound(ctx, o, false)
}
