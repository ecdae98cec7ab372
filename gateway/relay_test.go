package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// testBook is the address book of newRelay's default relay: claude and
// chatgpt are reviewers, gemini has no role.
func testBook(t testing.TB) *gateway.AddressBook {
	t.Helper()
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return book
}

func newRelay(t *testing.T, opts *gateway.Options) *gateway.Relay {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if opts == nil {
		opts = &gateway.Options{Book: testBook(t)}
	}
	return gateway.New(st, opts)
}

// env composes an envelope text (testrelay.Envelope).
var env = testrelay.Envelope

func ingest(t *testing.T, r *gateway.Relay, principal, text string) []gateway.Outcome {
	t.Helper()
	outs, err := r.Ingest(context.Background(), gateway.Intake{Transport: "test", Principal: principal, Data: strings.NewReader(text)})
	if err != nil {
		t.Fatalf("Ingest = %v", err)
	}
	return outs
}

func data(t *testing.T, ev ledger.Event) gateway.EventData {
	t.Helper()
	d, err := gateway.ParseData(ev)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestIngestMapsIntents(t *testing.T) {
	r := newRelay(t, nil)
	tests := []struct {
		intent   string
		to       string
		kind     string
		priority string
		recips   []string
	}{
		{"REQUEST", "CLAUDE", gateway.KindMessage, "normal", []string{"claude"}},
		{"RESPOND", "CLAUDE", gateway.KindMessage, "normal", []string{"claude"}},
		{"POLL", "@reviewer", gateway.KindMessage, "normal", []string{"@reviewer"}},
		{"CLOSE", "CLAUDE", gateway.KindMessage, "normal", []string{"claude"}},
		{"HANDOFF", "CLAUDE", gateway.KindMessage, "attention", []string{"claude"}},
		{"ESCALATE", "CLAUDE", gateway.KindMessage, "attention", []string{"claude", "@user"}},
		{"BROADCAST", "CLAUDE", gateway.KindMessage, "normal", nil},
		{"REQUEST", "ALL", gateway.KindMessage, "normal", []string{"@all"}},
		{"WIBBLE", "CLAUDE", gateway.KindMessage, "normal", []string{"claude"}},
		{"NACK", "CLAUDE", gateway.KindReaction, "", nil},
		{"ACK", "CLAUDE", gateway.KindReaction, "", nil},
		{"ERROR", "CLAUDE", gateway.KindNotify, "", nil},
		{"REVOKE", "CLAUDE", gateway.KindNotify, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.intent+"→"+tt.to, func(t *testing.T) {
			outs := ingest(t, r, "", env("CHATGPT", tt.to, tt.intent, "topic", "hello"))
			if len(outs) != 1 || !outs[0].Accepted() {
				t.Fatalf("outcomes = %+v", outs)
			}
			ev := outs[0].Event
			if ev.Kind != tt.kind || ev.GroupID != "topic" || ev.By != "chatgpt" {
				t.Errorf("event = %s group %s by %s, want %s topic chatgpt", ev.Kind, ev.GroupID, ev.By, tt.kind)
			}
			d := data(t, ev)
			if tt.kind == gateway.KindMessage && (d.Priority != tt.priority || strings.Join(d.To, ",") != strings.Join(tt.recips, ",") || d.Text != "hello") {
				t.Errorf("data = priority %q to %q text %q, want %q %q", d.Priority, d.To, d.Text, tt.priority, tt.recips)
			}
			if d.X == nil || d.X.Envelope == nil || d.X.Verified || d.X.Verification != gateway.StatusUnsigned || !strings.HasPrefix(d.X.Raw, "[[CHATGPT→") {
				t.Errorf("x_crosstalk = %+v", d.X)
			}
		})
	}
}

func TestIngestIdempotent(t *testing.T) {
	r := newRelay(t, nil)
	text := env("CLAUDE", "CHATGPT", "REQUEST", "", "once")
	first := ingest(t, r, "", text)[0]
	for i := 0; i < 3; i++ {
		again := ingest(t, r, "", "noise before\n"+strings.ReplaceAll(text, "\n", "\r\n"))[0]
		if !again.Duplicate || again.Event.ID != first.Event.ID || again.Event.Seq != 1 {
			t.Fatalf("retry %d = %+v, want duplicate of %s", i, again.Event, first.Event.ID)
		}
	}
	// v1.0: no message id; de-duplicated by payload hash, id assigned.
	v10 := "[[CLAUDE→CHATGPT v1]]\nuser: kalle\nintent: QUESTION\nbody: |\n  old style\nsig: none\n[[END]]\n"
	a := ingest(t, r, "", v10)[0]
	b := ingest(t, r, "", "> "+strings.ReplaceAll(strings.TrimSuffix(v10, "\n"), "\n", "\n> ")+"\n")[0]
	if a.Duplicate || !b.Duplicate || a.Event.ID != b.Event.ID {
		t.Fatalf("v1.0 retries: %+v / %+v", a, b)
	}
	x := data(t, a.Event).X
	if !x.AssignedIDs || !envelope.IsULID(x.Envelope.Message) || x.Envelope.Thread != x.Envelope.Message {
		t.Errorf("assigned ids = %v %q %q", x.AssignedIDs, x.Envelope.Message, x.Envelope.Thread)
	}
	if g, _ := r.Store().Groups(context.Background()); len(g) != 1 || g[0].LastSeq != 2 {
		t.Errorf("groups = %+v, want default with 2 events", g)
	}
}

// TestIngestDuplicateDiffers: a resend under a recorded message id is a
// duplicate either way, and the recorded envelope stands; the outcome and
// the receipt say when the resend says something else, so that an edited
// envelope is not taken for recorded. What an honest retry changes (the
// session, trailing blanks, line ends, a fence or quote) is not a
// difference.
func TestIngestDuplicateDiffers(t *testing.T) {
	r := newRelay(t, nil)
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "line one\nline two")
	e.Context = "topic"
	first, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	rec := ingest(t, r, "", string(first))[0]
	variant := func(mod func(*envelope.Envelope)) string {
		c := *e
		mod(&c)
		b, err := envelope.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name    string
		text    string
		differs bool
	}{
		{"the same", string(first), false},
		{"CRLF, fenced, quoted", "```\n> " + strings.ReplaceAll(strings.TrimSuffix(string(first), "\n"), "\n", "\r\n> ") + "\n```\n", false},
		{"trailing blanks", strings.Replace(string(first), "  line one\n", "  line one  \t\n", 1), false},
		{"another session", variant(func(c *envelope.Envelope) { c.Session = "2020-01-01T00Z abcdef" }), false},
		{"edited body", variant(func(c *envelope.Envelope) { c.Body = "line one\nline 2" }), true},
		{"body cut short", variant(func(c *envelope.Envelope) { c.Body = "line one" }), true},
		{"another intent", variant(func(c *envelope.Envelope) { c.Intent = envelope.IntentRespond }), true},
		{"another receiver", variant(func(c *envelope.Envelope) { c.To = "GEMINI" }), true},
		{"another context", variant(func(c *envelope.Envelope) { c.Context = "elsewhere" }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ingest(t, r, "", tt.text)[0]
			if !o.Accepted() || !o.Duplicate || o.Event.ID != rec.Event.ID || o.Differs != tt.differs {
				t.Fatalf("outcome = accepted %v duplicate %v event %s differs %v, want a duplicate of %s, differs %v",
					o.Accepted(), o.Duplicate, o.Event.ID, o.Differs, rec.Event.ID, tt.differs)
			}
			receipt := r.Receipt(o)
			v, ok := receipt.MetaValue("receipt", "Differs")
			if tt.differs != ok || ok && v != "true" {
				t.Errorf("receipt Differs = %q, %v; want it only when the content differs", v, ok)
			}
			if tt.differs && !strings.Contains(receipt.Body, "other content") {
				t.Errorf("receipt body = %q, want it to say the content differs", receipt.Body)
			}
		})
	}
	// Another sender under the same id is refused: a message id is its
	// sender's.
	if o := ingest(t, r, "", variant(func(c *envelope.Envelope) { c.From = "GEMINI" }))[0]; o.Reject == nil || o.Reject.Code != envelope.CodePerm || o.Duplicate {
		t.Errorf("the same message id from GEMINI = rejection %v, duplicate %v; want E-PERM", o.Reject, o.Duplicate)
	}
	// So is a sender whose actor id only a case fold joins to the first
	// one's: ΑΣ is the actor ασ, Ας the actor ας (final sigma), another.
	sigma := envelope.New("ΑΣ", "CHATGPT", envelope.IntentRequest, "sigma")
	first, err = envelope.Marshal(sigma)
	if err != nil {
		t.Fatal(err)
	}
	if o := ingest(t, r, "", string(first))[0]; o.Reject != nil || o.Duplicate || o.Actor != "ασ" {
		t.Fatalf("envelope from ΑΣ = %+v, want recorded as ασ", o)
	}
	sigma.From = "Ας"
	again, err := envelope.Marshal(sigma)
	if err != nil {
		t.Fatal(err)
	}
	if o := ingest(t, r, "", string(again))[0]; o.Reject == nil || o.Reject.Code != envelope.CodePerm || o.Duplicate {
		t.Errorf("the same message id from Ας (actor %q) = rejection %v, duplicate %v; want E-PERM", o.Actor, o.Reject, o.Duplicate)
	}
	// Read leniently, as the intake reads it: an id that is no ULID.
	lenient := "[[CLAUDE→CHATGPT v1]]\nmessage: msg-7\nintent: REQUEST\n\nbody: |\n  first\nsig: none\n[[END]]\n"
	if o := ingest(t, r, "", lenient)[0]; !o.Accepted() || o.Duplicate {
		t.Fatalf("lenient envelope = %+v", o)
	}
	if o := ingest(t, r, "", strings.Replace(lenient, "  first", "  edited", 1))[0]; !o.Duplicate || !o.Differs {
		t.Errorf("edited lenient envelope = duplicate %v differs %v, want both", o.Duplicate, o.Differs)
	}
	// The first one stands.
	if got := data(t, rec.Event).Text; got != "line one\nline two" {
		t.Errorf("recorded text = %q", got)
	}
	if ev, err := r.Store().GetByDedupeKey(context.Background(), "msg:"+e.Message); err != nil || ev.ID != rec.Event.ID {
		t.Errorf("the message id's event = %s, %v; want the first, %s", ev.ID, err, rec.Event.ID)
	}
}

