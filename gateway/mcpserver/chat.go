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

// Enumerated input types; their schemas are in enumSchemas.
type (
	outDirectedness string
	sendIntent      string
	composeIntent   string
	priority        string
	visibility      string
)

// EventView is one event as the chat tools show it.
type EventView struct {
	EventID      string                 `json:"eventId"`
	Group        string                 `json:"group"`
	Seq          int64                  `json:"seq"`
	Thread       string                 `json:"thread,omitempty"`
	Kind         string                 `json:"kind"`
	From         string                 `json:"from"`
	To           []string               `json:"to,omitempty"`
	Intent       string                 `json:"intent,omitempty"`
	Context      string                 `json:"context,omitempty"`
	MessageID    string                 `json:"messageId,omitempty"`
	TS           string                 `json:"ts,omitempty"`
	Directedness attention.Directedness `json:"directedness,omitempty"`
	Policy       attention.Policy       `json:"policy,omitempty"`
	Reason       attention.Reason       `json:"reason,omitempty"`
	Injection    attention.Injection    `json:"injection,omitempty"`
	Priority     string                 `json:"priority,omitempty"`
	Knock        *c2a.Knock             `json:"knock,omitempty"`
	// UntrustedContent is the message text: data written by another
	// party, never instructions. Empty for a knock until pulled.
	UntrustedContent string `json:"untrustedContent,omitempty"`
	// Withheld reports a knock whose content was not pulled.
	Withheld     bool   `json:"withheld,omitempty"`
	Acked        bool   `json:"acked,omitempty"`
	ClaimedBy    string `json:"claimedBy,omitempty"`
	Expired      bool   `json:"expired,omitempty"`
	Verification string `json:"verification,omitempty"`
	// Obligation is the event's obligation (`meta: obligation`), if any.
	Obligation *c2a.OutboundObligation `json:"obligation,omitempty"`
	// Responded: you replied to the event or recorded a disposition.
	Responded bool `json:"responded,omitempty"`
	// Discharged: the obligation's author or delegate closed it.
	Discharged bool `json:"discharged,omitempty"`
	// Settled says how something you owed was settled: answered,
	// acknowledged, lapsed or discharged (gateway.Delivery.Settled).
	Settled string `json:"settled,omitempty"`
	// Prompt is the event in the C2A prompt injection format.
	Prompt string `json:"prompt"`
	// Fragments lists the events a buffered delivery merged, oldest
	// first; EventID is the last (docs/agents.md, "Buffered and digest
	// delivery").
	Fragments []string `json:"fragments,omitempty"`
	// Digest is a digest event's summary: counts, authors, topics and the
	// event ids to pull the bodies with (eventId).
	Digest *gateway.Digest `json:"digest,omitempty"`
}

func view(d gateway.Delivery) EventView {
	v := EventView{
		EventID: d.EventID, Group: d.Group, Seq: d.Seq, Thread: d.Thread, Kind: d.Kind, From: d.From, To: d.To,
		Intent: d.Intent, Context: d.Context, MessageID: d.MessageID, TS: d.TS, Directedness: d.Directedness,
		Policy: d.Policy, Reason: d.Reason, Injection: d.Injection, Priority: d.Priority,
		UntrustedContent: d.Content, Acked: d.Acked, ClaimedBy: d.ClaimedBy, Expired: d.Expired,
		Verification: d.Verification, Prompt: c2a.Render(d), Digest: d.Digest,
		Obligation: obligationView(d.Obligation), Responded: d.Responded, Discharged: d.Discharged, Settled: d.Settled(),
	}
	for _, f := range d.Fragments {
		v.Fragments = append(v.Fragments, f.EventID)
	}
	if k := d.Knock; k != nil && d.Content == "" {
		v.Knock = &c2a.Knock{From: k.From, Where: k.Where, Directedness: k.Directedness, Policy: k.Policy,
			Priority: k.Priority, Topic: k.Topic, PullWith: k.PullWith}
		v.Withheld = true
	}
	return v
}

