package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

func withMeta(ns string, kv ...string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) {
		m := envelope.Meta{Namespace: ns}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Fields = append(m.Fields, envelope.Field{Key: kv[i], Value: kv[i+1]})
		}
		e.Meta = append(e.Meta, m)
	}
}

var (
	handoffMeta = withMeta("handoff", "Subject", "auth refactor", "Summary", "token parsing moved to auth/token.go", "Next-Action", "wire the refresh path")
	blockedMeta = withMeta("blocked", "Subject", "schema review", "Blocker", "migration 12 needs a decision", "Requested-Action", "pick option A or B", "Urgency", "High")
)

func notices(t *testing.T, r *gateway.Relay, group string) []ledger.Event {
	t.Helper()
	evs, err := r.Store().Range(context.Background(), group, 0, []string{gateway.KindNotify}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestHandoffNeedsAck: a HANDOFF carries BeadBoard §6.2's payload, is owed
// by its addressee until it acknowledges it (by the API or an ACK
// envelope), and waits for its author until then; the author may withdraw
// it instead (discharge).
func TestHandoffNeedsAck(t *testing.T) {
	ctx := context.Background()
	for _, arm := range []string{"ack by the API", "ack by envelope", "author withdraws"} {
		t.Run(arm, func(t *testing.T) {
			r := newRelay(t, nil)
			ev := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "g", "over to you", handoffMeta))[0].Event
			d := data(t, ev)
			want := gateway.Protocol{EventType: "HANDOFF", Subject: "auth refactor", Summary: "token parsing moved to auth/token.go", NextAction: "wire the refresh path", RequiresAck: true}
			if d.Protocol == nil || *d.Protocol != want || d.Priority != "attention" || d.Obligation == nil || !d.Obligation.Ack {
				t.Fatalf("data = protocol %+v priority %q obligation %+v, want %+v, attention, an ack obligation", d.Protocol, d.Priority, d.Obligation, want)
			}
			if got := d.Protocol.Label(); got != "Passed to" {
				t.Errorf("label = %q, want Passed to (BeadBoard §6.3)", got)
			}
			if del := deliveryOf(t, r, "claude", ev.ID); del.Policy != attention.MustRespond || !del.Owes() {
				t.Errorf("addressee's delivery = %s owes=%v, want must_respond owed", del.Policy, del.Owes())
			}
			if ws, err := r.Waiting(ctx, "chatgpt"); err != nil || len(ws) != 1 || ws[0].Protocol == nil || ws[0].Protocol.EventType != "HANDOFF" {
				t.Fatalf("author waiting = %+v, %v, want the handoff", ws, err)
			}
			// Nobody else acknowledges it for the addressee.
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: ev.ID, Actor: "gemini"}); !isCode(err, gateway.CodePermission) {
				t.Errorf("gemini's ack = %v, want permission_denied", err)
			}
			switch arm {
			case "ack by the API":
				if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: ev.ID, Actor: "claude"}); err != nil {
					t.Fatal(err)
				}
			case "ack by envelope":
				ingest(t, r, "", env("CLAUDE", "CHATGPT", "ACK", "g", "accepted", func(e *envelope.Envelope) { e.Parent = d.X.Envelope.Message }))
			case "author withdraws":
				if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: ev.ID, Actor: "chatgpt"}); err != nil {
					t.Fatal(err)
				}
			}
			if del := deliveryOf(t, r, "claude", ev.ID); del.Owes() {
				t.Errorf("after %s the addressee still owes it: %+v", arm, del)
			}
			if ws, err := r.Waiting(ctx, "chatgpt"); err != nil || len(ws) != 0 {
				t.Errorf("after %s the author still waits: %+v, %v", arm, ws, err)
			}
		})
	}
}