func TestIngestRejections(t *testing.T) {
	r := newRelay(t, nil)
	tests := []struct {
		name      string
		principal string
		text      string
		code      envelope.Code
	}{
		{"no envelope", "", "just chat", envelope.CodeFormat},
		{"duplicate field", "", "[[A→B v1]]\nintent: REQUEST\nintent: REQUEST\nbody: |\n  x\n[[END]]\n", envelope.CodeFormat},
		{"unterminated", "", "[[A→B v1]]\nintent: REQUEST\nbody: |\n  x\n", envelope.CodeFormat},
		{"v2", "", "[[A→B v2]]\nintent: REQUEST\nbody: |\n  x\n[[END]]\n", envelope.CodeUnsupported},
		{"forged sender", "chatgpt", env("CLAUDE", "GEMINI", "REQUEST", "", "I am claude"), envelope.CodePerm},
		{"too large", "", strings.Repeat("x", gateway.MaxIntake+1), envelope.CodeTooLarge},
		{"bookkeeping group", "", env("CHATGPT", "GEMINI", "REQUEST", "x.crosstalk.liveness", "beat"), envelope.CodeAddress},
		{"bookkeeping group in other case", "", env("CHATGPT", "GEMINI", "REQUEST", "X.Crosstalk.Reservations", "held"), envelope.CodeAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outs := ingest(t, r, tt.principal, tt.text)
			if len(outs) != 1 || outs[0].Reject == nil || outs[0].Reject.Code != tt.code {
				t.Fatalf("outcomes = %+v, want one rejection %s", outs, tt.code)
			}
			ev := outs[0].Event
			if ev.Kind != gateway.KindNotify || ev.By != "system" || data(t, ev).Kind != "error" || gateway.SystemGroup(ev.GroupID) {
				t.Errorf("ledger notice = %+v", ev)
			}
			rc := r.Receipt(outs[0])
			if code, _ := rc.MetaValue("error", "Code"); rc.Intent != "ERROR" || code != string(tt.code) {
				t.Errorf("receipt = %v %s", rc, code)
			}
			if _, err := envelope.Marshal(rc); err != nil {
				t.Errorf("receipt does not marshal: %v", err)
			}
		})
	}
	// The principal may send as itself.
	if outs := ingest(t, r, "chatgpt", env("CHATGPT", "GEMINI", "REQUEST", "", "hi")); !outs[0].Accepted() || outs[0].Event.By != "chatgpt" {
		t.Errorf("own envelope: %+v", outs[0])
	}
}

