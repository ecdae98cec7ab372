package attention

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

var (
	t0 = time.Date(2026, 6, 2, 19, 10, 0, 0, time.UTC)
	me = Agent{ID: "claude", Roles: []string{"peer", "backend"}}
)

// ev returns a chat.message from gemini created at t0.
func ev(intent Intent, to ...string) Event {
	return Event{
		ID: "01JEVT", Seq: 42, Group: "g1", Kind: ledger.KindMessage,
		From: "gemini", To: to, Intent: intent, CreatedAt: t0,
	}
}

func (e Event) with(f func(*Event)) Event { f(&e); return e }

type want struct {
	d Directedness
	p Policy
	r Reason
	i Injection
}

func (w want) String() string { return fmt.Sprintf("%s/%s/%s/%s", w.d, w.p, w.r, w.i) }

func got(del Delivery) want { return want{del.Directedness, del.Policy, del.Reason, del.Injection} }

func describe(e Event) string {
	return fmt.Sprintf("%s from %s to %v thread %q", e.Intent, e.From, e.To, e.Thread)
}

// TestDefaultMatrix walks every row of C2A "Default Matrix", as adapted by
// docs/design.md §5.4 (see doc.go decisions 4, 5 and 7 where they differ).
func TestDefaultMatrix(t *testing.T) {
	claimBy := func(holder string) State {
		return State{Claims: []Claim{{Event: "01JEVT", Holder: holder, ClaimedAt: t0, ExpiresAt: t0.Add(DefaultClaimTTL)}}}
	}
	tests := []struct {
		row  string
		ev   Event
		st   State
		want want
		ctx  bool // thread context expected
	}{
		// C2A matrix: "DM to this session | to_me | must_respond | buffered".
		{"DM to this session", ev(IntentRequest, "claude"), State{},
			want{ToMe, MustRespond, ReasonDirectMessage, Buffered}, false},
		// C2A matrix: "Thanks or acknowledgement | to_me | ack_only | notify or silent".
		// An ACK or NACK is the directed answer to its asker (issue #14).
		{"thanks or acknowledgement (ACK)", ev(IntentACK, "claude"), State{},
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}, false},
		{"refusal (NACK)", ev(IntentNACK, "claude"), State{},
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}, false},
		{"thanks or acknowledgement (chat.ack kind)", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindAck }), State{},
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}, false},
		{"thanks or acknowledgement (chat.reaction kind)", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindReaction }), State{},
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}, false},
		{"acknowledgement owed (attention CLOSE)", ev(IntentClose, "claude").with(func(e *Event) { e.Priority = "attention" }), State{},
			want{ToMe, AckOnly, ReasonAttentionAck, Notify}, false},
		// C2A matrix: "Direct @mention | to_me | must_respond | buffered + thread context".
		{"direct mention", ev(IntentRequest, "claude", "chatgpt").with(func(e *Event) { e.Thread = "T1" }), State{},
			want{ToMe, MustRespond, ReasonDirectMention, Buffered}, true},
		// C2A matrix: "Assignment, approval, or blocker | to_me | must_respond | immediate or buffered".
		{"assignment (HANDOFF)", ev(IntentHandoff, "claude").with(func(e *Event) { e.Priority = "attention" }), State{},
			want{ToMe, MustRespond, ReasonAssignment, Buffered}, false},
		{"approval needed (high REQUEST)", ev(IntentRequest, "claude").with(func(e *Event) { e.XPriority = "high" }), State{},
			want{ToMe, MustRespond, ReasonDirectMessage, Immediate}, false},
		{"blocker (ESCALATE)", ev(IntentEscalate, "claude", "@user"), State{},
			want{ToMe, MustRespond, ReasonEscalation, Immediate}, false},
		// C2A matrix: "Direct thread question | to_me | must_respond | buffered".
		{"direct thread question", ev(IntentRequest, "claude").with(func(e *Event) { e.Thread = "T1"; e.Parent = "01JPAR" }), State{},
			want{ToMe, MustRespond, ReasonDirectMessage, Buffered}, true},
		// C2A matrix: "Role or group mention | to_my_role | may_respond after claim |
		// notify, then claimant gets buffered".
		{"role mention, unclaimed", ev(IntentRequest, "@backend"), State{},
			want{ToMyRole, MayRespond, ReasonClaimRequired, Notify}, false},
		{"group mention, unclaimed", ev(IntentRequest, "@peers"), State{},
			want{ToMyRole, MayRespond, ReasonClaimRequired, Notify}, false},
		{"@all, unclaimed", ev(IntentRequest, "@all"), State{},
			want{ToMyRole, MayRespond, ReasonClaimRequired, Notify}, false},
		{"@all, claimed by other", ev(IntentRequest, "@all"), claimBy("codex"),
			want{ToMyRole, MustNotRespond, ReasonClaimedByOther, ToolMailbox}, false},
		{"role mention, claimed by me", ev(IntentRequest, "@backend"), claimBy("claude"),
			want{ToMyRole, MayRespond, ReasonClaimed, Buffered}, false},
		{"role mention, claimed by other", ev(IntentRequest, "@backend"), claimBy("codex"),
			want{ToMyRole, MustNotRespond, ReasonClaimedByOther, ToolMailbox}, false},
		// C2A matrix: "Thread reply where this agent participates | to_my_role | may_respond | notify".
		{"thread reply, participating", ev(IntentRespond, "chatgpt").with(func(e *Event) { e.Thread = "T1" }), State{Threads: []string{"T1"}},
			want{ToMyRole, MayRespond, ReasonThreadParticipant, Notify}, false},
		// C2A matrix: "Message to another agent | to_other | must_not_respond | tool_mailbox".
		{"message to another agent", ev(IntentRequest, "chatgpt"), State{},
			want{ToOther, MustNotRespond, ReasonAddressedToOther, ToolMailbox}, false},
		// C2A matrix: "Agent message with no task | to_other | must_not_respond | tool_mailbox".
		{"agent message with no task", ev(IntentRespond, "chatgpt"), State{},
			want{ToOther, MustNotRespond, ReasonAddressedToOther, ToolMailbox}, false},
		// C2A matrix: "Unmentioned channel message | ambient | must_not_respond | tool_mailbox".
		{"unmentioned channel message", ev(IntentRequest), State{},
			want{Ambient, MustNotRespond, ReasonAmbient, ToolMailbox}, false},
		// C2A matrix: "Logs, progress, status broadcasts | ambient | must_not_respond | digest or silent".
		{"status broadcast", ev(IntentBroadcast), State{},
			want{Ambient, MustNotRespond, ReasonBroadcast, Digest}, false},
		{"legacy STATUS", ev("STATUS", "@all"), State{},
			want{Ambient, MustNotRespond, ReasonBroadcast, Digest}, false},
	}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			del := Decide(tt.ev, me, tt.st, t0)
			if g := got(del); g != tt.want {
				t.Errorf("Decide(%s) = %v, want %v", describe(tt.ev), g, tt.want)
			}
			if del.ThreadContext != tt.ctx {
				t.Errorf("Decide(%s).ThreadContext = %v, want %v", describe(tt.ev), del.ThreadContext, tt.ctx)
			}
			if (del.Knock != nil) != (del.Injection == Notify) {
				t.Errorf("Decide(%s).Knock = %v with injection %s, want a knock exactly for notify", describe(tt.ev), del.Knock, del.Injection)
			}
			if g, w := DirectednessOf(tt.ev, me, tt.st, t0), tt.want.d; g != w {
				t.Errorf("DirectednessOf(%s) = %s, want %s", describe(tt.ev), g, w)
			}
			if p, r := PolicyOf(tt.ev, me, tt.st, t0); p != tt.want.p || r != tt.want.r {
				t.Errorf("PolicyOf(%s) = %s, %s, want %s, %s", describe(tt.ev), p, r, tt.want.p, tt.want.r)
			}
			if g, w := InjectionOf(tt.ev, me, tt.st, t0), tt.want.i; g != w {
				t.Errorf("InjectionOf(%s) = %s, want %s", describe(tt.ev), g, w)
			}
		})
	}
}

