package gateway_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// This file is the timed part of the conformance table (issue #14 items 3
// and 7): the obligation arms — discharged by the author, answered but not
// discharged, nobody answers, discharged by the delegate — and a control
// with returns disabled, each a sequence of steps under a fake clock,
// checked against the rungs (returns and escalations) the ledger records.
// Two relays share each store and both run the scheduler at every tick, so
// every row also checks that a rung is recorded once.

// rstep is one step of a returns scenario: one of send, reply, discharge,
// claim or tick.
type rstep struct {
	// send: an obligation from from (CHATGPT when empty) to to, with
	// delegate and deadline.
	send                         bool
	from, to, delegate, deadline string
	// intent (REQUEST when empty) and meta (a HANDOFF's or BLOCKED's
	// block) of the send.
	intent string
	meta   func(*envelope.Envelope)
	// ack, resolve: actor acknowledges or resolves it.
	ack, resolve string
	// reply: actor answers the obligation with a RESPOND and an ACK.
	reply string
	// discharge: actor discharges it (by the API).
	discharge string
	// claim: actor claims it.
	claim string
	// tick moves the clock and runs both relays' schedulers.
	tick time.Duration
}

func oblige(to string) rstep               { return rstep{send: true, to: to} }
func (s rstep) delegatedTo(d string) rstep { s.delegate = d; return s }
func (s rstep) due(d string) rstep         { s.deadline = d; return s }
func tick(d time.Duration) rstep           { return rstep{tick: d} }
func ticks(n int) []rstep                  { return slices.Repeat([]rstep{tick(15 * time.Minute)}, n) }

// rungWant is one recorded rung: its number, notice kind, escalation
// target and addressees.
type rungWant struct {
	rung int
	kind string
	to   string // comma-separated, sorted
}

type returnsScenario struct {
	name    string
	returns int // 0: disabled
	steps   []rstep
	// rungs are the rungs recorded at the end, in order.
	rungs []rungWant
	// owed: claude (or the first addressee) still owes the obligation.
	owed bool
	// noneAfter, when > 0, checks that no rung had been recorded after
	// that many steps.
	noneAfter int
}

func ret(rung int, to string) rungWant { return rungWant{rung, gateway.NoticeObligationReturn, to} }
func esc(rung int, to string) rungWant { return rungWant{rung, gateway.NoticeObligationEscalation, to} }

func steps(parts ...any) []rstep {
	var out []rstep
	for _, p := range parts {
		switch p := p.(type) {
		case rstep:
			out = append(out, p)
		case []rstep:
			out = append(out, p...)
		}
	}
	return out
}