func TestAckRules(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	handoff := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "g", "take over"))[0].Event
	plain := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "question"))[0].Event

	// ACK envelope from the addressee of an attention message: chat.ack.
	msgID := data(t, handoff).X.Envelope.Message
	ack := ingest(t, r, "", env("CLAUDE", "CHATGPT", "ACK", "g", "ok", func(e *envelope.Envelope) { e.Parent = msgID }))[0].Event
	if d := data(t, ack); ack.Kind != gateway.KindAck || d.EventID != handoff.ID || d.ActorID != "claude" || ack.By != "claude" {
		t.Errorf("ack = %s %+v", ack.Kind, d)
	}
	// ACK from someone it was not addressed to: a reaction, not an ack.
	other := ingest(t, r, "", env("GEMINI", "CHATGPT", "ACK", "g", "ok", func(e *envelope.Envelope) { e.Parent = msgID }))[0].Event
	if other.Kind != gateway.KindReaction {
		t.Errorf("foreign ACK = %s, want chat.reaction", other.Kind)
	}

	act := func(a gateway.Action, id, actor string) (gateway.ActionResult, error) {
		return r.Act(ctx, gateway.ActionRequest{Action: a, Group: "g", EventID: id, Actor: actor})
	}
	if _, err := act(gateway.ActionAck, plain.ID, "claude"); !isCode(err, gateway.CodeNotAttention) {
		t.Errorf("ack of a plain message = %v, want not_an_attention_message", err)
	}
	if _, err := act(gateway.ActionAck, handoff.ID, "gemini"); !isCode(err, gateway.CodePermission) {
		t.Errorf("ack for another actor = %v, want permission_denied", err)
	}
	if _, err := act(gateway.ActionAck, "nope", "claude"); !isCode(err, gateway.CodeNotFound) {
		t.Errorf("ack of a missing event = %v, want not_found", err)
	}
	res1, err := act(gateway.ActionAck, handoff.ID, "claude")
	if err != nil {
		t.Fatal(err)
	}
	res2, err := act(gateway.ActionAck, handoff.ID, "claude")
	if err != nil || !res2.Duplicate || res2.Event.ID != res1.Event.ID {
		t.Errorf("second ack = %+v %v, want the first", res2, err)
	}
	// Read cursors are independent of acks.
	rd, err := act(gateway.ActionRead, plain.ID, "claude")
	if err != nil || rd.Cursor == nil || rd.Cursor.Seq != plain.Seq || rd.Event.Kind != gateway.KindRead {
		t.Errorf("read = %+v %v", rd, err)
	}
}