// TestBlockedResolutionNotifies: a BLOCKED is owed by its addressee until
// acknowledged, and waits for its author until the addressee resolves it
// (the resolve action or a CLOSE answering it); then the author gets one
// system.notify "unblocked". Nobody else's resolve unblocks it.
func TestBlockedResolutionNotifies(t *testing.T) {
	ctx := context.Background()
	for _, arm := range []string{"resolve action", "CLOSE envelope"} {
		t.Run(arm, func(t *testing.T) {
			r := newRelay(t, nil)
			ev := ingest(t, r, "", env("CLAUDE", "CHATGPT", "REQUEST", "g", "I am stuck", blockedMeta))[0].Event
			d := data(t, ev)
			if p := d.Protocol; p == nil || p.EventType != "BLOCKED" || p.Urgency != "high" || p.Blocker != "migration 12 needs a decision" ||
				p.RequestedAction != "pick option A or B" || !p.RequiresAck || p.Label() != "Needs input" {
				t.Fatalf("protocol = %+v", p)
			}
			if d.Obligation == nil || d.Obligation.Blocks != attention.BlocksHalted {
				t.Errorf("obligation = %+v, want the author halted", d.Obligation)
			}
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: ev.ID, Actor: "chatgpt"}); err != nil {
				t.Fatal(err)
			}
			if del := deliveryOf(t, r, "chatgpt", ev.ID); del.Owes() || !del.Acked {
				t.Errorf("acknowledged blocker: owes=%v acked=%v, want settled for the addressee", del.Owes(), del.Acked)
			}
			ws, err := r.Waiting(ctx, "claude")
			if err != nil || len(ws) != 1 || strings.Join(ws[0].Evidence, ",") != "chatgpt" {
				t.Fatalf("blocked author waiting = %+v, %v, want the blocker with chatgpt's ack as evidence", ws, err)
			}
			if open, err := r.OpenProtocol(ctx); err != nil || len(open) != 1 || strings.Join(open[0].Acked, ",") != "chatgpt" {
				t.Errorf("open protocol events = %+v, %v, want the blocker accepted by chatgpt", open, err)
			}
			// The author and a bystander resolving it unblock nobody.
			for _, actor := range []string{"claude", "gemini"} {
				if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionResolve, Group: "g", EventID: ev.ID, Actor: actor}); err != nil {
					t.Fatal(err)
				}
			}
			if n := notices(t, r, "g"); len(n) != 0 {
				t.Fatalf("notices before the addressee resolved = %d, want none", len(n))
			}
			for range 2 { // a retry notifies once
				switch arm {
				case "resolve action":
					if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionResolve, Group: "g", EventID: ev.ID, Actor: "chatgpt", Note: "took option A"}); err != nil {
						t.Fatal(err)
					}
				case "CLOSE envelope":
					ingest(t, r, "", env("CHATGPT", "CLAUDE", "CLOSE", "g", "took option A", func(e *envelope.Envelope) {
						e.Parent, e.Message = d.X.Envelope.Message, "close-1"
					}))
				}
			}
			n := notices(t, r, "g")
			if len(n) != 1 {
				t.Fatalf("notices = %d, want one unblocked", len(n))
			}
			nd := data(t, n[0])
			if nd.Kind != gateway.KindUnblocked || nd.TargetActorID != "claude" || nd.RelatedEventID != ev.ID || !strings.Contains(nd.Message, "took option A") {
				t.Errorf("notice = %+v", nd)
			}
			if del := deliveryOf(t, r, "claude", n[0].ID); del.Policy == attention.MustNotRespond {
				t.Errorf("the blocked agent's delivery of the notice = %+v, want it shown", del)
			}
			if ws, err := r.Waiting(ctx, "claude"); err != nil || len(ws) != 0 {
				t.Errorf("blocked author waiting after resolution = %+v, %v, want nothing", ws, err)
			}
			if open, err := r.OpenProtocol(ctx); err != nil || len(open) != 0 {
				t.Errorf("open protocol events after resolution = %+v, %v, want none", open, err)
			}
		})
	}
}

