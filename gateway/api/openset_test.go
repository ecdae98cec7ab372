package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// obligationEnv is an envelope from CHATGPT to CLAUDE carrying `meta:
// obligation` with Blocks halted.
func obligationEnv(body string) string {
	return env("CHATGPT", "CLAUDE", "REQUEST", "g", body, func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}}}
	})
}

// TestOpenSetEndpoints: GET /v1/agents/{a}/owe and /waiting list the open
// items, ?all=1 adds the settled ones, after and limit page them, and bad
// parameters are refused with 400 (issue #14).
func TestOpenSetEndpoints(t *testing.T) {
	h := newHarness(t, nil, func(a *api.Server, _ ledger.Store) { a.MountAgents(nil) })
	first := h.post(obligationEnv("review PR 7"))
	second := h.post(obligationEnv("review PR 8"))
	if _, err := h.relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: first.EventID, Actor: "chatgpt"}); err != nil {
		t.Fatal(err)
	}
	var owe struct {
		Agent string             `json:"agent"`
		Owe   []gateway.Delivery `json:"owe"`
		Next  string             `json:"next"`
	}
	h.json("GET", "/v1/agents/CLAUDE/owe", "", http.StatusOK, &owe)
	if owe.Agent != "claude" || len(owe.Owe) != 1 || owe.Owe[0].EventID != second.EventID || owe.Next != "" {
		t.Errorf("owe = %+v, want the open obligation only", owe)
	}
	h.json("GET", "/v1/agents/claude/owe?all=1&limit=1", "", http.StatusOK, &owe)
	if len(owe.Owe) != 1 || owe.Owe[0].EventID != first.EventID || owe.Owe[0].Settled() != "discharged" || owe.Next != first.EventID {
		t.Errorf("owe all limit 1 = %+v, want the discharged obligation and a next page", owe)
	}
	h.json("GET", "/v1/agents/claude/owe?all=true&after="+owe.Next, "", http.StatusOK, &owe)
	if len(owe.Owe) != 1 || owe.Owe[0].EventID != second.EventID || owe.Next != "" {
		t.Errorf("owe all, second page = %+v, want the open obligation and no next", owe)
	}
	var waiting struct {
		Waiting []gateway.Waiting `json:"waiting"`
	}
	h.json("GET", "/v1/agents/chatgpt/waiting", "", http.StatusOK, &waiting)
	if len(waiting.Waiting) != 1 || waiting.Waiting[0].EventID != second.EventID {
		t.Errorf("waiting = %+v, want the open obligation", waiting)
	}
	h.json("GET", "/v1/agents/chatgpt/waiting?all=1", "", http.StatusOK, &waiting)
	if len(waiting.Waiting) != 2 || waiting.Waiting[0].DischargedBy != "chatgpt" {
		t.Errorf("waiting all = %+v, want both, the first discharged by chatgpt", waiting)
	}
	for _, bad := range []string{"/v1/agents/claude/owe?all=yes", "/v1/agents/claude/waiting?limit=-1", "/v1/agents/claude/owe?after=" + strings.Repeat("Z", 200)} {
		if code, body := h.do("GET", bad, ""); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d %s, want 400", bad, code, body)
		}
	}
}

// TestStreamTellsDischarge: an agent stream that delivered an obligation
// later delivers its discharge — kind x.crosstalk.discharge, naming the
// obligation, must_not_respond — live, over SSE (issue #14).
func TestStreamTellsDischarge(t *testing.T) {
	h := newHarness(t, nil)
	ob := h.post(obligationEnv("review PR 7"))
	s := h.stream("/v1/agents/claude/stream")
	var d gateway.Delivery
	if err := json.Unmarshal([]byte(s.nextEvent().Data), &d); err != nil || d.EventID != ob.EventID || d.Reason != attention.ReasonObligation {
		t.Fatalf("first delivery = %+v, %v, want the obligation", d, err)
	}
	res, err := h.relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDischarge, Group: "g", EventID: ob.EventID, Actor: "chatgpt"})
	if err != nil {
		t.Fatal(err)
	}
	d = gateway.Delivery{}
	if err := json.Unmarshal([]byte(s.nextEvent().Data), &d); err != nil || d.EventID != res.Event.ID || d.Kind != gateway.KindDischarge ||
		d.Discharges != ob.EventID || !d.Discharged || d.Policy != attention.MustNotRespond || d.Reason != attention.ReasonDischarged {
		t.Errorf("delivery after the discharge = %+v, %v, want the discharge of %s", d, err, ob.EventID)
	}
}