func isCode(err error, code string) bool {
	var ae *gateway.ActionError
	return errors.As(err, &ae) && ae.Code == code
}

func TestClaimFirstWins(t *testing.T) {
	r := newRelay(t, nil)
	ev := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", "review please"))[0].Event
	claim := func(actor string) error {
		_, err := r.Act(context.Background(), gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: ev.ID, Actor: actor})
		return err
	}
	if err := claim("claude"); err != nil {
		t.Fatalf("first claim = %v", err)
	}
	if err := claim("chatgpt"); !isCode(err, gateway.CodeConflict) {
		t.Errorf("second claim = %v, want conflict", err)
	}
	if err := claim("claude"); err != nil {
		t.Errorf("renewal = %v", err)
	}
	if err := claim("gemini"); !isCode(err, gateway.CodePermission) {
		t.Errorf("claim of own event = %v, want permission_denied", err)
	}
	// Deliveries: the claimant may respond, the other reviewer must not.
	ds, err := r.Deliveries(context.Background(), "claude", "g", 0, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claude deliveries = %+v %v", ds, err)
	}
	if ds[0].Policy != attention.MayRespond || ds[0].ClaimedBy != "claude" {
		t.Errorf("claimant delivery = %s by %s", ds[0].Policy, ds[0].ClaimedBy)
	}
	ds, _ = r.Deliveries(context.Background(), "chatgpt", "g", 0, 0)
	if len(ds) != 1 || ds[0].Policy != attention.MustNotRespond || ds[0].Content == "" && ds[0].Injection != attention.Notify {
		t.Errorf("other reviewer delivery = %+v", ds)
	}
}

func TestDeliveriesMatrix(t *testing.T) {
	r := newRelay(t, nil)
	ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "direct question"))
	ingest(t, r, "", env("CHATGPT", "GEMINI", "REQUEST", "g", "for gemini"))
	ingest(t, r, "", env("CHATGPT", "ALL", "BROADCAST", "g", "status: green"))
	ingest(t, r, "", env("CHATGPT", "@reviewer", "REQUEST", "g", "role question"))
	ingest(t, r, "", env("CHATGPT", "CLAUDE", "ESCALATE", "g", "urgent"))
	ingest(t, r, "", env("CLAUDE", "CHATGPT", "REQUEST", "g", "my own"))
	want := []struct {
		policy    attention.Policy
		injection attention.Injection
		content   bool
	}{
		{attention.MustRespond, attention.Buffered, true},
		{attention.MustNotRespond, attention.ToolMailbox, true},
		{attention.MustNotRespond, attention.Digest, true},
		{attention.MayRespond, attention.Notify, false}, // may_respond after claim (C2A)
		{attention.MustRespond, attention.Immediate, true},
	}
	ds, err := r.Deliveries(context.Background(), "CLAUDE", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(want) {
		t.Fatalf("got %d deliveries, want %d (own event silent): %+v", len(ds), len(want), ds)
	}
	for i, w := range want {
		d := ds[i]
		if d.Policy != w.policy || d.Injection != w.injection || (d.Content != "") != w.content {
			t.Errorf("delivery %d (%s %s) = %s %s content %q, want %s %s content %v", i, d.Intent, d.To, d.Policy, d.Injection, d.Content, w.policy, w.injection, w.content)
		}
		if d.Injection == attention.Notify && (d.Knock == nil || strings.Contains(d.Knock.Topic, "role question")) {
			t.Errorf("knock = %+v: must exist and never carry the body", d.Knock)
		}
	}
	// since_seq skips what was seen.
	ds, _ = r.Deliveries(context.Background(), "claude", "g", 4, 0)
	if len(ds) != 1 || ds[0].Seq != 5 {
		t.Errorf("since 4 = %+v, want only seq 5", ds)
	}
}

