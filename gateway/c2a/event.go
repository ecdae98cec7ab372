package c2a

import (
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// ProtocolVersion is the C2A draft this package implements.
const ProtocolVersion = "2026-06-02"

// Event is the params of a C2A `chat/deliver` request (C2A "Event
// Envelope"), with the Crosstalk specifics under Crosstalk.
type Event struct {
	// EventID is the ledger event id: stable across redeliveries.
	EventID      string       `json:"eventId"`
	Source       Source       `json:"source"`
	Conversation Conversation `json:"conversation"`
	Author       Author       `json:"author"`
	Target       Target       `json:"target"`
	// Content holds the message parts; empty when the event is only a
	// knock (injection notify): the agent pulls it with chat.read_thread.
	Content     []Content   `json:"content,omitempty"`
	Knock       *Knock      `json:"knock,omitempty"`
	Timing      Timing      `json:"timing"`
	Attention   Attention   `json:"attention"`
	Injection   Injection   `json:"injection"`
	Reliability Reliability `json:"reliability"`
	Crosstalk   Crosstalk   `json:"crosstalk"`
}

// Source says where the event comes from.
type Source struct {
	Platform    string `json:"platform"`    // always "crosstalk"
	WorkspaceID string `json:"workspaceId"` // the ledger group
}

// Conversation is where the event was said.
type Conversation struct {
	ID string `json:"id"` // the ledger group
	// Kind is dm (to this agent alone), thread (a reply in a thread),
	// channel (anything else) or system (relay notices).
	Kind     string `json:"kind"`
	StreamID string `json:"streamId,omitempty"` // the envelope context
	ThreadID string `json:"threadId,omitempty"` // the envelope thread
}

// Author is who wrote the event.
type Author struct {
	ID          string `json:"id"`   // actor id
	Kind        string `json:"kind"` // human (the user), agent or system
	DisplayName string `json:"displayName,omitempty"`
}

// Target says whom the event is aimed at.
type Target struct {
	Mentions     []string               `json:"mentions,omitempty"`  // recipient tokens
	Recipient    string                 `json:"recipient,omitempty"` // this agent
	Directedness attention.Directedness `json:"directedness"`
}

// Content is one typed message part.
type Content struct {
	Type string `json:"type"` // always "text"
	Text string `json:"text"`
}

// Knock is what a notify injection shows instead of the content (C2A
// "notify"): it never holds body text.
type Knock struct {
	From         string                 `json:"from"`
	Where        string                 `json:"where"`
	Directedness attention.Directedness `json:"directedness"`
	Policy       attention.Policy       `json:"policy"`
	Priority     string                 `json:"priority"`
	Topic        string                 `json:"topic"`
	PullWith     string                 `json:"pullWith"`
}

// Timing is when the event happened and where it sits in its group.
type Timing struct {
	CreatedAt string `json:"createdAt"`
	Sequence  int64  `json:"sequence"`
}

// Attention is the response rule (C2A "Response Policy").
type Attention struct {
	Policy   attention.Policy `json:"policy"`
	Reason   attention.Reason `json:"reason"`
	Priority string           `json:"priority"`
	// DeadlineMs is how long from now the event stays fresh; 0 when it
	// has no deadline.
	DeadlineMs int64 `json:"deadlineMs,omitempty"`
	Expired    bool  `json:"expired,omitempty"`
}

// Injection is how the event may become model-visible (C2A "Injection
// Modes").
type Injection struct {
	Mode attention.Injection `json:"mode"`
	// Context is "thread_window" when the harness should inject the
	// thread around the event, else "event".
	Context string `json:"context"`
	Role    string `json:"role"` // always "user": chat is never system text
}

// Reliability carries the redelivery bookkeeping (C2A "Reliability").
type Reliability struct {
	Attempt        int    `json:"attempt"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// Crosstalk holds what C2A has no field for.
type Crosstalk struct {
	Group        string `json:"group"`
	Seq          int64  `json:"seq"`
	Kind         string `json:"kind"`
	Intent       string `json:"intent,omitempty"`
	Message      string `json:"message,omitempty"` // envelope message id: the parent of a reply
	Verification string `json:"verification,omitempty"`
	Acked        bool   `json:"acked,omitempty"`
	ClaimedBy    string `json:"claimedBy,omitempty"`
	// Discharged reports a discharged obligation; Discharges is set on
	// the update that tells of the discharge: the obligation's event id
	// (docs/agents.md "Streams learn of discharges").
	Discharged bool   `json:"discharged,omitempty"`
	Discharges string `json:"discharges,omitempty"`
	// Prompt is the event in the C2A prompt injection format (Render).
	Prompt string `json:"prompt"`
	// Fragments lists the events a buffered delivery merged, oldest
	// first (one Content part each); EventID is the last. Acknowledging
	// the delivery acknowledges them all.
	Fragments []string `json:"fragments,omitempty"`
	// Digest is a digest event's summary (counts, authors, topics, the
	// event ids to pull the bodies with).
	Digest *gateway.Digest `json:"digest,omitempty"`
}

// FromDelivery builds the C2A event of d for attempt (1 for the first
// delivery). now sets deadlineMs.
func FromDelivery(d gateway.Delivery, attempt int, now time.Time) Event {
	ev := Event{
		EventID: d.EventID,
		Source:  Source{Platform: "crosstalk", WorkspaceID: d.Group},
		Conversation: Conversation{
			ID: d.Group, Kind: conversationKind(d), StreamID: d.Context, ThreadID: d.Thread,
		},
		Author: Author{ID: d.From, Kind: authorKind(d.From, d.Kind), DisplayName: d.From},
		Target: Target{Mentions: d.To, Recipient: d.Agent, Directedness: d.Directedness},
		Timing: Timing{CreatedAt: d.TS, Sequence: d.Seq},
		Attention: Attention{
			Policy: d.Policy, Reason: d.Reason, Priority: d.Priority, Expired: d.Expired,
		},
		Injection:   Injection{Mode: d.Injection, Context: "event", Role: "user"},
		Reliability: Reliability{Attempt: attempt, IdempotencyKey: d.IdempotencyKey},
		Crosstalk: Crosstalk{
			Group: d.Group, Seq: d.Seq, Kind: d.Kind, Intent: d.Intent, Message: d.MessageID,
			Verification: d.Verification, Acked: d.Acked, ClaimedBy: d.ClaimedBy,
			Discharged: d.Discharged, Discharges: d.Discharges,
		},
	}
	if ev.Reliability.IdempotencyKey == "" {
		ev.Reliability.IdempotencyKey = d.EventID + ":" + d.Agent
	}
	if d.ThreadContext {
		ev.Injection.Context = "thread_window"
	}
	if !d.Deadline.IsZero() && !d.Expired {
		if ms := d.Deadline.Sub(now).Milliseconds(); ms > 0 {
			ev.Attention.DeadlineMs = ms
		}
	}
	if k := d.Knock; k != nil {
		ev.Knock = &Knock{From: k.From, Where: k.Where, Directedness: k.Directedness, Policy: k.Policy,
			Priority: k.Priority, Topic: k.Topic, PullWith: k.PullWith}
	} else if len(d.Fragments) > 0 {
		for _, f := range d.Fragments {
			ev.Content = append(ev.Content, Content{Type: "text", Text: f.Content})
		}
	} else if d.Content != "" {
		ev.Content = []Content{{Type: "text", Text: d.Content}}
	}
	for _, f := range d.Fragments {
		ev.Crosstalk.Fragments = append(ev.Crosstalk.Fragments, f.EventID)
	}
	ev.Crosstalk.Digest = d.Digest
	ev.Crosstalk.Prompt = Render(d)
	return ev
}

func conversationKind(d gateway.Delivery) string {
	switch {
	case d.Kind == gateway.KindNotify, d.Kind == gateway.KindDigest:
		return "system"
	case d.Directedness == attention.ToMe && d.Reason == attention.ReasonDirectMessage:
		return "dm"
	case d.Thread != "" && d.Reason == attention.ReasonThreadParticipant:
		return "thread"
	}
	return "channel"
}

func authorKind(from, kind string) string {
	switch {
	case strings.EqualFold(from, "user"), strings.HasPrefix(from, "human://"):
		return "human"
	case strings.EqualFold(from, "system"), kind == gateway.KindNotify:
		return "system"
	}
	return "agent"
}