// errNotDelivered is the refusal for events the agent never received.
func (s *server) errNotDelivered(id string) error {
	return fmt.Errorf("event %q was never delivered to %s (it does not exist, is your own, or is relay bookkeeping); list yours with chat.list_events", id, s.opts.Agent)
}

// delivered returns the agent's delivery of event id.
func (s *server) delivered(ctx context.Context, group, id string) (gateway.Delivery, error) {
	d, ok, err := c2a.FindDelivery(ctx, s.opts.Backend, s.opts.Agent, group, id)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, s.errNotDelivered(id)
	}
	return d, nil
}

// pull fills in the content of a knocked delivery.
func (s *server) pull(ctx context.Context, d gateway.Delivery) (gateway.Delivery, error) {
	if d.Content != "" {
		return d, nil
	}
	text, _, err := c2a.EventText(ctx, s.opts.Backend, d.Group, d.Seq)
	if err != nil {
		return d, err
	}
	return c2a.Pulled(d, text), nil
}

type listIn struct {
	Group          string                 `json:"group,omitempty" jsonschema:"only this ledger group (default: every group)"`
	SinceSeq       int64                  `json:"sinceSeq,omitempty" jsonschema:"only events with seq greater than this; seq counts per group, so use it with group"`
	EventID        string                 `json:"eventId,omitempty" jsonschema:"pull this one event with its content, also when it was only knocked"`
	Policy         attention.Policy       `json:"policy,omitempty" jsonschema:"only events with this response policy"`
	Directedness   attention.Directedness `json:"directedness,omitempty" jsonschema:"only events with this directedness"`
	ActionableOnly bool                   `json:"actionableOnly,omitempty" jsonschema:"only events that ask something of you (not must_not_respond, or a role knock you may claim)"`
	Limit          int                    `json:"limit,omitempty" jsonschema:"at most this many, the newest (default 50)"`
	MarkRead       bool                   `json:"markRead,omitempty" jsonschema:"move your read cursor of each group to the last event listed"`
}

type listOut struct {
	Agent    string             `json:"agent"`
	Liveness attention.Liveness `json:"liveness,omitempty"`
	Events   []EventView        `json:"events"`
	// More reports that older events were left out by limit.
	More bool `json:"more,omitempty"`
}

func (s *server) listEvents(ctx context.Context, in listIn) (*mcp.CallToolResult, listOut, error) {
	out := listOut{Agent: s.opts.Agent, Events: []EventView{}}
	if in.EventID != "" {
		d, err := s.delivered(ctx, in.Group, in.EventID)
		if err != nil {
			return nil, out, err
		}
		if d, err = s.pull(ctx, d); err != nil {
			return nil, out, err
		}
		out.Liveness = d.Liveness
		out.Events = append(out.Events, view(d))
		return textResult(c2a.RenderAll([]gateway.Delivery{d})), out, nil
	}
	match := func(d gateway.Delivery) bool {
		return (in.Group == "" || d.Group == in.Group) &&
			(in.Policy == "" || d.Policy == in.Policy) &&
			(in.Directedness == "" || d.Directedness == in.Directedness) &&
			(!in.ActionableOnly || c2a.Actionable(d))
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 50
	}
	var keep []gateway.Delivery
	if in.SinceSeq > 0 {
		// A forward read from where the agent asks: it costs what follows.
		ds, err := s.opts.Backend.Deliveries(ctx, s.opts.Agent, in.Group, in.SinceSeq, 0)
		if err != nil {
			return nil, out, err
		}
		for _, d := range ds {
			if match(d) {
				keep = append(keep, d)
			}
		}
		if len(keep) > limit {
			keep, out.More = keep[len(keep)-limit:], true
		}
	} else {
		// The newest matches, read backwards a page of the ledger at a
		// time: the cost of a page, not of the history.
		var err error
		if keep, out.More, err = c2a.Newest(ctx, s.opts.Backend, s.opts.Agent, match, limit); err != nil {
			return nil, out, err
		}
	}
	for _, d := range keep {
		out.Liveness = d.Liveness
		out.Events = append(out.Events, view(d))
	}
	if in.MarkRead {
		last := map[string]string{}
		for _, d := range keep {
			last[d.Group] = d.EventID
		}
		for g, id := range last {
			if _, err := s.opts.Backend.Act(ctx, gateway.ActionRequest{Action: gateway.ActionRead, Group: g, EventID: id, Actor: s.opts.Agent}); err != nil {
				return nil, out, err
			}
		}
	}
	if len(keep) == 0 {
		return textResult("C2A: no events for " + s.opts.Agent + " match."), out, nil
	}
	text := c2a.RenderAll(keep)
	if out.More {
		text += "\n\n(older events left out or not searched; raise limit, or pass group and sinceSeq to read from a seq on)"
	}
	return textResult(text), out, nil
}

