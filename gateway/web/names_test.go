package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestPathNames: the inbox finds a group named in NFD in the path, and
// answers a group or agent name holding an invisible or bidi character
// with the error page (400 E-ADDRESS).
func TestPathNames(t *testing.T) {
	h := newHarness(t, nil)
	h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "caf\u00e9", "review the caf\u00e9 menu"))
	tests := []struct {
		path   string
		status int
		want   string
	}{
		{"/ui/groups/caf%C3%A9", http.StatusOK, "review the caf\u00e9 menu"},
		{"/ui/groups/cafe%CC%81", http.StatusOK, "review the caf\u00e9 menu"},
		{"/ui/groups/caf%E2%80%8B%C3%A9", http.StatusBadRequest, "E-ADDRESS"},
		{"/ui/groups/%E2%80%AEcaf%C3%A9", http.StatusBadRequest, "E-ADDRESS"},
		{"/ui/agents/chat%E2%80%AEgpt", http.StatusBadRequest, "E-ADDRESS"},
		{"/ui/agents/claude%00", http.StatusBadRequest, "E-ADDRESS"},
	}
	for _, tt := range tests {
		status, body := h.get(tt.path)
		if status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s = %d, want %d with %q:\n%.600s", tt.path, status, tt.status, tt.want, body)
		}
		if status == http.StatusBadRequest && strings.ContainsAny(body, "\u202e\u200b\x00") {
			t.Errorf("GET %s: the error page shows the invisible character raw", tt.path)
		}
	}
}
