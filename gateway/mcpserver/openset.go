package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
)

// defaultOpenSetLimit is the page of chat.owe and chat.waiting when the
// call names none.
const defaultOpenSetLimit = 50

// obligationView is o as the chat tools show it; nil for none.
func obligationView(o *attention.Obligation) *c2a.OutboundObligation {
	if o == nil {
		return nil
	}
	v := &c2a.OutboundObligation{Blocks: string(o.Blocks), DefaultAction: o.DefaultAction, Delegate: o.Delegate}
	if !o.Deadline.IsZero() {
		v.Deadline = o.Deadline.UTC().Format(time.RFC3339)
	}
	return v
}

type openSetIn struct {
	All   bool   `json:"all,omitempty" jsonschema:"also list what is settled (hidden by default)"`
	After string `json:"after,omitempty" jsonschema:"the next of the page before: start after this event id"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 50)"`
}

func (in openSetIn) query() gateway.OpenSetQuery {
	q := gateway.OpenSetQuery{All: in.All, After: in.After, Limit: in.Limit}
	if q.Limit <= 0 {
		q.Limit = defaultOpenSetLimit
	}
	return q
}

type oweOut struct {
	Agent string      `json:"agent"`
	Owe   []EventView `json:"owe"`
	// Next, when set, is the after of the following page.
	Next string `json:"next,omitempty"`
}

// owe is chat.owe: a page of what the agent owes (gateway.Relay.Owed).
func (s *server) owe(ctx context.Context, in openSetIn) (*mcp.CallToolResult, oweOut, error) {
	out := oweOut{Agent: s.opts.Agent, Owe: []EventView{}}
	p, err := s.opts.Backend.Owed(ctx, s.opts.Agent, in.query())
	if err != nil {
		return nil, out, err
	}
	for _, d := range p.Items {
		out.Owe = append(out.Owe, view(d))
	}
	out.Next = p.Next
	if len(p.Items) == 0 {
		return textResult(s.opts.Agent + " owes nothing"), out, nil
	}
	text := fmt.Sprintf("%s owes %d item(s)%s\n\n%s", s.opts.Agent, len(p.Items), more(p.Next), c2a.RenderAll(p.Items))
	return textResult(text), out, nil
}

// WaitingView is one obligation the agent waits on, as chat.waiting
// shows it.
type WaitingView struct {
	EventID    string                  `json:"eventId"`
	Group      string                  `json:"group"`
	Seq        int64                   `json:"seq"`
	MessageID  string                  `json:"messageId,omitempty"`
	To         []string                `json:"to,omitempty"`
	TS         string                  `json:"ts"`
	Obligation *c2a.OutboundObligation `json:"obligation"`
	// Evidence is who answered so far: for you to judge, not discharge.
	Evidence []string `json:"evidence,omitempty"`
	Lapsed   bool     `json:"lapsed,omitempty"`
	// DischargedBy is who discharged it (listed with all only).
	DischargedBy string `json:"dischargedBy,omitempty"`
	// Rung is how far its returns and escalation have gone (0: not yet
	// returned); EscalatedTo is coordinator or human once escalated.
	Rung        int    `json:"rung,omitempty"`
	EscalatedTo string `json:"escalatedTo,omitempty"`
}

type waitingOut struct {
	Agent   string        `json:"agent"`
	Waiting []WaitingView `json:"waiting"`
	// Next, when set, is the after of the following page.
	Next string `json:"next,omitempty"`
}

// waiting is chat.waiting: a page of the obligations the agent waits on
// (gateway.Relay.WaitingOn).
func (s *server) waiting(ctx context.Context, in openSetIn) (*mcp.CallToolResult, waitingOut, error) {
	out := waitingOut{Agent: s.opts.Agent, Waiting: []WaitingView{}}
	p, err := s.opts.Backend.WaitingOn(ctx, s.opts.Agent, in.query())
	if err != nil {
		return nil, out, err
	}
	if len(p.Items) == 0 {
		return textResult(s.opts.Agent + " waits on nothing"), out, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s waits on %d obligation(s)%s", s.opts.Agent, len(p.Items), more(p.Next))
	for _, w := range p.Items {
		v := WaitingView{EventID: w.EventID, Group: w.Group, Seq: w.Seq, MessageID: w.MessageID, To: w.To, TS: w.TS,
			Obligation: obligationView(&w.Obligation), Evidence: w.Evidence, Lapsed: w.Lapsed, DischargedBy: w.DischargedBy,
			Rung: w.Rung, EscalatedTo: w.EscalatedTo}
		out.Waiting = append(out.Waiting, v)
		state := "open"
		switch {
		case w.DischargedBy != "":
			state = "discharged by " + w.DischargedBy
		case w.Lapsed:
			state = "open, deadline passed"
		}
		answered := "nobody yet"
		if len(w.Evidence) > 0 {
			answered = strings.Join(w.Evidence, ", ")
		}
		// Names and the default action are other parties' words: quoted.
		fmt.Fprintf(&b, "\n- event_id %s (group %q, seq %d) to %q, blocks %s, default action %q, answered by: %s; %s",
			w.EventID, w.Group, w.Seq, strings.Join(w.To, ", "), w.Obligation.Blocks, w.Obligation.DefaultAction, answered, state)
	}
	out.Next = p.Next
	return textResult(b.String()), out, nil
}

// more tells the model that a page has a next one.
func more(next string) string {
	if next == "" {
		return ""
	}
	return " (more: call again with after " + next + ")"
}
