package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestNotifyGroupNames: POST /v1/agents/{agent}/notify names its group in
// the body, and that name goes through the rule of path names
// (docs/security.md, "Identifiers"): a group with an invisible, bidi or
// control character, or with surrounding space (which no envelope's
// context has), is refused with 400 E-ADDRESS and nothing is recorded —
// a harness host must not create a group "pr<ZWSP>oj" or "proj " that
// lists as "proj" — and an NFD name records into the NFC group.
func TestNotifyGroupNames(t *testing.T) {
	const tok = "claude-token-0123456789"
	h := newHarness(t, &api.Options{Tokens: map[string]string{tok: "claude"}}, func(s *api.Server, _ ledger.Store) { s.MountAgents(nil) })
	auth := []string{"Authorization", "Bearer " + tok}
	tests := []struct {
		name, group string
		status      int
		recordedIn  string
	}{
		{"zero-width space", "pr\u200boj", http.StatusBadRequest, ""},
		{"right-to-left override", "\u202eproj", http.StatusBadRequest, ""},
		{"newline", "pr\noj", http.StatusBadRequest, ""},
		{"NUL", "proj\u0000", http.StatusBadRequest, ""},
		{"trailing space", "proj ", http.StatusBadRequest, ""},
		{"leading space", " proj", http.StatusBadRequest, ""},
		{"NFD", "cafe\u0301", http.StatusOK, "caf\u00e9"},
		{"plain", "proj", http.StatusOK, "proj"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"group":` + jsonString(t, tt.group) + `,"kind":"delivery_failed","message":"m"}`
			status, b := h.do("POST", "/v1/agents/claude/notify", body, auth...)
			if status != tt.status {
				t.Fatalf("notify group %q = %d %s, want %d", tt.group, status, b, tt.status)
			}
			if status != http.StatusOK {
				if !strings.Contains(string(b), `"E-ADDRESS"`) {
					t.Errorf("notify group %q = %s, want code E-ADDRESS", tt.group, b)
				}
				if evs, err := h.store.Range(t.Context(), tt.group, 0, nil, 10); err != nil || len(evs) != 0 {
					t.Errorf("group %q holds %d events (%v) after the refusal, want none", tt.group, len(evs), err)
				}
				return
			}
			if evs, err := h.store.Range(t.Context(), tt.recordedIn, 0, nil, 10); err != nil || len(evs) != 1 {
				t.Errorf("group %q holds %d events (%v), want the notice", tt.recordedIn, len(evs), err)
			}
		})
	}
}

// jsonString is s as a JSON string.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNotifyEventIDBounded: the event_id of a notice is an event id, at
// most 128 bytes (as the after of open-set queries): a longer one is
// refused with 400 and nothing is recorded.
func TestNotifyEventIDBounded(t *testing.T) {
	h := newHarness(t, nil, func(s *api.Server, _ ledger.Store) { s.MountAgents(nil) })
	body := `{"group":"proj","event_id":"` + strings.Repeat("e", 129) + `","kind":"delivery_failed","message":"m"}`
	if status, b := h.do("POST", "/v1/agents/claude/notify", body); status != http.StatusBadRequest {
		t.Fatalf("notify with a 129-byte event_id = %d %s, want 400", status, b)
	}
	if evs, err := h.store.Range(t.Context(), "proj", 0, nil, 10); err != nil || len(evs) != 0 {
		t.Errorf("proj holds %d events (%v) after the refusal, want none", len(evs), err)
	}
}