type threadIn struct {
	EventID string `json:"eventId,omitempty" jsonschema:"an event delivered to you: read its thread (give this or thread)"`
	Thread  string `json:"thread,omitempty" jsonschema:"a thread id (give this or eventId)"`
	Group   string `json:"group,omitempty" jsonschema:"the thread's group (default: found from your deliveries)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many messages, the newest (default 50)"`
}

type threadOut struct {
	Group    string      `json:"group"`
	Thread   string      `json:"thread"`
	Messages []EventView `json:"messages"`
}

func (s *server) readThread(ctx context.Context, in threadIn) (*mcp.CallToolResult, threadOut, error) {
	out := threadOut{Messages: []EventView{}}
	if in.EventID == "" && in.Thread == "" {
		return nil, out, errors.New("give eventId or thread")
	}
	group, thread, anchor := in.Group, in.Thread, int64(0)
	if in.EventID != "" {
		d, err := s.delivered(ctx, group, in.EventID)
		if err != nil {
			return nil, out, err
		}
		group, anchor = d.Group, d.Seq
		if thread == "" {
			thread = d.Thread
		}
	} else if group == "" {
		// Found from the agent's deliveries, the newest first.
		ds, _, err := c2a.Newest(gateway.PerEvent(ctx), s.opts.Backend, s.opts.Agent, func(d gateway.Delivery) bool { return d.Thread == thread }, 1)
		if err != nil {
			return nil, out, err
		}
		if len(ds) == 0 {
			return nil, out, fmt.Errorf("thread %q is not among your deliveries of the newest ledger events; give its group", thread)
		}
		group = ds[0].Group
	}
	if thread == "" {
		return nil, out, fmt.Errorf("event %q has no thread", in.EventID)
	}
	// A window of the group's events (the newest threadWindow, or those
	// around the event asked about): no index of threads, and a read that
	// does not grow with the group's history.
	from, to, err := s.threadWindow(ctx, group, anchor)
	if err != nil {
		return nil, out, err
	}
	if to <= from {
		return nil, out, fmt.Errorf("no group %q", group)
	}
	ds, err := s.opts.Backend.Deliveries(gateway.PerEvent(ctx), s.opts.Agent, group, from, int(to-from))
	if err != nil {
		return nil, out, err
	}
	byID := map[string]gateway.Delivery{}
	for _, d := range ds {
		byID[d.EventID] = d
	}
	evs, err := s.opts.Backend.Events(ctx, group, from, []string{gateway.KindMessage}, int(to-from))
	if err != nil {
		return nil, out, err
	}
	var msgs []gateway.Delivery
	for _, ev := range evs {
		if ev.Seq > to {
			break
		}
		data, err := gateway.ParseData(ev)
		if err != nil || data.X == nil || data.X.Envelope == nil || data.X.Envelope.Thread != thread {
			continue
		}
		d, ok := byID[ev.ID]
		if !ok { // the agent's own message: silent for it
			env := data.X.Envelope
			d = gateway.Delivery{Kind: ev.Kind, From: data.X.Sender, To: data.To, Intent: env.Intent, Context: env.Context,
				MessageID: env.Message, TS: ev.TS, Verification: data.X.Verification}
			d.EventID, d.Seq, d.Group, d.Thread, d.Agent = ev.ID, ev.Seq, ev.GroupID, thread, s.opts.Agent
			d.Policy, d.Reason, d.Injection, d.Priority = attention.MustNotRespond, attention.ReasonOwnEvent, attention.Silent, data.Priority
		}
		msgs = append(msgs, c2a.Pulled(d, data.Text))
	}
	if len(msgs) == 0 {
		return nil, out, fmt.Errorf("no messages in thread %q of group %q among its events %d to %d", thread, group, from+1, to)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 50
	}
	older := from > 0
	if len(msgs) > limit {
		msgs, older = msgs[len(msgs)-limit:], true
	}
	out.Group, out.Thread = group, thread
	for _, d := range msgs {
		out.Messages = append(out.Messages, view(d))
	}
	text := c2a.RenderAll(msgs)
	if older {
		text += fmt.Sprintf("\n\n(older messages of the thread may be left out: this read the group's events %d to %d, and kept the newest %d)", from+1, to, limit)
	}
	return textResult(text), out, nil
}

