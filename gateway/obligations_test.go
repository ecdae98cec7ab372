package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

func obliged(blocks, delegate, deadline string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) {
		f := []envelope.Field{{Key: "Blocks", Value: blocks}, {Key: "Default-Action", Value: "ship without the review"}}
		if delegate != "" {
			f = append(f, envelope.Field{Key: "Delegate", Value: delegate})
		}
		if deadline != "" {
			f = append(f, envelope.Field{Key: "Deadline", Value: deadline})
		}
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: f})
	}
}

// TestObligationArms: an obligation is must_respond and immediate for its
// addressee until discharged; a recipient's reply or ACK is evidence, not
// discharge; only the author or the delegate discharges it, by ACK
// envelope or the API, once (issue #14).
func TestObligationArms(t *testing.T) {
	ctx := context.Background()
	for _, arm := range []struct {
		name       string
		delegate   string
		discharger string // "" for nobody
		byEnvelope bool
	}{
		{"author discharges by ACK envelope", "", "CHATGPT", true},
		{"author discharges by the API", "", "CHATGPT", false},
		{"delegate discharges", "GEMINI", "GEMINI", true},
		{"recipient replies, author has not discharged", "", "", false},
	} {
		t.Run(arm.name, func(t *testing.T) {
			r := newRelay(t, nil)
			ob := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "review before I ship", obliged("halted", arm.delegate, "30m")))[0].Event
			msg := data(t, ob).X.Envelope.Message
			if o := data(t, ob).Obligation; o == nil || o.Blocks != attention.BlocksHalted || o.Deadline.IsZero() ||
				arm.delegate != "" && o.Delegate != strings.ToLower(arm.delegate) {
				t.Fatalf("obligation = %+v", o)
			}
			d := deliveryOf(t, r, "claude", ob.ID)
			if d.Policy != attention.MustRespond || d.Reason != attention.ReasonObligation || d.Injection != attention.Immediate || !d.Owes() {
				t.Errorf("addressee's delivery = %s (%s) %s owes=%v, want must_respond (obligation) immediate owed", d.Policy, d.Reason, d.Injection, d.Owes())
			}
			// The recipient answers: evidence, not discharge.
			ingest(t, r, "", env("CLAUDE", "CHATGPT", "RESPOND", "g", "looks fine", func(e *envelope.Envelope) { e.Parent = msg }))
			ingest(t, r, "", env("CLAUDE", "CHATGPT", "ACK", "g", "done", func(e *envelope.Envelope) { e.Parent = msg }))
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: ob.ID, Actor: "claude"}); !isCode(err, gateway.CodePermission) {
				t.Errorf("recipient's discharge = %v, want permission_denied", err)
			}
			if d := deliveryOf(t, r, "claude", ob.ID); !d.Owes() || !d.Responded || d.Discharged {
				t.Errorf("after the reply: owes=%v responded=%v discharged=%v, want still owed", d.Owes(), d.Responded, d.Discharged)
			}
			ws, err := r.Waiting(ctx, "chatgpt")
			if err != nil || len(ws) != 1 || ws[0].EventID != ob.ID || strings.Join(ws[0].Evidence, ",") != "claude" {
				t.Fatalf("chatgpt waiting = %+v, %v, want the obligation with claude's evidence", ws, err)
			}
			if arm.discharger == "" {
				return
			}
			actor := strings.ToLower(arm.discharger)
			if arm.byEnvelope {
				ingest(t, r, "", env(arm.discharger, "CLAUDE", "ACK", "g", "discharged", func(e *envelope.Envelope) { e.Parent = msg }))
			} else if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: ob.ID, Actor: actor}); err != nil {
				t.Fatal(err)
			}
			res, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: ob.ID, Actor: actor})
			if err != nil || !res.Duplicate {
				t.Errorf("second discharge = %+v, %v, want a duplicate", res, err)
			}
			if d := deliveryOf(t, r, "claude", ob.ID); d.Owes() || !d.Discharged {
				t.Errorf("after discharge: owes=%v discharged=%v", d.Owes(), d.Discharged)
			}
			if ws, err := r.Waiting(ctx, "chatgpt"); err != nil || len(ws) != 0 {
				t.Errorf("chatgpt waiting after discharge = %+v, %v, want nothing", ws, err)
			}
		})
	}
}

// TestObligationRefused: a bad `meta: obligation`, or one on an intent
// that asks nothing, is refused with a clear error.
func TestObligationRefused(t *testing.T) {
	r := newRelay(t, nil)
	for _, tc := range []struct {
		intent, blocks, deadline, want string
	}{
		{"REQUEST", "stuck", "", "Blocks"},
		{"REQUEST", "halted", "yesterday", "Deadline"},
		{"BROADCAST", "halted", "", "only a message that asks"},
		// A time JSON cannot write (year 10000 in UTC): its event data
		// could not be encoded, and the intake panicked.
		{"REQUEST", "halted", "9999-12-31T23:59:59-01:00", "Deadline"},
	} {
		outs := ingest(t, r, "", env("CHATGPT", "CLAUDE", tc.intent, "g", "x", obliged(tc.blocks, "", tc.deadline)))
		if outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeFormat || !strings.Contains(outs[0].Reject.Reason, tc.want) {
			t.Errorf("%s with Blocks %q Deadline %q = %+v, want E-FORMAT naming %s", tc.intent, tc.blocks, tc.deadline, outs[0].Reject, tc.want)
		}
	}
}

// TestFarDeadlineRefused: an X-Deadline JSON cannot write (a year past
// 9999 in UTC) is refused at intake, as an obligation's Deadline is
// (TestObligationRefused): every delivery of the message to its
// addressee carries it, and one that cannot be encoded ended each agent
// stream at that delivery, again at every reconnect.
func TestFarDeadlineRefused(t *testing.T) {
	r := newRelay(t, nil)
	far := func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Deadline", Value: "9999-12-31T23:30:00-00:45"}}})
	}
	outs := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "x", far))
	if outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeFormat || !strings.Contains(outs[0].Reject.Reason, "X-Deadline") {
		t.Errorf("X-Deadline in year 10000 = %+v, want E-FORMAT naming X-Deadline", outs[0].Reject)
	}
}
