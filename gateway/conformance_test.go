package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// This file is the conformance table of the attention engine (issue #14
// item 7): each scenario is a sequence of steps on a fresh group — who
// sends what to whom, claims, acks, reads, the clock — and the delivery
// one agent must then get of one event: directedness, policy, reason,
// injection, and whether it is acknowledged or expired. Every row of C2A's
// "Default Matrix" (docs/spec/c2a-chat-to-agents-protocol.txt) is here, and
// the table runs on every ledger backend.

// cstep is one step of a scenario. Exactly one of send, plain, act,
// notice or advance is set.
type cstep struct {
	// send: an envelope from, to, intent; thread and parent name earlier
	// steps (-1 for none); prio is X-Priority; targets is a POLL's
	// `meta: poll` Targets.
	send             bool
	from, to, intent string
	thread, parent   int
	prio, targets    string
	// deadline is `meta: routing` X-Deadline.
	deadline string
	// oblige, when set, adds `meta: obligation` with these Blocks (and
	// Delegate delegate).
	oblige, delegate string
	// plain: a chat.message with no receivers, as a CCCS client appends
	// it (no envelope).
	plain bool
	// act: actor performs action on the event of step on.
	act   gateway.Action
	actor string
	on    int
	// notice: a relay notice for actor (requires_ack).
	notice bool
	// advance moves the relay's clock.
	advance time.Duration
}

func send(from, to, intent string) cstep {
	return cstep{send: true, from: from, to: to, intent: intent, thread: -1, parent: -1}
}

func (s cstep) inThread(step int) cstep    { s.thread = step; return s }
func (s cstep) replyTo(step int) cstep     { s.parent = step; return s }
func (s cstep) priority(p string) cstep    { s.prio = p; return s }
func (s cstep) due(d string) cstep         { s.deadline = d; return s }
func (s cstep) pollTargets(t string) cstep { s.targets = t; return s }
func (s cstep) obliges(blocks, delegate string) cstep {
	s.oblige, s.delegate = blocks, delegate
	return s
}

func act(actor string, a gateway.Action, on int) cstep { return cstep{act: a, actor: actor, on: on} }

// cwant is the delivery expected for agent of the scenario's last event
// (or of step event when set).
type cwant struct {
	agent   string
	event   int // step index; -1: the last step
	d       attention.Directedness
	p       attention.Policy
	r       attention.Reason
	i       attention.Injection
	acked   bool
	expired bool
	ctx     bool // thread context required (every envelope has a thread, so others may have it too)
	silent  bool // no delivery at all
	// discharged: the obligation was discharged; owes: 0 unchecked, 1
	// Delivery.Owes, 2 not Owes.
	discharged bool
	owes       int
}

func expect(agent string, d attention.Directedness, p attention.Policy, r attention.Reason, i attention.Injection) cwant {
	return cwant{agent: agent, event: -1, d: d, p: p, r: r, i: i}
}

func (w cwant) of(step int) cwant { w.event = step; return w }
func (w cwant) isAcked() cwant    { w.acked = true; return w }
func (w cwant) owed() cwant       { w.owes = 1; return w }
func (w cwant) settled() cwant    { w.owes = 2; return w }
func (w cwant) isDischarged() cwant {
	w.discharged = true
	return w
}
func (w cwant) isExpired() cwant { w.expired = true; return w }
func (w cwant) withContext() cwant {
	w.ctx = true
	return w
}

type scenario struct {
	name  string
	steps []cstep
	want  []cwant
}

const (
	toMe     = attention.ToMe
	toMyRole = attention.ToMyRole
	toOther  = attention.ToOther
	ambient  = attention.Ambient
	must     = attention.MustRespond
	may      = attention.MayRespond
	ackOnly  = attention.AckOnly
	mustNot  = attention.MustNotRespond
)

