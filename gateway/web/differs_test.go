package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestPasteResendDiffers: the paste page tells an edited resend (the same
// message id, other content) from a plain one: it was not recorded.
func TestPasteResendDiffers(t *testing.T) {
	h := newHarness(t, nil)
	text := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "resend", "the first text")
	for _, tc := range []struct{ name, text, badge string }{
		{"first", text, `<span class="badge ok">recorded</span>`},
		{"again", text, `<span class="badge ok">already recorded</span>`},
		{"edited", strings.Replace(text, "the first text", "an edited text", 1), "already recorded, with other content: not sent"},
	} {
		res, body := h.post("/ui/paste", url.Values{"op": {"send"}, "text": {tc.text}})
		if res.StatusCode != 200 || !strings.Contains(body, tc.badge) {
			t.Errorf("%s: POST /ui/paste = %d, want %q in\n%s", tc.name, res.StatusCode, tc.badge, body)
		}
	}
}