// TestIntentDirectedness covers every intent against every directedness
// (docs/design.md §5.4 Policy and Injection rules).
func TestIntentDirectedness(t *testing.T) {
	type row [4]struct {
		p Policy
		r Reason
		i Injection
	}
	mnr := func(r Reason, i Injection) struct {
		p Policy
		r Reason
		i Injection
	} {
		return struct {
			p Policy
			r Reason
			i Injection
		}{MustNotRespond, r, i}
	}
	pri := func(p Policy, r Reason, i Injection) struct {
		p Policy
		r Reason
		i Injection
	} {
		return struct {
			p Policy
			r Reason
			i Injection
		}{p, r, i}
	}
	roleRest := func(toMe struct {
		p Policy
		r Reason
		i Injection
	}) row {
		return row{toMe, pri(MayRespond, ReasonClaimRequired, Notify), mnr(ReasonAddressedToOther, ToolMailbox), mnr(ReasonAmbient, ToolMailbox)}
	}
	quiet := func(r Reason, toMe Injection) row {
		return row{mnr(r, toMe), mnr(r, Notify), mnr(r, ToolMailbox), mnr(r, ToolMailbox)}
	}
	bc := mnr(ReasonBroadcast, Digest)
	ackRow := quiet(ReasonAcknowledgement, Notify)
	ackRow[0] = pri(AckOnly, ReasonAcknowledgement, Notify)
	tests := []struct {
		intent Intent
		want   row
	}{
		{IntentRequest, roleRest(pri(MustRespond, ReasonDirectMessage, Buffered))},
		{IntentEscalate, roleRest(pri(MustRespond, ReasonEscalation, Immediate))},
		{IntentHandoff, roleRest(pri(MustRespond, ReasonAssignment, Buffered))},
		{IntentPoll, roleRest(pri(MustRespond, ReasonPollTarget, Buffered))},
		{IntentRespond, roleRest(pri(MayRespond, ReasonReply, Buffered))},
		{IntentError, roleRest(pri(MayRespond, ReasonErrorReport, Buffered))},
		{"FROBNICATE", roleRest(pri(MayRespond, ReasonUnknownIntent, Buffered))},
		{"", roleRest(pri(MustRespond, ReasonDirectMessage, Buffered))}, // plain chat.message
		{"question", roleRest(pri(MustRespond, ReasonDirectMessage, Buffered))},
		{IntentACK, ackRow},
		{IntentNACK, ackRow},
		{IntentClose, quiet(ReasonClosed, Notify)},
		{IntentRevoke, quiet(ReasonRevocation, Immediate)},
		{IntentBroadcast, row{bc, bc, bc, bc}},
		{"NOTE", row{bc, bc, bc, bc}},
	}
	dirs := []struct {
		d  Directedness
		to []string
	}{
		{ToMe, []string{"claude"}},
		{ToMyRole, []string{"@backend"}},
		{ToOther, []string{"chatgpt"}},
		{Ambient, nil},
	}
	for _, tt := range tests {
		for n, dir := range dirs {
			e := ev(tt.intent, dir.to...)
			t.Run(fmt.Sprintf("%s/%s", tt.intent, dir.d), func(t *testing.T) {
				wd := dir.d
				if tt.intent.Canonical() == IntentBroadcast {
					wd = Ambient // BROADCAST is ambient whoever it names
				}
				w := want{wd, tt.want[n].p, tt.want[n].r, tt.want[n].i}
				if g := got(Decide(e, me, State{}, t0)); g != w {
					t.Errorf("Decide(%s) = %v, want %v", describe(e), g, w)
				}
			})
		}
	}
}