// TestProtocolRefused: bad handoff, blocker and provenance blocks are
// refused with E-FORMAT naming what is wrong.
func TestProtocolRefused(t *testing.T) {
	r := newRelay(t, nil)
	for _, tc := range []struct {
		name, to, intent string
		mod              func(*envelope.Envelope)
		want             string
	}{
		{"handoff without next action", "CLAUDE", "HANDOFF", withMeta("handoff", "Subject", "s", "Summary", "x"), "Next-Action"},
		{"handoff on a REQUEST", "CLAUDE", "REQUEST", handoffMeta, "belongs on a HANDOFF"},
		{"handoff to everyone", "ALL", "HANDOFF", handoffMeta, "one agent"},
		{"blocked on a role", "@reviewer", "REQUEST", blockedMeta, "one agent"},
		{"blocker with a bad urgency", "CLAUDE", "REQUEST", withMeta("blocked", "Subject", "s", "Blocker", "b", "Requested-Action", "r", "Urgency", "urgent"), "Urgency"},
		{"blocker on a HANDOFF", "CLAUDE", "HANDOFF", blockedMeta, "REQUEST or an ESCALATE"},
		{"both", "CLAUDE", "HANDOFF", func(e *envelope.Envelope) { handoffMeta(e); blockedMeta(e) }, "not both"},
		{"handoff to oneself", "CHATGPT", "HANDOFF", handoffMeta, "another agent"},
		{"blocked on oneself", "chatgpt", "REQUEST", blockedMeta, "another agent"},
		{"handoff subject with a terminal escape", "CLAUDE", "HANDOFF", withMeta("handoff", "Subject", "\x1b]0;pwned\x07", "Summary", "x", "Next-Action", "y"), "Subject"},
		{"blocker with a line separator", "CLAUDE", "REQUEST", withMeta("blocked", "Subject", "s", "Blocker", "b\u2028c", "Requested-Action", "r", "Urgency", "low"), "Blocker"},
		{"provenance without event", "CLAUDE", "REQUEST", withMeta("provenance", "Src-Group-Id", "a"), "without src_event_id"},
		{"provenance without group", "CLAUDE", "REQUEST", withMeta("provenance", "Src-Event-Id", "e1"), "without src_group_id"},
		{"provenance summarized maybe", "CLAUDE", "REQUEST", withMeta("provenance", "Src-Group-Id", "a", "Src-Event-Id", "e1", "Summarized", "maybe"), "Summarized"},
		{"provenance on an ACK", "CLAUDE", "ACK", withMeta("provenance", "Src-Group-Id", "a", "Src-Event-Id", "e1"), "not a ACK"},
	} {
		outs := ingest(t, r, "", env("CHATGPT", tc.to, tc.intent, "g", "x", tc.mod))
		if outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeFormat || !strings.Contains(outs[0].Reject.Reason, tc.want) {
			t.Errorf("%s: %+v, want E-FORMAT naming %q", tc.name, outs[0].Reject, tc.want)
		}
	}
}