// returnsConformance is the table. The book (returnsBook): claude and
// chatgpt are reviewers, lead is the coordinator, pat the human.
var returnsConformance = []returnsScenario{
	{name: "discharged by the author", returns: 3,
		steps: steps(oblige("CLAUDE"), tick(15*time.Minute), rstep{discharge: "chatgpt"}, ticks(6)),
		rungs: []rungWant{ret(1, "claude")}},
	{name: "recipient replies, author has not discharged: returns continue", returns: 3,
		steps: steps(oblige("CLAUDE"), rstep{reply: "CLAUDE"}, ticks(3)),
		rungs: []rungWant{ret(1, "claude"), ret(2, "claude"), ret(3, "claude")}, owed: true},
	{name: "nobody answers: returns, then the coordinator, then the human", returns: 3,
		steps: steps(oblige("CLAUDE"), ticks(8)),
		rungs: []rungWant{ret(1, "claude"), ret(2, "claude"), ret(3, "claude"), esc(4, "lead"), esc(5, "pat")}, owed: true},
	{name: "delegate discharges", returns: 3,
		steps: steps(oblige("CLAUDE").delegatedTo("GEMINI"), ticks(2), rstep{discharge: "gemini"}, ticks(6)),
		rungs: []rungWant{ret(1, "claude"), ret(2, "claude")}},
	// BeadBoard §6.2 (docs/agents.md "Handoff and blocked"): the
	// addressee's ack closes a HANDOFF; a BLOCKED acknowledged but not
	// resolved escalates, and resolving it ends the ladder.
	{name: "HANDOFF acknowledged by its addressee", returns: 3,
		steps: steps(rstep{send: true, to: "CLAUDE", intent: "HANDOFF", meta: handoffMeta}, tick(15*time.Minute), rstep{ack: "claude"}, ticks(5)),
		rungs: []rungWant{ret(1, "claude")}},
	{name: "BLOCKED acknowledged, then resolved", returns: 3,
		steps: steps(rstep{send: true, to: "CLAUDE", meta: blockedMeta}, tick(15*time.Minute), rstep{ack: "claude"}, tick(15*time.Minute),
			rstep{resolve: "claude"}, ticks(5)),
		rungs: []rungWant{ret(1, "claude"), esc(4, "lead")}},
	{name: "control: returns disabled", returns: 0,
		steps: steps(oblige("CLAUDE"), ticks(8)), owed: true},
	{name: "nothing returns before the interval", returns: 3,
		steps: steps(oblige("CLAUDE"), tick(14*time.Minute), tick(time.Minute)),
		rungs: []rungWant{ret(1, "claude")}, owed: true, noneAfter: 2},
	{name: "the deadline drives the first return", returns: 3,
		steps: steps(oblige("CLAUDE").due("40m"), ticks(2), tick(10*time.Minute), tick(14*time.Minute), tick(time.Minute)),
		rungs: []rungWant{ret(1, "claude"), ret(2, "claude")}, owed: true, noneAfter: 3},
	{name: "one return per interval after a long silence", returns: 3,
		steps: steps(oblige("CLAUDE"), tick(5*time.Hour), tick(time.Minute)),
		rungs: []rungWant{ret(1, "claude")}, owed: true},
	{name: "a role's obligation returns to every holder until one claims", returns: 2,
		// The claim lasts 10 min (gateway.DefaultClaimTTL): claude renews
		// it before the second return.
		steps: steps(rstep{send: true, from: "GEMINI", to: "@reviewer"}, tick(15*time.Minute), rstep{claim: "claude"},
			tick(9*time.Minute), rstep{claim: "claude"}, tick(6*time.Minute), ticks(2)),
		rungs: []rungWant{ret(1, "chatgpt,claude"), ret(2, "claude"), esc(3, "lead"), esc(4, "pat")}, owed: true},
}