// threadWindowSize is how many of a group's events chat.read_thread
// reads for a thread.
const threadWindowSize = 2000

// threadWindow returns the seqs (from, to] of group that chat.read_thread
// reads: the last threadWindowSize events, or, when the event at anchor
// lies before those, the window that holds it with as many events after
// it as fit.
func (s *server) threadWindow(ctx context.Context, group string, anchor int64) (from, to int64, err error) {
	gs, err := s.opts.Backend.Groups(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, g := range gs {
		if g.ID == group {
			to = g.LastSeq
		}
	}
	if anchor > 0 && anchor <= to-threadWindowSize {
		to = anchor + threadWindowSize/2
	}
	return max(0, to-threadWindowSize), to, nil
}

type sendIn struct {
	To             string                  `json:"to" jsonschema:"receiver: one agent (CLAUDE), a role (@reviewers), or ALL for a broadcast"`
	Directedness   outDirectedness         `json:"directedness" jsonschema:"the directedness the receivers will get; must agree with to and intent"`
	Intent         sendIntent              `json:"intent" jsonschema:"REQUEST asks for work, RESPOND answers, HANDOFF assigns, ESCALATE raises to the user, POLL asks several, BROADCAST shares context"`
	Body           string                  `json:"body" jsonschema:"the message text"`
	InReplyTo      string                  `json:"inReplyTo,omitempty" jsonschema:"the eventId you answer (sets thread, parent and context)"`
	Thread         string                  `json:"thread,omitempty" jsonschema:"thread id (default: inReplyTo's thread, else a new one)"`
	Context        string                  `json:"context,omitempty" jsonschema:"topic; the relay files the message under the group of this context"`
	Priority       priority                `json:"priority,omitempty" jsonschema:"routing priority"`
	Visibility     visibility              `json:"visibility,omitempty" jsonschema:"the surface: dm, thread or channel"`
	IdempotencyKey string                  `json:"idempotencyKey,omitempty" jsonschema:"stable key for this semantic message; reuse it on every retry (default: a new one, returned)"`
	Unsigned       bool                    `json:"unsigned,omitempty" jsonschema:"send unsigned even when a signing key is configured"`
	Obligation     *c2a.OutboundObligation `json:"obligation,omitempty" jsonschema:"make the message an obligation: its receivers owe an answer until you discharge it (chat.discharge)"`
}

type sendOut struct {
	c2a.SendResult
	IdempotencyKey string                 `json:"idempotencyKey"`
	Directedness   attention.Directedness `json:"directedness"`
	Signed         bool                   `json:"signed"`
}

func (s *server) sendMessage(ctx context.Context, in sendIn) (*mcp.CallToolResult, sendOut, error) {
	var out sendOut
	dir := attention.Directedness(in.Directedness)
	o := c2a.Outbound{From: s.opts.Agent, To: strings.TrimSpace(in.To), Directedness: dir, Intent: string(in.Intent),
		Body: in.Body, Context: in.Context, Thread: in.Thread, Priority: string(in.Priority), IdempotencyKey: in.IdempotencyKey,
		Obligation: in.Obligation}
	if strings.TrimSpace(in.Body) == "" {
		return nil, out, errors.New("body is empty")
	}
	if err := c2a.CheckDirectedness(s.book(ctx), o.To, o.Intent, dir); err != nil {
		return nil, out, err
	}
	switch {
	case in.Visibility == "dm" && dir != attention.ToMe:
		return nil, out, fmt.Errorf("visibility dm needs directedness to_me (one receiver), not %s", dir)
	case in.Visibility == "thread" && in.Thread == "" && in.InReplyTo == "":
		return nil, out, errors.New("visibility thread needs thread or inReplyTo")
	}
	if in.InReplyTo != "" {
		d, err := s.delivered(ctx, "", in.InReplyTo)
		if err != nil {
			return nil, out, err
		}
		switch {
		case d.Reason == attention.ReasonClaimRequired:
			return nil, out, fmt.Errorf("event %s is offered to your role: claim it with chat.claim before replying", d.EventID)
		case d.Reason == attention.ReasonClaimedByOther:
			return nil, out, fmt.Errorf("event %s is claimed by %s: do not post a competing reply", d.EventID, d.ClaimedBy)
		case d.Policy == attention.MustNotRespond:
			return nil, out, fmt.Errorf("event %s is must_not_respond for you (%s): do not reply; react with chat.react if a signal is needed", d.EventID, d.Reason)
		}
		o.Parent = d.MessageID
		if o.Thread == "" {
			o.Thread = d.Thread
		}
		if o.Context == "" {
			o.Context = d.Context
		}
	}
	return s.sendOutbound(ctx, o, in.Unsigned)
}

// sendOutbound composes, signs (unless unsigned) and sends o, answering
// with what the relay recorded.
func (s *server) sendOutbound(ctx context.Context, o c2a.Outbound, unsigned bool) (*mcp.CallToolResult, sendOut, error) {
	var out sendOut
	dir := o.Directedness
	if o.IdempotencyKey == "" {
		o.IdempotencyKey = envelope.NewID()
	}
	text, env, err := c2a.Compose(o)
	if err != nil {
		return nil, out, err
	}
	if s.opts.Signer != nil && !unsigned {
		if text, err = s.opts.Signer(text); err != nil {
			return nil, out, fmt.Errorf("signing: %w", err)
		}
		out.Signed = true
	}
	res, err := s.opts.Backend.Ingest(ctx, s.opts.Agent, text, "c2a:"+o.IdempotencyKey)
	if err != nil {
		return nil, out, err
	}
	if res.Thread == "" {
		res.Thread = env.Thread
	}
	out.SendResult, out.IdempotencyKey, out.Directedness = res, o.IdempotencyKey, dir
	msg := fmt.Sprintf("sent %s → %s %s: message %s, event %s (seq %d in %s), verification %s", s.opts.Agent, o.To, env.Intent,
		res.Message, res.EventID, res.Seq, res.Group, res.Status)
	if to := strings.TrimSpace(o.To); !envelope.IsBroadcast(to) && !strings.HasPrefix(to, "@") && !s.knows(ctx, to) {
		msg += fmt.Sprintf("; note: the relay knows no agent %q (a typo, or a look-alike letter?): the message waits for whoever takes that name", to)
	}
	switch {
	case res.Differs:
		msg += "; NOT sent: an earlier attempt with this idempotencyKey recorded other content, which stands (use a new idempotencyKey to send a change)"
	case res.Duplicate:
		msg += "; already recorded by an earlier attempt with this idempotencyKey (nothing sent twice)"
	}
	return textResult(msg), out, nil
}

// knows reports whether the relay knows an agent by the name to: one in
// its address book, or one that has been seen or has written; an agent
// only ever written to is not known. It reports true when it cannot tell.
func (s *server) knows(ctx context.Context, to string) bool {
	b := s.bookOf(ctx, func(a gateway.AgentStatus) bool { return len(a.Names) > 0 || !a.LastSeen.IsZero() || a.Events > 0 })
	if b == nil {
		return true
	}
	_, ok := b.Agent(b.ActorID(to))
	return ok
}

// book is the relay's address book as far as this server can see it:
// the agents, their names and their roles.
func (s *server) book(ctx context.Context) *gateway.AddressBook { return s.bookOf(ctx, nil) }

// bookOf is book of the agents keep accepts (all when keep is nil), or
// nil when the relay cannot list them.
func (s *server) bookOf(ctx context.Context, keep func(gateway.AgentStatus) bool) *gateway.AddressBook {
	agents, err := s.opts.Backend.Agents(ctx)
	if err != nil {
		return nil
	}
	entries := make([]gateway.Agent, 0, len(agents))
	for _, a := range agents {
		if keep == nil || keep(a) {
			entries = append(entries, gateway.Agent{ID: a.ID, Names: a.Names, Roles: a.Roles})
		}
	}
	b, err := gateway.NewAddressBook(entries)
	if err != nil {
		return nil
	}
	return b
}

type reactIn struct {
	EventID string           `json:"eventId" jsonschema:"the event you react to"`
	Signal  attention.Signal `json:"signal" jsonschema:"the signal"`
	Eta     string           `json:"eta,omitempty" jsonschema:"for queued or blocked: when or what you wait for (recorded as the deferral's note)"`
	Group   string           `json:"group,omitempty" jsonschema:"the event's group (default: found from your deliveries)"`
}

// ActionOut is the result of chat.react, chat.claim, chat.defer and
// chat.resolve: what the ledger recorded.
type ActionOut struct {
	EventID     string                `json:"eventId"`
	Group       string                `json:"group"`
	Action      string                `json:"action"`
	Signal      attention.Signal      `json:"signal,omitempty"`
	Disposition attention.Disposition `json:"disposition,omitempty"`
	// Recorded is the ledger event written (its id and seq).
	Recorded  string `json:"recorded"`
	Seq       int64  `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Acked reports that a chat.ack was recorded too (an attention
	// message addressed to you, CCCS §6.2).
	Acked bool `json:"acked,omitempty"`
	// Deferred reports that a deferral with the eta was recorded too.
	Deferred  bool   `json:"deferred,omitempty"`
	Holder    string `json:"holder,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
}

func (s *server) act(ctx context.Context, d gateway.Delivery, action gateway.Action, signal, note string) (ActionOut, error) {
	return s.actWith(ctx, d, gateway.ActionRequest{Action: action, Signal: signal, Note: note})
}

// actWith is act with the request's other fields (TakeoverStale).
func (s *server) actWith(ctx context.Context, d gateway.Delivery, req gateway.ActionRequest) (ActionOut, error) {
	action := req.Action
	req.Group, req.EventID, req.Actor = d.Group, d.EventID, s.opts.Agent
	res, err := s.opts.Backend.Act(ctx, req)
	if err != nil {
		return ActionOut{}, err
	}
	out := ActionOut{EventID: d.EventID, Group: d.Group, Action: string(action), Recorded: res.Event.ID, Seq: res.Event.Seq, Duplicate: res.Duplicate}
	if disp, ok := attention.DispositionForAction(string(action)); ok {
		out.Disposition = disp
	}
	if c := res.Claim; c != nil {
		out.Holder, out.ExpiresAt = c.Actor, c.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return out, nil
}

func (s *server) react(ctx context.Context, in reactIn) (*mcp.CallToolResult, ActionOut, error) {
	d, err := s.delivered(ctx, in.Group, in.EventID)
	if err != nil {
		return nil, ActionOut{}, err
	}
	out, err := s.act(ctx, d, gateway.ActionReact, string(in.Signal), "")
	if err != nil {
		return nil, out, err
	}
	out.Signal = in.Signal
	out.Disposition, _ = in.Signal.Disposition()
	switch in.Signal {
	case attention.SignalSeen, attention.SignalAgree, attention.SignalDone:
		if d.Directedness == attention.ToMe && !d.Acked {
			_, err := s.opts.Backend.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: d.Group, EventID: d.EventID, Actor: s.opts.Agent})
			var ae *gateway.ActionError
			switch {
			case err == nil:
				out.Acked = true
			case errors.As(err, &ae) && (ae.Code == gateway.CodeNotAttention || ae.Code == gateway.CodePermission):
			default:
				return nil, out, err
			}
		}
	case attention.SignalQueued, attention.SignalBlocked:
		if in.Eta != "" {
			if _, err := s.act(ctx, d, gateway.ActionDefer, "", string(in.Signal)+": "+in.Eta); err != nil {
				return nil, out, err
			}
			out.Deferred = true
		}
	}
	return textResult(fmt.Sprintf("%s reacted %s %s to %s (recorded as %s, seq %d)", s.opts.Agent, in.Signal, in.Signal.Glyph(), d.EventID, out.Recorded, out.Seq)), out, nil
}