// TestPriorityEscalation: only X-Priority high/urgent (and ESCALATE, REVOKE)
// make an injection immediate (docs/design.md §5.4; doc.go decision 6).
func TestPriorityEscalation(t *testing.T) {
	claimed := State{Claims: []Claim{{Event: "01JEVT", Holder: "claude", ClaimedAt: t0, ExpiresAt: t0.Add(time.Hour)}}}
	tests := []struct {
		name   string
		to     []string
		intent Intent
		prio   string
		xprio  string
		st     State
		want   Injection
	}{
		{"to_me none", []string{"claude"}, IntentRequest, "", "", State{}, Buffered},
		{"to_me low", []string{"claude"}, IntentRequest, "", "low", State{}, Buffered},
		{"to_me normal", []string{"claude"}, IntentRequest, "", "normal", State{}, Buffered},
		{"to_me attention only", []string{"claude"}, IntentRequest, "attention", "", State{}, Buffered},
		{"to_me high", []string{"claude"}, IntentRequest, "attention", "high", State{}, Immediate},
		{"to_me urgent", []string{"claude"}, IntentRequest, "attention", "urgent", State{}, Immediate},
		{"to_me HIGH upper case", []string{"claude"}, IntentRequest, "", " HIGH ", State{}, Immediate},
		{"to_me RESPOND high", []string{"claude"}, IntentRespond, "", "high", State{}, Immediate},
		{"to_me HANDOFF high", []string{"claude"}, IntentHandoff, "attention", "high", State{}, Immediate},
		{"to_me ESCALATE low", []string{"claude"}, IntentEscalate, "attention", "low", State{}, Immediate},
		{"to_me REVOKE", []string{"claude"}, IntentRevoke, "", "", State{}, Immediate},
		{"to_me ACK urgent", []string{"claude"}, IntentACK, "", "urgent", State{}, Notify},
		{"to_my_role urgent", []string{"@backend"}, IntentRequest, "attention", "urgent", State{}, Notify},
		{"to_my_role claimed normal", []string{"@backend"}, IntentRequest, "", "", claimed, Buffered},
		{"to_my_role claimed urgent", []string{"@backend"}, IntentRequest, "", "urgent", claimed, Immediate},
		{"to_my_role claimed ESCALATE", []string{"@backend"}, IntentEscalate, "", "", claimed, Immediate},
		{"to_other urgent", []string{"chatgpt"}, IntentRequest, "attention", "urgent", State{}, ToolMailbox},
		{"ambient urgent", nil, IntentRequest, "", "urgent", State{}, ToolMailbox},
		{"broadcast urgent", nil, IntentBroadcast, "", "urgent", State{}, Digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ev(tt.intent, tt.to...).with(func(e *Event) { e.Priority, e.XPriority = tt.prio, tt.xprio })
			if g := InjectionOf(e, me, tt.st, t0); g != tt.want {
				t.Errorf("InjectionOf(%s, x_priority %q) = %s, want %s", describe(e), tt.xprio, g, tt.want)
			}
		})
	}
}

