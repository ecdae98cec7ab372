package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// TestReceiveDiffers: POST /crosstalk/receive answers a resend under a
// recorded message id as a duplicate, and says "differs" in JSON (and
// Differs: true in the receipt) only when the resend says something else.
func TestReceiveDiffers(t *testing.T) {
	h := newHarness(t, nil)
	a := env("CHATGPT", "CLAUDE", "REQUEST", "topic", "the first text")
	edited := strings.Replace(a, "the first text", "an edited text", 1)
	for _, tc := range []struct {
		name, text string
		dup, diff  bool
	}{
		{"first", a, false, false},
		{"again", a, true, false},
		{"edited", edited, true, true},
	} {
		status, body := h.do("POST", "/crosstalk/receive", tc.text, "Accept", "application/json")
		var out struct{ Results []api.Result }
		if err := json.Unmarshal(body, &out); err != nil || status != http.StatusOK || len(out.Results) != 1 {
			t.Fatalf("%s: POST = %d %s, %v", tc.name, status, body, err)
		}
		if r := out.Results[0]; r.Duplicate != tc.dup || r.Differs != tc.diff || strings.Contains(string(body), `"differs"`) != tc.diff {
			t.Errorf("%s: result %s, want duplicate %v differs %v", tc.name, body, tc.dup, tc.diff)
		}
	}
	status, body := h.do("POST", "/crosstalk/receive", edited)
	if status != http.StatusOK || !strings.Contains(string(body), "Differs: true") || !strings.Contains(string(body), "other content") {
		t.Errorf("receipt of the edited resend = %d\n%s", status, body)
	}
}
