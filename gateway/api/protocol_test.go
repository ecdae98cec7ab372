package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// TestSendHandoffBlockedAndProvenance: POST /v1/send's handoff, blocked
// and src_* fields make the BeadBoard and CCCS §9 events; provenance with
// one id and not the other is a 400 (CCCS §6.1 "both MUST be present").
func TestSendHandoffBlockedAndProvenance(t *testing.T) {
	h := newHarness(t, nil)
	var out struct{ Results []api.Result }
	h.json("POST", "/v1/send", `{"from":"CHATGPT","to":"CLAUDE","context":"g","body":"yours","handoff":{"subject":"auth","summary":"half done","next_action":"finish"}}`, http.StatusOK, &out)
	ev, err := h.store.Get(t.Context(), out.Results[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := gateway.ParseData(ev); d.Protocol == nil || d.Protocol.EventType != gateway.ProtocolHandoff || d.Protocol.NextAction != "finish" || d.Priority != "attention" {
		t.Errorf("handoff data = %+v", d.Protocol)
	}
	h.json("POST", "/v1/send", `{"from":"CLAUDE","to":"CHATGPT","context":"g","body":"stuck","blocked":{"subject":"db","blocker":"no creds","requested_action":"share them","urgency":"medium"}}`, http.StatusOK, &out)
	for _, tc := range []struct{ name, body, want string }{
		{"group without event", `{"from":"CLAUDE","to":"ALL","intent":"BROADCAST","context":"b","body":"x","src_group_id":"g"}`, "without src_event_id"},
		{"event without group", `{"from":"CLAUDE","to":"ALL","intent":"BROADCAST","context":"b","body":"x","src_event_id":"` + ev.ID + `"}`, "without src_group_id"},
		{"blocked without urgency", `{"from":"CLAUDE","to":"CHATGPT","body":"x","blocked":{"subject":"s","blocker":"b","requested_action":"r"}}`, "Urgency"},
		{"half provenance in a META block", `{"from":"CLAUDE","to":"ALL","intent":"BROADCAST","body":"x","meta":[{"namespace":"provenance","fields":[{"key":"Src-Group-Id","value":"g"}]}]}`, "without src_event_id"},
	} {
		status, b := h.do("POST", "/v1/send", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, status, b, tc.want)
		}
	}
}

// TestForwardEndpoint: POST /v1/forward appends the event to another
// group with src_group_id/src_event_id; the caller must have been shown
// it, and a token holder forwards only as itself.
func TestForwardEndpoint(t *testing.T) {
	const tok = "gemini-token-0123456789"
	h := newHarness(t, &api.Options{Tokens: map[string]string{tok: "gemini", "claude-token-0123456789": "claude", "chatgpt-token-0123456789": "chatgpt"}})
	src := h.post(env("CHATGPT", "CLAUDE", "REQUEST", "g", "review the checklist"), "Authorization", "Bearer chatgpt-token-0123456789")
	var out struct{ Results []api.Result }
	h.json("POST", "/v1/forward", `{"event_id":"`+src.EventID+`","to_group":"other","summary":"checklist review"}`, http.StatusOK, &out, "Authorization", "Bearer claude-token-0123456789")
	ev, err := h.store.Get(t.Context(), out.Results[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := gateway.ParseData(ev)
	if ev.GroupID != "other" || ev.By != "claude" || d.SrcGroupID != "g" || d.SrcEventID != src.EventID || !d.Summarized || d.Text != "[Summarized] checklist review" {
		t.Errorf("forwarded = %s by %s %+v %q", ev.GroupID, ev.By, d.Provenance, d.Text)
	}
	// gemini was not shown it.
	h.json("POST", "/v1/forward", `{"event_id":"`+src.EventID+`","to_group":"other"}`, http.StatusForbidden, nil, "Authorization", "Bearer "+tok)
	h.json("POST", "/v1/forward", `{"event_id":"nope","to_group":"other"}`, http.StatusNotFound, nil, "Authorization", "Bearer "+tok)
	h.json("POST", "/v1/forward", `{"event_id":"`+src.EventID+`"}`, http.StatusBadRequest, nil, "Authorization", "Bearer "+tok)
	// A token holder may not name another agent.
	h.json("POST", "/v1/forward", `{"event_id":"`+src.EventID+`","to_group":"other"}`, http.StatusForbidden, nil, "Authorization", "Bearer "+tok, "X-Crosstalk-Agent", "claude")
}