type claimIn struct {
	EventID string `json:"eventId" jsonschema:"the event to claim (aimed at you or your role)"`
	Group   string `json:"group,omitempty" jsonschema:"the event's group (default: found from your deliveries)"`
	// TakeoverStale takes over a stale holder's claim (BeadBoard §4.4).
	TakeoverStale bool `json:"takeoverStale,omitempty" jsonschema:"take over the claim if its holder is stale (no heartbeat or activity for stale_after); an active holder's claim is never taken over"`
}

func (s *server) claim(ctx context.Context, in claimIn) (*mcp.CallToolResult, ActionOut, error) {
	d, err := s.delivered(ctx, in.Group, in.EventID)
	if err != nil {
		return nil, ActionOut{}, err
	}
	out, err := s.actWith(ctx, d, gateway.ActionRequest{Action: gateway.ActionClaim, TakeoverStale: in.TakeoverStale})
	if err != nil {
		return nil, out, err
	}
	return textResult(fmt.Sprintf("%s holds the claim on %s until %s: you may reply", out.Holder, d.EventID, out.ExpiresAt)), out, nil
}

type dischargeIn struct {
	EventID string `json:"eventId" jsonschema:"the event of the obligation you authored (chat.send_message's eventId)"`
	Group   string `json:"group,omitempty" jsonschema:"the obligation's group (chat.send_message's group; default: default)"`
}