// TestProvenance is CCCS §9 as a table: a forward appends a chat.message
// in the destination group with src_group_id/src_event_id, the original
// text verbatim or a summary that says so; provenance set by a client
// needs both ids; a forward of something its forwarder was not shown, of
// a non-message, of an unknown event or into its own group is refused.
func TestProvenance(t *testing.T) {
	ctx := context.Background()
	r := newRelay(t, nil)
	src := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "alpha", "please review the release checklist today"))[0].Event
	private := ingest(t, r, "", env("CHATGPT", "GEMINI", "REQUEST", "alpha", "between us"))[0].Event
	read, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionRead, Group: "alpha", EventID: src.ID, Actor: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(actor string, req gateway.SendRequest) []gateway.Outcome {
		t.Helper()
		text, err := r.Compose(ctx, actor, req, nil)
		if err != nil {
			t.Fatalf("Compose = %v", err)
		}
		return ingest(t, r, "", string(text))
	}
	for _, tc := range []struct {
		name     string
		actor    string
		req      gateway.ForwardRequest
		wantCode string // "" when forwarded
		wantText string
		summary  bool
	}{
		{"verbatim", "claude", gateway.ForwardRequest{EventID: src.ID, ToGroup: "beta"}, "", "please review the release checklist today", false},
		{"summarised says so", "claude", gateway.ForwardRequest{EventID: src.ID, ToGroup: "beta", Summary: "review the checklist"}, "", "[Summarized] review the checklist", true},
		{"not shown to the forwarder", "claude", gateway.ForwardRequest{EventID: private.ID, ToGroup: "beta"}, gateway.CodePermission, "", false},
		{"not a message", "claude", gateway.ForwardRequest{EventID: read.Event.ID, ToGroup: "beta"}, gateway.CodeInvalid, "", false},
		{"unknown event", "claude", gateway.ForwardRequest{EventID: "nope", ToGroup: "beta"}, gateway.CodeNotFound, "", false},
		{"into its own group", "claude", gateway.ForwardRequest{EventID: src.ID, ToGroup: "alpha"}, gateway.CodeInvalid, "", false},
		{"no destination", "claude", gateway.ForwardRequest{EventID: src.ID}, gateway.CodeInvalid, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := r.Forward(ctx, tc.actor, tc.req)
			if tc.wantCode != "" {
				if !isCode(err, tc.wantCode) {
					t.Fatalf("Forward = %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			outs := send(tc.actor, req)
			ev := outs[0].Event
			d := data(t, ev)
			if outs[0].Reject != nil || ev.GroupID != "beta" || ev.Kind != gateway.KindMessage || ev.By != "claude" {
				t.Fatalf("forwarded = %+v in %s by %s, %+v", ev.Kind, ev.GroupID, ev.By, outs[0].Reject)
			}
			if d.SrcGroupID != "alpha" || d.SrcEventID != src.ID || d.Text != tc.wantText || d.Summarized != tc.summary {
				t.Errorf("data = src %s/%s text %q summarized %v, want alpha/%s %q %v", d.SrcGroupID, d.SrcEventID, d.Text, d.Summarized, src.ID, tc.wantText, tc.summary)
			}
		})
	}
	t.Run("client sets both", func(t *testing.T) {
		outs := send("gemini", gateway.SendRequest{To: "ALL", Intent: "BROADCAST", Context: "beta", Body: "Relayed: ship it", SrcGroupID: "elsewhere", SrcEventID: "01HZY2"})
		if d := data(t, outs[0].Event); outs[0].Reject != nil || d.SrcGroupID != "elsewhere" || d.SrcEventID != "01HZY2" || d.Summarized {
			t.Errorf("client provenance = %+v %+v", outs[0].Reject, d.Provenance)
		}
	})
	t.Run("a source this ledger holds in another group is refused", func(t *testing.T) {
		outs := send("gemini", gateway.SendRequest{To: "CLAUDE", Intent: "REQUEST", Context: "beta", Body: "Forwarded from secret",
			SrcGroupID: "secret", SrcEventID: src.ID})
		if outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeFormat || !strings.Contains(outs[0].Reject.Reason, `group "alpha"`) {
			t.Errorf("forged source group = %+v, want E-FORMAT naming the real group", outs[0].Reject)
		}
	})
	if _, err := r.Compose(ctx, "gemini", gateway.SendRequest{To: "ALL", Intent: "BROADCAST", Body: "x", Summarized: true}, nil); !isCode(err, gateway.CodeInvalid) {
		t.Errorf("summarized without provenance = %v, want invalid_request", err)
	}
	for _, half := range []gateway.SendRequest{{SrcGroupID: "alpha"}, {SrcEventID: src.ID}} {
		half.To, half.Intent, half.Body = "ALL", "BROADCAST", "x"
		if _, err := r.Compose(ctx, "gemini", half, nil); !isCode(err, gateway.CodeInvalid) || !strings.Contains(err.Error(), "both or neither") {
			t.Errorf("Compose with %+v = %v, want invalid_request naming both or neither", half, err)
		}
	}
	// Neither: an ordinary message carries no provenance.
	if d := data(t, src); d.SrcGroupID != "" || d.SrcEventID != "" {
		t.Errorf("plain message provenance = %+v", d.Provenance)
	}
}

// TestSendHandoffAndBlocked: the API's typed fields make the same events
// as the META blocks.
func TestSendHandoffAndBlocked(t *testing.T) {
	ctx := context.Background()
	r := newRelay(t, nil)
	for _, req := range []gateway.SendRequest{
		{To: "CLAUDE", Context: "g", Body: "yours", Handoff: &gateway.Handoff{Subject: "s", Summary: "done half", NextAction: "do the rest"}},
		{To: "CLAUDE", Context: "g", Body: "help", Blocked: &gateway.Blocked{Subject: "s", Blocker: "b", RequestedAction: "r", Urgency: "low"}},
	} {
		text, err := r.Compose(ctx, "chatgpt", req, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs := ingest(t, r, "", string(text))
		if p := data(t, outs[0].Event).Protocol; outs[0].Reject != nil || p == nil {
			t.Errorf("send %+v = %+v, protocol %+v", req, outs[0].Reject, p)
		}
	}
	bad := gateway.SendRequest{To: "CLAUDE", Body: "x", Blocked: &gateway.Blocked{Subject: "s", Blocker: "b", RequestedAction: "r"}}
	if _, err := r.Compose(ctx, "chatgpt", bad, nil); !isCode(err, gateway.CodeInvalid) || !strings.Contains(err.Error(), "Urgency") {
		t.Errorf("blocked without urgency = %v, want invalid_request naming Urgency", err)
	}
}

// FuzzProtocolBlocks sends HANDOFF, BLOCKED and provenance blocks with
// arbitrary values: the relay refuses them with E-FORMAT or records what
// the rules allow — a protocol event with every field set, one line each,
// an urgency of the three, requires_ack; provenance with both ids or
// neither.
func FuzzProtocolBlocks(f *testing.F) {
	f.Add("HANDOFF", "s", "m", "n", "high", "g", "e1", "yes")
	f.Add("REQUEST", "s", "b", "r", "Medium", "", "e1", "")
	f.Add("ESCALATE", "", "b", "r", "low", "g", "", "no")
	f.Add("ACK", "s\nx", "b", "r", "urgent", "g g", "e1", "maybe")
	f.Fuzz(func(t *testing.T, intent, subject, a, b, urgency, srcGroup, srcEvent, summarized string) {
		st := memory.New(nil)
		defer st.Close()
		r := gateway.New(st, &gateway.Options{Book: testBook(t)})
		e := envelope.New("CHATGPT", "CLAUDE", intent, "body")
		e.Context = "g"
		if intent == "HANDOFF" {
			withMeta("handoff", "Subject", subject, "Summary", a, "Next-Action", b)(e)
		} else {
			withMeta("blocked", "Subject", subject, "Blocker", a, "Requested-Action", b, "Urgency", urgency)(e)
		}
		withMeta("provenance", "Src-Group-Id", srcGroup, "Src-Event-Id", srcEvent, "Summarized", summarized)(e)
		text, err := envelope.Marshal(e)
		if err != nil {
			return // not an envelope the writer makes
		}
		outs, err := r.Ingest(context.Background(), gateway.Intake{Transport: "fuzz", Data: strings.NewReader(string(text))})
		if err != nil {
			t.Fatal(err)
		}
		o := outs[0]
		if o.Reject != nil {
			if o.Reject.Code == "" {
				t.Fatalf("refusal without a code: %+v", o.Reject)
			}
			return
		}
		d, err := gateway.ParseData(o.Event)
		if err != nil {
			t.Fatal(err)
		}
		if o.Event.Kind != gateway.KindMessage {
			return // an ACK or the like: no protocol recorded
		}
		if (d.SrcGroupID == "") != (d.SrcEventID == "") {
			t.Fatalf("provenance with one id: %+v", d.Provenance)
		}
		p := d.Protocol
		if p == nil || !p.RequiresAck || d.Priority != "attention" || d.Obligation == nil || !d.Obligation.Ack {
			t.Fatalf("accepted %s without its protocol: %+v", intent, d)
		}
		for _, v := range []string{p.Subject, p.Summary + p.NextAction + p.Blocker + p.RequestedAction} {
			if v == "" || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("protocol field %q recorded", v)
			}
		}
		if p.EventType == gateway.ProtocolBlocked && p.Urgency != "low" && p.Urgency != "medium" && p.Urgency != "high" {
			t.Fatalf("urgency %q recorded", p.Urgency)
		}
	})
}

// benchLedger is a ledger of 20,000 plain messages and 100 open
// handoffs from chatgpt to claude.
func benchLedger(b *testing.B) ledger.Store {
	ctx := context.Background()
	st := memory.New(nil)
	b.Cleanup(func() { st.Close() })
	r := gateway.New(st, &gateway.Options{Book: testBook(b)})
	recs := make([]ledger.Record, 0, 20000)
	for range 20000 {
		recs = append(recs, ledger.Record{Kind: gateway.KindMessage, GroupID: "g", By: "gemini", Data: []byte(`{"text":"x","to":["claude"]}`)})
	}
	if _, err := st.Append(ctx, recs); err != nil {
		b.Fatal(err)
	}
	for range 100 {
		if _, err := r.Ingest(ctx, gateway.Intake{Transport: "bench", Data: strings.NewReader(env("CHATGPT", "CLAUDE", "HANDOFF", "g", "x", handoffMeta))}); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

func openProtocol(b *testing.B, r *gateway.Relay) {
	if open, err := r.OpenProtocol(context.Background()); err != nil || len(open) != 100 {
		b.Fatalf("OpenProtocol = %d, %v", len(open), err)
	}
}

// BenchmarkOpenProtocol measures the handoffs page's query once the relay
// has walked the ledger: later calls read only what was appended since.
// BenchmarkOpenProtocolCold is its first call, which walks all of it.
func BenchmarkOpenProtocol(b *testing.B) {
	r := gateway.New(benchLedger(b), &gateway.Options{Book: testBook(b)})
	openProtocol(b, r)
	for b.Loop() {
		openProtocol(b, r)
	}
}

// BenchmarkOpenProtocolCold is the first call of a relay: the baseline of
// BenchmarkOpenProtocol.
func BenchmarkOpenProtocolCold(b *testing.B) {
	st := benchLedger(b)
	for b.Loop() {
		openProtocol(b, gateway.New(st, &gateway.Options{Book: testBook(b)}))
	}
}