// conformance is the table. The book (testBook): claude and chatgpt are
// reviewers, gemini has no role.
var conformance = []scenario{
	// C2A: "DM to this session | to_me | must_respond | buffered".
	{"DM to this session", []cstep{send("CHATGPT", "CLAUDE", "REQUEST")},
		[]cwant{expect("claude", toMe, must, attention.ReasonDirectMessage, attention.Buffered),
			expect("gemini", toOther, mustNot, attention.ReasonAddressedToOther, attention.ToolMailbox),
			{agent: "chatgpt", event: -1, silent: true}}},
	// C2A: "Thanks or acknowledgement | to_me | ack_only | notify or silent".
	{"thanks (ACK) to the asker", []cstep{send("CLAUDE", "CHATGPT", "REQUEST"), send("CHATGPT", "CLAUDE", "ACK").replyTo(0)},
		[]cwant{expect("claude", toMe, ackOnly, attention.ReasonAcknowledgement, attention.Notify),
			expect("gemini", toOther, mustNot, attention.ReasonAcknowledgement, attention.ToolMailbox)}},
	{"refusal (NACK) to the asker", []cstep{send("CLAUDE", "CHATGPT", "REQUEST"), send("CHATGPT", "CLAUDE", "NACK").replyTo(0)},
		[]cwant{expect("claude", toMe, ackOnly, attention.ReasonAcknowledgement, attention.Notify)}},
	{"chat.ack of a HANDOFF to the asker", []cstep{send("CLAUDE", "CHATGPT", "HANDOFF"), act("chatgpt", gateway.ActionAck, 0)},
		[]cwant{expect("claude", toMe, ackOnly, attention.ReasonAcknowledgement, attention.Notify)}},
	// C2A: "Direct @mention | to_me | must_respond | buffered + thread context".
	{"direct mention among several (POLL)", []cstep{send("GEMINI", "CLAUDE", "POLL").pollTargets("CHATGPT")},
		[]cwant{expect("claude", toMe, must, attention.ReasonPollTarget, attention.Buffered),
			expect("chatgpt", toMe, must, attention.ReasonPollTarget, attention.Buffered)}},
	// C2A: "Assignment, approval, or blocker | to_me | must_respond | immediate or buffered".
	{"assignment (HANDOFF)", []cstep{send("CHATGPT", "CLAUDE", "HANDOFF")},
		[]cwant{expect("claude", toMe, must, attention.ReasonAssignment, attention.Buffered)}},
	{"approval (X-Priority high)", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").priority("high")},
		[]cwant{expect("claude", toMe, must, attention.ReasonDirectMessage, attention.Immediate)}},
	{"blocker (ESCALATE)", []cstep{send("CHATGPT", "CLAUDE", "ESCALATE")},
		[]cwant{expect("claude", toMe, must, attention.ReasonEscalation, attention.Immediate)}},
	// C2A: "Direct thread question | to_me | must_respond | buffered".
	{"direct thread question", []cstep{send("CLAUDE", "CHATGPT", "REQUEST"), send("CHATGPT", "CLAUDE", "REQUEST").inThread(0).replyTo(0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonDirectMessage, attention.Buffered).withContext()}},
	// C2A: "Role or group mention | to_my_role | may_respond after claim |
	// notify, then claimant gets buffered".
	{"role mention, unclaimed", []cstep{send("GEMINI", "@reviewer", "REQUEST")},
		[]cwant{expect("claude", toMyRole, may, attention.ReasonClaimRequired, attention.Notify),
			expect("chatgpt", toMyRole, may, attention.ReasonClaimRequired, attention.Notify)}},
	{"role mention, claimed", []cstep{send("GEMINI", "@reviewer", "REQUEST"), act("claude", gateway.ActionClaim, 0)},
		[]cwant{expect("claude", toMyRole, may, attention.ReasonClaimed, attention.Buffered).of(0),
			expect("chatgpt", toMyRole, mustNot, attention.ReasonClaimedByOther, attention.ToolMailbox).of(0)}},
	{"group mention (@all)", []cstep{send("CLAUDE", "@all", "REQUEST")},
		[]cwant{expect("chatgpt", toMyRole, may, attention.ReasonClaimRequired, attention.Notify),
			expect("gemini", toMyRole, may, attention.ReasonClaimRequired, attention.Notify)}},
	// C2A: "Thread reply where this agent participates | to_my_role | may_respond | notify".
	{"thread reply, participating", []cstep{send("CLAUDE", "CHATGPT", "REQUEST"), send("CHATGPT", "GEMINI", "RESPOND").inThread(0)},
		[]cwant{expect("claude", toMyRole, may, attention.ReasonThreadParticipant, attention.Notify)}},
	// C2A: "Message to another agent | to_other | must_not_respond | tool_mailbox".
	{"message to another agent", []cstep{send("CHATGPT", "GEMINI", "REQUEST")},
		[]cwant{expect("claude", toOther, mustNot, attention.ReasonAddressedToOther, attention.ToolMailbox)}},
	// C2A: "Agent message with no task | to_other | must_not_respond | tool_mailbox".
	{"agent message with no task", []cstep{send("CHATGPT", "GEMINI", "RESPOND")},
		[]cwant{expect("claude", toOther, mustNot, attention.ReasonAddressedToOther, attention.ToolMailbox)}},
	// C2A: "Unmentioned channel message | ambient | must_not_respond | tool_mailbox".
	{"unmentioned channel message", []cstep{{plain: true}},
		[]cwant{expect("claude", ambient, mustNot, attention.ReasonAmbient, attention.ToolMailbox)}},
	// C2A: "Logs, progress, status broadcasts | ambient | must_not_respond | digest or silent".
	{"status broadcast", []cstep{send("CHATGPT", "ALL", "BROADCAST")},
		[]cwant{expect("claude", ambient, mustNot, attention.ReasonBroadcast, attention.Digest)}},

	// Prior acks and reads, notices, the clock.
	{"acknowledged HANDOFF is settled", []cstep{send("CHATGPT", "CLAUDE", "HANDOFF"), act("claude", gateway.ActionAck, 0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonAssignment, attention.Buffered).of(0).isAcked().settled()}},
	{"read is not an acknowledgement", []cstep{send("CHATGPT", "CLAUDE", "HANDOFF"), act("claude", gateway.ActionRead, 0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonAssignment, attention.Buffered).of(0)}},
	{"notice requiring ack", []cstep{{notice: true, actor: "claude"}},
		[]cwant{expect("claude", toMe, ackOnly, attention.ReasonAttentionAck, attention.Notify)}},
	{"notice acknowledged", []cstep{{notice: true, actor: "claude"}, act("claude", gateway.ActionAck, 0)},
		[]cwant{expect("claude", toMe, ackOnly, attention.ReasonAttentionAck, attention.Notify).of(0).isAcked()}},
	{"stale request (X-Deadline passed)", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").due("5m"), {advance: 5*time.Minute + time.Second}},
		[]cwant{expect("claude", toMe, may, attention.ReasonDirectMessage, attention.Buffered).of(0).isExpired().settled()}},
	{"request without deadline is owed a week later", []cstep{send("CHATGPT", "CLAUDE", "REQUEST"), {advance: 7 * 24 * time.Hour}},
		[]cwant{expect("claude", toMe, must, attention.ReasonDirectMessage, attention.Buffered).of(0).owed()}},

	// Obligations (issue #14): the arms that need no timers.
	{"obligation, open", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").obliges("halted", "")},
		[]cwant{expect("claude", toMe, must, attention.ReasonObligation, attention.Immediate).owed(),
			expect("gemini", toOther, mustNot, attention.ReasonAddressedToOther, attention.ToolMailbox)}},
	{"obligation to a role", []cstep{send("CHATGPT", "@reviewer", "REQUEST").obliges("degraded", "")},
		[]cwant{expect("claude", toMyRole, must, attention.ReasonObligation, attention.Immediate).owed()}},
	{"obligation without deadline never goes stale", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").obliges("halted", ""), {advance: 7 * 24 * time.Hour}},
		[]cwant{expect("claude", toMe, must, attention.ReasonObligation, attention.Immediate).of(0).owed()}},
	{"obligation, recipient replies, author has not discharged", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").obliges("halted", ""),
		send("CLAUDE", "CHATGPT", "RESPOND").replyTo(0), send("CLAUDE", "CHATGPT", "ACK").replyTo(0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonObligation, attention.Immediate).of(0).owed()}},
	{"obligation discharged by its author", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").obliges("halted", ""),
		send("CHATGPT", "CLAUDE", "ACK").replyTo(0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonObligation, attention.Immediate).of(0).isDischarged().settled()}},
	{"obligation discharged by the delegate", []cstep{send("CHATGPT", "CLAUDE", "REQUEST").obliges("halted", "GEMINI"),
		act("gemini", gateway.ActionDischarge, 0)},
		[]cwant{expect("claude", toMe, must, attention.ReasonObligation, attention.Immediate).of(0).isDischarged().settled()}},
}