func TestDirectednessTokens(t *testing.T) {
	user := Agent{ID: "user", Roles: []string{"user"}}
	foreman := Agent{ID: "lead-1", Roles: []string{"Foreman"}}
	tests := []struct {
		name string
		a    Agent
		ev   Event
		st   State
		want Directedness
	}{
		{"id case-insensitive", me, ev(IntentRequest, "CLAUDE"), State{}, ToMe},
		{"id with spaces", me, ev(IntentRequest, " claude "), State{}, ToMe},
		{"empty token ignored", me, ev(IntentRequest, "", "claude"), State{}, ToMe},
		{"me among @all", me, ev(IntentRequest, "@all", "claude"), State{}, ToMe},
		{"@user to user", user, ev(IntentEscalate, "@user"), State{}, ToMe},
		{"user to user", user, ev(IntentEscalate, "user"), State{}, ToMe},
		{"@user to agent", me, ev(IntentEscalate, "@user"), State{}, ToOther},
		{"@peers to peer", me, ev(IntentRequest, "@peers"), State{}, ToMyRole},
		{"@foreman to foreman", foreman, ev(IntentRequest, "@foreman"), State{}, ToMyRole},
		{"@foreman to peer", me, ev(IntentRequest, "@foreman"), State{}, ToOther},
		{"bare role", me, ev(IntentRequest, "backend"), State{}, ToMyRole},
		{"@role upper case", me, ev(IntentRequest, "@BACKEND"), State{}, ToMyRole},
		{"role and other", me, ev(IntentRequest, "chatgpt", "@backend"), State{}, ToMyRole},
		{"@all", me, ev(IntentRequest, "@all"), State{}, ToMyRole},
		{"ALL", me, ev(IntentRequest, "ALL"), State{}, ToMyRole},
		{"star", me, ev(IntentRequest, "*"), State{}, ToMyRole},
		{"empty to", me, ev(IntentRequest), State{}, Ambient},
		{"only blank tokens", me, ev(IntentRequest, " "), State{}, Ambient},
		{"BROADCAST naming me", me, ev(IntentBroadcast, "claude"), State{}, Ambient},
		{"POLL target", me, ev(IntentPoll, "chatgpt", "claude", "gemini"), State{}, ToMe},
		{"POLL not a target", me, ev(IntentPoll, "chatgpt", "gemini"), State{}, ToOther},
		{"participating thread, to other", me, ev(IntentRequest, "chatgpt").with(func(e *Event) { e.Thread = "T1" }),
			State{Threads: []string{"T1"}}, ToMyRole},
		{"other thread", me, ev(IntentRequest, "chatgpt").with(func(e *Event) { e.Thread = "T2" }),
			State{Threads: []string{"T1"}}, ToOther},
		{"claimed thread, empty to", me, ev(IntentRequest).with(func(e *Event) { e.Thread = "T1" }),
			State{Claims: []Claim{{Thread: "T1", Holder: "claude", ClaimedAt: t0, ExpiresAt: t0.Add(time.Minute)}}}, ToMyRole},
		{"expired thread claim", me, ev(IntentRequest, "chatgpt").with(func(e *Event) { e.Thread = "T1" }),
			State{Claims: []Claim{{Thread: "T1", Holder: "claude", ClaimedAt: t0.Add(-time.Hour), ExpiresAt: t0}}}, ToOther},
		{"thread claimed by other", me, ev(IntentRequest, "chatgpt").with(func(e *Event) { e.Thread = "T1" }),
			State{Claims: []Claim{{Thread: "T1", Holder: "codex", ClaimedAt: t0, ExpiresAt: t0.Add(time.Minute)}}}, ToOther},
		{"claimed event", me, ev(IntentRequest, "chatgpt"),
			State{Claims: []Claim{{Event: "01JEVT", Holder: "claude", ClaimedAt: t0, ExpiresAt: t0.Add(time.Minute)}}}, ToMyRole},
		{"no agent id", Agent{}, ev(IntentRequest, ""), State{}, Ambient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := DirectednessOf(tt.ev, tt.a, tt.st, t0); g != tt.want {
				t.Errorf("DirectednessOf(%s, agent %q) = %s, want %s", describe(tt.ev), tt.a.ID, g, tt.want)
			}
		})
	}
}