// TestDeliveriesResume checks that an inbox call that resumes from the
// state an earlier call left (only newer events read) returns exactly what
// a relay without that state computes from the group's first event, as
// messages, thread replies, acks and claims keep arriving.
func TestDeliveriesResume(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	opts := &gateway.Options{Book: testBook(t), Now: func() time.Time { return now }}
	r := newRelay(t, opts)
	ctx := t.Context()
	agents := []string{"claude", "chatgpt", "gemini"}
	since := map[string]int64{}
	check := func(step string) {
		t.Helper()
		fresh := gateway.New(r.Store(), opts) // knows nothing of earlier calls
		for _, a := range agents {
			for _, from := range []int64{since[a], 0} {
				got, err := r.Deliveries(ctx, a, "g", from, 0)
				if err != nil {
					t.Fatal(err)
				}
				want, err := fresh.Deliveries(ctx, a, "g", from, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Liveness differs: r saw the actors act, fresh did not.
				for i := range got {
					got[i].Liveness = ""
				}
				for i := range want {
					want[i].Liveness = ""
				}
				if len(got) != len(want) {
					t.Fatalf("%s: Deliveries(%s, since %d) = %d deliveries, want %d (from the first event)", step, a, from, len(got), len(want))
				}
				for i := range got {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("%s: Deliveries(%s, since %d)[%d] =\n%+v\nwant (from the first event)\n%+v", step, a, from, i, got[i], want[i])
					}
				}
			}
			if gs, _ := r.Store().Groups(ctx); len(gs) > 0 {
				since[a] = gs[0].LastSeq
			}
		}
	}
	var threads []string
	for step := range 6 {
		// A new thread to the reviewers, a direct question, a reply by
		// claude in an earlier thread (claude takes part in it), and a
		// message to all in that thread.
		q := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", fmt.Sprintf("review %d", step)))[0].Event
		threads = append(threads, data(t, q).X.Envelope.Thread)
		h := ingest(t, r, "", env("CHATGPT", "CLAUDE", "HANDOFF", "g", fmt.Sprintf("take %d", step)))[0].Event
		if step%2 == 0 {
			ingest(t, r, "", env("CLAUDE", "GEMINI", "RESPOND", "g", "on it", func(e *envelope.Envelope) { e.Thread = threads[step/2] }))
		}
		// On odd steps, in a thread claude joined before the last call.
		ingest(t, r, "", env("GEMINI", "ALL", "REQUEST", "g", "follow-up", func(e *envelope.Envelope) { e.Thread = threads[step/2] }))
		check(fmt.Sprintf("step %d, messages", step))
		if step%2 == 0 {
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "g", EventID: h.ID, Actor: "claude"}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: q.ID, Actor: agents[step%3/2]}); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("step %d, ack and claim", step))
		}
	}
}

// TestDeliveriesDoNotShareData checks that two reads of the same event's
// delivery (two streams, an inbox page and a stream) get their own copies
// of what the relay's cache of decoded events holds: one reader changing
// its delivery changes nothing the next one gets.
func TestDeliveriesDoNotShareData(t *testing.T) {
	r := newRelay(t, nil)
	ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "topic", "hello"))
	read := func() gateway.Delivery {
		ds, err := r.Deliveries(context.Background(), "claude", "topic", 0, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Deliveries = %+v, %v; want one", ds, err)
		}
		return ds[0]
	}
	first := read()
	if len(first.To) != 1 || first.To[0] != "claude" {
		t.Fatalf("To = %q, want [claude]", first.To)
	}
	first.To[0] = "changed"
	if second := read(); second.To[0] != "claude" {
		t.Errorf("second read's To = %q: the first reader's change reached it", second.To)
	}
}