// openStore opens a store of the named kind — every kind the relay runs
// on — with the clock now where the store takes one.
func openStore(t *testing.T, kind string, now func() time.Time) ledger.Store {
	t.Helper()
	switch kind {
	case "memory":
		return memory.New(now)
	case "sqlite":
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	nodes, err := natstest.Start(t.TempDir(), 1, false)
	if err != nil {
		t.Fatalf("starting NATS: %v", err)
	}
	t.Cleanup(func() { natstest.StopAll(nodes) })
	st, err := jetstream.Open(t.Context(), nodes[0].URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// testClock is the real time plus an advance: the stores stamp events
// with the real time, so the relay's clock must not fall behind it.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) now() time.Time        { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *testClock) offset() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.off }

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func TestAttentionConformance(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite", "jetstream"} {
		t.Run(kind, func(t *testing.T) {
			clock := &testClock{}
			r := gateway.New(openStore(t, kind, clock.now), &gateway.Options{Book: testBook(t), Now: clock.now})
			for n, sc := range conformance {
				t.Run(sc.name, func(t *testing.T) {
					runScenario(t, r, clock, fmt.Sprintf("c%02d", n), sc)
				})
			}
		})
	}
}

func runScenario(t *testing.T, r *gateway.Relay, clock *testClock, group string, sc scenario) {
	ctx := context.Background()
	clock.add(-clock.offset()) // every scenario starts at the real time
	evs := make([]ledger.Event, len(sc.steps))
	for i, s := range sc.steps {
		switch {
		case s.send:
			text := env(s.from, s.to, s.intent, group, fmt.Sprintf("step %d", i), func(e *envelope.Envelope) {
				if s.thread >= 0 {
					e.Thread = data(t, evs[s.thread]).X.Envelope.Thread
				}
				if s.parent >= 0 {
					e.Parent = data(t, evs[s.parent]).X.Envelope.Message
				}
				if s.prio != "" {
					e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: s.prio}}})
				}
				if s.deadline != "" {
					e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: s.deadline}}})
				}
				if s.oblige != "" {
					f := []envelope.Field{{Key: "Blocks", Value: s.oblige}}
					if s.delegate != "" {
						f = append(f, envelope.Field{Key: "Delegate", Value: s.delegate})
					}
					e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: f})
				}
				if s.targets != "" {
					e.Meta = append(e.Meta, envelope.Meta{Namespace: "poll", Fields: []envelope.Field{{Key: "Targets", Value: s.targets}}})
				}
			})
			outs := ingest(t, r, "", text)
			if !outs[0].Accepted() {
				t.Fatalf("step %d refused: %+v", i, outs[0].Reject)
			}
			evs[i] = outs[0].Event
		case s.plain:
			out, err := r.Store().Append(ctx, []ledger.Record{{Kind: gateway.KindMessage, GroupID: group, By: "chatgpt",
				Data: []byte(`{"text":"anyone around?","format":"plain","priority":"normal"}`)}})
			if err != nil {
				t.Fatal(err)
			}
			evs[i] = out[0].Event
		case s.notice:
			if err := r.NotifyAgent(ctx, s.actor, group, "", "claim_released", "your claim lapsed"); err != nil {
				t.Fatal(err)
			}
			got, err := r.Store().Range(ctx, group, 0, []string{gateway.KindNotify}, 0)
			if err != nil || len(got) == 0 {
				t.Fatalf("notice: %v", err)
			}
			evs[i] = got[len(got)-1]
		case s.act != "":
			res, err := r.Act(ctx, gateway.ActionRequest{Action: s.act, Group: group, EventID: evs[s.on].ID, Actor: s.actor})
			if err != nil {
				t.Fatalf("step %d: %s %s of step %d: %v", i, s.actor, s.act, s.on, err)
			}
			evs[i] = res.Event
		case s.advance != 0:
			clock.add(s.advance)
			evs[i] = evs[i-1]
		}
	}
	for _, w := range sc.want {
		target := evs[len(evs)-1]
		if w.event >= 0 {
			target = evs[w.event]
		}
		ds, err := r.Deliveries(ctx, w.agent, group, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got *gateway.Delivery
		for i := range ds {
			if ds[i].EventID == target.ID {
				got = &ds[i]
			}
		}
		switch {
		case w.silent && got != nil:
			t.Errorf("%s got %s/%s/%s, want no delivery", w.agent, got.Directedness, got.Policy, got.Injection)
			continue
		case w.silent:
			continue
		case got == nil:
			t.Errorf("%s got no delivery of %s (%s)", w.agent, target.ID, target.Kind)
			continue
		}
		g := cwant{agent: w.agent, event: w.event, d: got.Directedness, p: got.Policy, r: got.Reason, i: got.Injection,
			acked: got.Acked, expired: got.Expired, ctx: got.ThreadContext && w.ctx, discharged: got.Discharged}
		switch {
		case w.owes != 0 && got.Owes():
			g.owes = 1
		case w.owes != 0:
			g.owes = 2
		}
		if g != w {
			t.Errorf("%s's delivery = %s/%s (%s)/%s acked=%v expired=%v context=%v discharged=%v owes=%d,\n want %s/%s (%s)/%s acked=%v expired=%v context=%v discharged=%v owes=%d",
				w.agent, g.d, g.p, g.r, g.i, g.acked, g.expired, g.ctx, g.discharged, g.owes, w.d, w.p, w.r, w.i, w.acked, w.expired, w.ctx, w.discharged, w.owes)
		}
	}
}