func TestSpecialPolicies(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want want
	}{
		{"own DM to self", ev(IntentRequest, "claude").with(func(e *Event) { e.From = "Claude" }),
			want{ToMe, MustNotRespond, ReasonOwnEvent, Silent}},
		{"own broadcast", ev(IntentBroadcast).with(func(e *Event) { e.From = "claude" }),
			want{Ambient, MustNotRespond, ReasonOwnEvent, Silent}},
		{"read cursor", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindRead }),
			want{ToMe, MustNotRespond, ReasonBookkeeping, Silent}},
		{"claim record", ev("").with(func(e *Event) { e.Kind = ledger.KindClaim }),
			want{Ambient, MustNotRespond, ReasonBookkeeping, Silent}},
		{"disposition record", ev("").with(func(e *Event) { e.Kind = ledger.KindDisposition }),
			want{Ambient, MustNotRespond, ReasonBookkeeping, Silent}},
		{"notify ack", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindNotifyAck }),
			want{ToMe, MustNotRespond, ReasonBookkeeping, Silent}},
		{"reaction to me", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindReaction }),
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}},
		{"reaction to another", ev("", "chatgpt").with(func(e *Event) { e.Kind = ledger.KindReaction }),
			want{ToOther, MustNotRespond, ReasonAcknowledgement, ToolMailbox}},
		{"system.notify without intent", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindNotify }),
			want{ToMe, MayRespond, ReasonUnknownIntent, Buffered}},
		{"notice requiring ack to me", ev("", "claude").with(func(e *Event) { e.Kind = ledger.KindNotify; e.RequiresAck = true }),
			want{ToMe, AckOnly, ReasonAttentionAck, Notify}},
		{"notice requiring ack to another", ev("", "chatgpt").with(func(e *Event) { e.Kind = ledger.KindNotify; e.RequiresAck = true }),
			want{ToOther, MustNotRespond, ReasonAddressedToOther, ToolMailbox}},
		{"attention REVOKE to me", ev(IntentRevoke, "claude").with(func(e *Event) { e.Priority = "attention" }),
			want{ToMe, AckOnly, ReasonAttentionAck, Immediate}},
		{"RequiresAck CLOSE to me", ev(IntentClose, "claude").with(func(e *Event) { e.RequiresAck = true }),
			want{ToMe, AckOnly, ReasonAttentionAck, Notify}},
		{"attention ACK to me asks no reply", ev(IntentACK, "claude").with(func(e *Event) { e.Priority = "attention" }),
			want{ToMe, AckOnly, ReasonAcknowledgement, Notify}},
		{"attention CLOSE to role", ev(IntentClose, "@backend").with(func(e *Event) { e.Priority = "attention" }),
			want{ToMyRole, MustNotRespond, ReasonClosed, Notify}},
		{"lower-case intent", ev("request", "claude"),
			want{ToMe, MustRespond, ReasonDirectMessage, Buffered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := got(Decide(tt.ev, me, State{}, t0)); g != tt.want {
				t.Errorf("Decide(%s, kind %s) = %v, want %v", describe(tt.ev), tt.ev.Kind, g, tt.want)
			}
		})
	}
}

