package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestPathNames: group and agent names in paths are compared in NFC, and
// one holding an invisible or bidi character is refused with E-ADDRESS.
func TestPathNames(t *testing.T) {
	h := newHarness(t, nil)
	h.post(env("CLAUDE", "CHATGPT", "REQUEST", "caf\u00e9", "question"))
	// A group recorded before names were checked stays readable.
	if _, err := h.store.Append(t.Context(), []ledger.Record{{Kind: gateway.KindMessage, GroupID: "pro\u200bj", By: "claude", Data: []byte(`{"text":"old"}`)}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		status int
		events int
	}{
		{"/v1/groups/caf%C3%A9/events", http.StatusOK, 1},                      // NFC
		{"/v1/groups/cafe%CC%81/events", http.StatusOK, 1},                     // NFD
		{"/v1/groups/caf%E2%80%8B%C3%A9/events", http.StatusBadRequest, 0},     // zero-width space
		{"/v1/groups/pro%E2%80%8Bj/events", http.StatusOK, 1},                  // recorded before the check
		{"/v1/groups/pr%E2%80%8Boj/events", http.StatusBadRequest, 0},          // not recorded
		{"/v1/groups/%E2%80%AEcaf%C3%A9/stream", http.StatusBadRequest, 0},     // RLO
		{"/v1/agents/chat%E2%80%8Bgpt/deliveries", http.StatusBadRequest, 0},   // zero-width space
		{"/v1/agents/chatgpt%00/stream", http.StatusBadRequest, 0},             // NUL
		{"/v1/groups/caf%C3%A9/events/x/ack%E2%80%AE", http.StatusNotFound, 0}, // not a name: the action is checked by act
	}
	for _, tt := range tests {
		method := "GET"
		if tt.status == http.StatusNotFound {
			method = "POST"
		}
		status, body := h.do(method, tt.path, "")
		if status != tt.status {
			t.Errorf("%s %s = %d %s, want %d", method, tt.path, status, body, tt.status)
			continue
		}
		switch tt.status {
		case http.StatusOK:
			var p struct{ Events []ledger.Event }
			if err := json.Unmarshal(body, &p); err != nil || len(p.Events) != tt.events {
				t.Errorf("GET %s = %s, want %d events", tt.path, body, tt.events)
			}
		case http.StatusBadRequest:
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "E-ADDRESS" || e.Error.Message == "" {
				t.Errorf("GET %s = %s, want an E-ADDRESS error", tt.path, body)
			}
		}
	}
}

// TestQueryGroupNames: a ?group= filter is compared in NFC like a
// {group} path value, and one holding an invisible or bidi character is
// refused with E-ADDRESS rather than matching nothing.
func TestQueryGroupNames(t *testing.T) {
	h := newHarness(t, nil)
	h.post(env("CLAUDE", "CHATGPT", "REQUEST", "caf\u00e9", "question"))
	for _, tt := range []struct {
		path       string
		status     int
		deliveries int
	}{
		{"/v1/agents/chatgpt/deliveries?group=caf%C3%A9", http.StatusOK, 1},  // NFC
		{"/v1/agents/chatgpt/deliveries?group=cafe%CC%81", http.StatusOK, 1}, // NFD
		{"/v1/agents/chatgpt/deliveries?group=caf%E2%80%8B%C3%A9", http.StatusBadRequest, 0},
		{"/v1/agents/chatgpt/stream?group=%E2%80%AEcaf%C3%A9", http.StatusBadRequest, 0},
	} {
		status, body := h.do("GET", tt.path, "")
		if status != tt.status {
			t.Errorf("GET %s = %d %s, want %d", tt.path, status, body, tt.status)
			continue
		}
		if status == http.StatusOK {
			var p struct{ Deliveries []json.RawMessage }
			if err := json.Unmarshal(body, &p); err != nil || len(p.Deliveries) != tt.deliveries {
				t.Errorf("GET %s = %s, want %d deliveries", tt.path, body, tt.deliveries)
			}
			continue
		}
		var e struct {
			Error struct{ Code string }
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "E-ADDRESS" {
			t.Errorf("GET %s = %s, want an E-ADDRESS error", tt.path, body)
		}
	}
}

// TestDotNamesInPaths: groups named "." and ".." (an envelope's context
// may say so) are reached as "~." and "~..", and a group named "~." as
// "~~." (client.PathSegment); "~deploy" is its own segment. Before, clients
// and ServeMux cleaned the dot segments away and nothing reached them.
func TestDotNamesInPaths(t *testing.T) {
	h := newHarness(t, nil)
	for _, g := range []string{".", "..", "~.", "~deploy", "..."} {
		h.post(env("CLAUDE", "CHATGPT", "REQUEST", g, "question in "+g))
	}
	for _, g := range []string{".", "..", "~.", "~deploy", "..."} {
		path := "/v1/groups/" + client.PathSegment(g) + "/events"
		status, body := h.do("GET", path, "")
		var p struct{ Events []ledger.Event }
		if status != http.StatusOK || json.Unmarshal(body, &p) != nil || len(p.Events) != 1 || p.Events[0].GroupID != g {
			t.Errorf("GET %s = %d %s, want the one event of group %q", path, status, body, g)
		}
		if got := client.FromSegment(strings.TrimPrefix(strings.TrimSuffix(path, "/events"), "/v1/groups/")); got != g && g != "~deploy" {
			t.Errorf("FromSegment(PathSegment(%q)) = %q", g, got)
		}
	}
	if got, want := client.PathSegment("~~.."), "~~~.."; got != want {
		t.Errorf("PathSegment(~~..) = %q, want %q", got, want)
	}
}