// discharge closes an obligation the agent authored or is the delegate
// of. Its own messages are not delivered to it, so the group is given,
// not found from its deliveries.
func (s *server) discharge(ctx context.Context, in dischargeIn) (*mcp.CallToolResult, ActionOut, error) {
	g := in.Group
	if g == "" {
		g = gateway.DefaultGroup
	}
	out, err := s.act(ctx, gateway.Delivery{Delivery: attention.Delivery{EventID: in.EventID, Group: g}}, gateway.ActionDischarge, "", "")
	if err != nil {
		return nil, out, err
	}
	return textResult(fmt.Sprintf("%s discharged the obligation of %s (recorded as %s, seq %d)", s.opts.Agent, in.EventID, out.Recorded, out.Seq)), out, nil
}

type deferIn struct {
	EventID string `json:"eventId" jsonschema:"the event you defer"`
	Reason  string `json:"reason" jsonschema:"why, and what you wait for"`
	Group   string `json:"group,omitempty" jsonschema:"the event's group (default: found from your deliveries)"`
}

func (s *server) deferEvent(ctx context.Context, in deferIn) (*mcp.CallToolResult, ActionOut, error) {
	d, err := s.delivered(ctx, in.Group, in.EventID)
	if err != nil {
		return nil, ActionOut{}, err
	}
	out, err := s.act(ctx, d, gateway.ActionDefer, "", in.Reason)
	if err != nil {
		return nil, out, err
	}
	return textResult(fmt.Sprintf("%s deferred %s (recorded as %s)", s.opts.Agent, d.EventID, out.Recorded)), out, nil
}

type resolveIn struct {
	EventID string `json:"eventId" jsonschema:"the event you resolve"`
	Note    string `json:"note,omitempty" jsonschema:"how it was resolved"`
	Group   string `json:"group,omitempty" jsonschema:"the event's group (default: found from your deliveries)"`
}

func (s *server) resolve(ctx context.Context, in resolveIn) (*mcp.CallToolResult, ActionOut, error) {
	d, err := s.delivered(ctx, in.Group, in.EventID)
	if err != nil {
		return nil, ActionOut{}, err
	}
	out, err := s.act(ctx, d, gateway.ActionResolve, "", in.Note)
	if err != nil {
		return nil, out, err
	}
	return textResult(fmt.Sprintf("%s resolved %s (recorded as %s)", s.opts.Agent, d.EventID, out.Recorded)), out, nil
}