func TestDeadlines(t *testing.T) {
	dm := ev(IntentRequest, "claude")
	withDeadline := dm.with(func(e *Event) { e.Deadline = t0.Add(time.Hour) })
	tests := []struct {
		name         string
		ev           Event
		now          time.Time
		wantPolicy   Policy
		wantDeadline time.Time
		wantExpired  bool
	}{
		{"no deadline: owed a week later", dm, t0.Add(7 * 24 * time.Hour), MustRespond, time.Time{}, false},
		{"before its own deadline", withDeadline, t0.Add(time.Hour - time.Nanosecond), MustRespond, t0.Add(time.Hour), false},
		{"exactly at its deadline", withDeadline, t0.Add(time.Hour), MayRespond, t0.Add(time.Hour), true},
		{"long past it", withDeadline, t0.Add(48 * time.Hour), MayRespond, t0.Add(time.Hour), true},
		{"may_respond has none", ev(IntentRespond, "claude"), t0.Add(time.Hour), MayRespond, time.Time{}, false},
		{"ack_only without deadline stays", ev(IntentClose, "claude").with(func(e *Event) { e.Priority = "attention" }),
			t0.Add(time.Hour), AckOnly, time.Time{}, false},
		{"ack_only expires but stays ack_only", ev(IntentClose, "claude").with(func(e *Event) { e.Priority = "attention"; e.Deadline = t0.Add(time.Minute) }),
			t0.Add(time.Hour), AckOnly, t0.Add(time.Minute), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.ev, me, State{}, tt.now)
			if d.Policy != tt.wantPolicy || !d.Deadline.Equal(tt.wantDeadline) || d.Expired != tt.wantExpired {
				t.Errorf("Decide(%s) at %v = policy %s deadline %v expired %v, want %s %v %v",
					describe(tt.ev), tt.now.Sub(t0), d.Policy, d.Deadline, d.Expired, tt.wantPolicy, tt.wantDeadline, tt.wantExpired)
			}
			if d.Reason != ReasonDirectMessage && tt.wantPolicy == MayRespond && tt.ev.Intent == IntentRequest {
				t.Errorf("Decide(%s).Reason = %s, want the original reason kept", describe(tt.ev), d.Reason)
			}
		})
	}
}

func TestKnock(t *testing.T) {
	e := ev(IntentRequest, "@backend").with(func(e *Event) {
		e.Thread, e.Context, e.XPriority = "deploy-migration", "rollback step", "urgent"
	})
	d := Decide(e, me, State{}, t0)
	want := &Knock{
		From: "gemini", Where: "thread:deploy-migration", Directedness: ToMyRole, Policy: MayRespond,
		Priority: "urgent", Topic: "request about rollback step", PullWith: "chat.read_thread",
	}
	if !reflect.DeepEqual(d.Knock, want) {
		t.Errorf("Decide(%s).Knock = %+v, want %+v", describe(e), d.Knock, want)
	}
	e.Thread, e.XPriority, e.Priority = "", "", "attention"
	d = Decide(e, me, State{}, t0)
	if d.Knock == nil || d.Knock.Where != "group:g1" || d.Knock.PullWith != "chat.list_events" || d.Knock.Priority != "attention" {
		t.Errorf("Decide(%s).Knock = %+v, want where group:g1, pull_with chat.list_events, priority attention", describe(e), d.Knock)
	}
}