// returnsBook is testBook plus a coordinator and a human.
func returnsBook(t testing.TB) *gateway.AddressBook {
	t.Helper()
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
		{ID: "gemini", Names: []string{"GEMINI"}},
		{ID: "lead", Names: []string{"LEAD"}, Roles: []string{"coordinator"}},
		{ID: "pat", Names: []string{"PAT"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return book
}

func TestReturnsConformance(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite", "jetstream"} {
		t.Run(kind, func(t *testing.T) {
			clock := &testClock{}
			// Every store stamps events with the real time, as SQLite and
			// JetStream do; the relays' clock runs ahead of it.
			st := openStore(t, kind, time.Now)
			book := returnsBook(t)
			r := gateway.New(st, &gateway.Options{Book: book, Now: clock.now})
			other := gateway.New(st, &gateway.Options{Book: book, Now: clock.now}) // a second relay on the same ledger
			for n, sc := range returnsConformance {
				t.Run(sc.name, func(t *testing.T) {
					runReturnsScenario(t, r, other, clock, fmt.Sprintf("r%02d", n), sc)
				})
			}
		})
	}
}

func runReturnsScenario(t *testing.T, r, other *gateway.Relay, clock *testClock, group string, sc returnsScenario) {
	ctx := context.Background()
	clock.add(-clock.offset())
	opts := &gateway.ReturnsOptions{Interval: 15 * time.Minute, Returns: sc.returns, Human: "PAT"}
	rts := []*gateway.Returner{r.NewReturner(opts), other.NewReturner(opts)}
	var ob ledger.Event
	var msg string
	for i, s := range sc.steps {
		switch {
		case s.send:
			from := cmp.Or(s.from, "CHATGPT")
			mod := obliged("halted", s.delegate, s.deadline)
			if s.meta != nil {
				mod = s.meta
			}
			text := env(from, s.to, cmp.Or(s.intent, "REQUEST"), group, "review PR 7 before I ship", mod)
			outs := ingest(t, r, "", text)
			if !outs[0].Accepted() {
				t.Fatalf("step %d refused: %+v", i, outs[0].Reject)
			}
			ob, msg = outs[0].Event, data(t, outs[0].Event).X.Envelope.Message
		case s.reply != "":
			for _, intent := range []string{"RESPOND", "ACK"} {
				ingest(t, r, "", env(s.reply, "CHATGPT", intent, group, "looks fine", func(e *envelope.Envelope) { e.Parent = msg }))
			}
		case s.discharge != "":
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDischarge, Group: group, EventID: ob.ID, Actor: s.discharge}); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case s.ack != "" || s.resolve != "":
			req := gateway.ActionRequest{Action: gateway.ActionAck, Group: group, EventID: ob.ID, Actor: s.ack}
			if s.resolve != "" {
				req.Action, req.Actor = gateway.ActionResolve, s.resolve
			}
			if _, err := r.Act(ctx, req); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case s.claim != "":
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: group, EventID: ob.ID, Actor: s.claim}); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case s.tick != 0:
			clock.add(s.tick)
			for _, rt := range rts {
				if _, _, err := rt.Step(ctx); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
		}
		if sc.noneAfter == i+1 {
			if got := rungsOf(t, r, group); len(got) != 0 {
				t.Errorf("after step %d: rungs %v, want none yet", i, got)
			}
		}
	}
	got := rungsOf(t, r, group)
	var gotWant []rungWant
	for _, g := range got {
		gotWant = append(gotWant, g.want)
		if g.related != ob.ID {
			t.Errorf("rung %d names event %s, want %s", g.want.rung, g.related, ob.ID)
		}
		// Every addressee of a rung gets it as a knock it must
		// acknowledge.
		for _, a := range strings.Split(g.want.to, ",") {
			d := deliveryIn(t, r, a, group, g.id)
			if d == nil || d.Directedness != attention.ToMe || d.Policy != attention.AckOnly || d.Injection != attention.Notify || d.Expired ||
				d.Knock == nil || !strings.HasPrefix(d.Knock.Topic, "message about obligation ") {
				t.Errorf("%s's delivery of rung %d = %+v, want to_me ack_only notify, not expired, topic about the obligation", a, g.want.rung, d)
			}
		}
	}
	if fmt.Sprint(gotWant) != fmt.Sprint(sc.rungs) {
		t.Errorf("rungs = %v,\n want %v", gotWant, sc.rungs)
	}
	// The author's waiting list shows how far up the ladder it is.
	if ws, err := r.Waiting(ctx, ob.By); err != nil {
		t.Fatal(err)
	} else if len(sc.rungs) > 0 && sc.owed {
		last := sc.rungs[len(sc.rungs)-1]
		i := slices.IndexFunc(ws, func(w gateway.Waiting) bool { return w.EventID == ob.ID })
		if i < 0 || ws[i].Rung != last.rung || (ws[i].EscalatedTo != "") != (last.kind == gateway.NoticeObligationEscalation) {
			t.Errorf("%s's waiting list = %+v, want the obligation at rung %d", ob.By, ws, last.rung)
		}
	}
	owner := "claude"
	d := deliveryIn(t, r, owner, group, ob.ID)
	if d == nil || d.Owes() != sc.owed {
		t.Errorf("%s's obligation delivery = %+v, want owed=%v", owner, d, sc.owed)
	}
}

type recordedRung struct {
	want    rungWant
	id      string
	related string
}

// rungsOf returns the rungs recorded in group, in ledger order.
func rungsOf(t *testing.T, r *gateway.Relay, group string) []recordedRung {
	t.Helper()
	evs, err := r.Store().Range(context.Background(), group, 0, []string{gateway.KindNotify}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []recordedRung
	for _, ev := range evs {
		var d struct {
			Kind           string   `json:"kind"`
			To             []string `json:"to"`
			Rung           int      `json:"rung"`
			RelatedEventID string   `json:"related_event_id"`
			RequiresAck    bool     `json:"requires_ack"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Rung == 0 {
			continue
		}
		if !d.RequiresAck {
			t.Errorf("rung %d without requires_ack", d.Rung)
		}
		to := slices.Sorted(slices.Values(d.To))
		out = append(out, recordedRung{want: rungWant{d.Rung, d.Kind, strings.Join(to, ",")}, id: ev.ID, related: d.RelatedEventID})
	}
	return out
}

func deliveryIn(t *testing.T, r *gateway.Relay, agent, group, eventID string) *gateway.Delivery {
	t.Helper()
	ds, err := r.Deliveries(context.Background(), agent, group, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ds {
		if ds[i].EventID == eventID {
			return &ds[i]
		}
	}
	return nil
}