func TestTopic(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		intent  Intent
		context string
		want    string
	}{
		{IntentRequest, "deploy", "request about deploy"},
		{IntentHandoff, "", "handoff"},
		{"", "", "request"},
		{"WEIRD", "a", "message about a"},
		{"question", "q", "request about q"},
		{IntentRequest, "  line one\n\tline\x00two\u202e  ", "request about line one linetwo"},
		{IntentRequest, long, "request about " + strings.Repeat("x", 64) + "…"},
		{IntentRequest, strings.Repeat("x", 64), "request about " + strings.Repeat("x", 64)},
		{IntentRequest, strings.Repeat("x", 63) + " y", "request about " + strings.Repeat("x", 63) + " …"},
		{IntentRequest, "\n\n", "request"},
	}
	for _, tt := range tests {
		e := ev(tt.intent).with(func(e *Event) { e.Context = tt.context })
		if g := Topic(e); g != tt.want {
			t.Errorf("Topic(intent %q, context %q) = %q, want %q", tt.intent, tt.context, g, tt.want)
		}
	}
}

func TestIdempotencyKeyAndJSON(t *testing.T) {
	d := Decide(ev(IntentRequest, "chatgpt"), me, State{}, t0)
	if d.IdempotencyKey != "01JEVT:claude" {
		t.Errorf("Decide().IdempotencyKey = %q, want %q", d.IdempotencyKey, "01JEVT:claude")
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"directedness":"to_other"`, `"policy":"must_not_respond"`, `"reason":"addressed_to_other"`,
		`"injection":"tool_mailbox"`, `"idempotency_key":"01JEVT:claude"`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("json.Marshal(Decide()) = %s, want it to contain %s", b, s)
		}
	}
	if strings.Contains(string(b), "deadline") {
		t.Errorf("json.Marshal(Decide()) = %s, want no deadline for must_not_respond", b)
	}
	var back Delivery
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Errorf("json round trip = %+v, %v, want %+v", back, err, d)
	}
}

// TestPure: Decide does not modify its inputs and gives the same answer twice.
func TestPure(t *testing.T) {
	e := ev(IntentRequest, "@backend", "claude")
	st := State{Claims: []Claim{{Event: "x", Holder: "a", ExpiresAt: t0.Add(time.Hour)}}, Threads: []string{"T"},
		LastSeen: map[string]time.Time{"a": t0}}
	a := Agent{ID: "claude", Roles: []string{"backend"}}
	e2, st2, a2 := e, st, a
	first := Decide(e, a, st, t0)
	if second := Decide(e, a, st, t0); !reflect.DeepEqual(first, second) {
		t.Errorf("Decide() = %+v then %+v, want the same", first, second)
	}
	if !reflect.DeepEqual(e, e2) || !reflect.DeepEqual(st, st2) || !reflect.DeepEqual(a, a2) {
		t.Errorf("Decide() modified its inputs")
	}
}

// TestAsksToMeIsDecidesRule: Intent.AsksToMe says must_respond for a
// message naming the agent exactly when Decide does, for every intent,
// legacy name and none.
func TestAsksToMeIsDecidesRule(t *testing.T) {
	a := Agent{ID: "bob"}
	for _, in := range []Intent{"", IntentRequest, IntentRespond, IntentEscalate, IntentHandoff, IntentPoll, IntentACK, IntentNACK,
		IntentError, IntentBroadcast, IntentRevoke, IntentClose, "question", "answer", "status", "patch", "note", "FROBNICATE"} {
		ev := Event{ID: "e1", Kind: ledger.KindMessage, From: "alice", To: []string{"bob"}, Intent: in}
		decided := Decide(ev, a, State{}, time.Time{}).Policy == MustRespond
		if got := in.AsksToMe(); got != decided {
			t.Errorf("Intent(%q).AsksToMe() = %v, Decide says must_respond %v", in, got, decided)
		}
	}
}
