package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestMarkAllReadSkipsOthersMessages: "Mark all read" for a logged-in
// agent moves its read cursor to the latest event it was shown, when the
// group's last one is a message aimed only at others (which no read
// watermark may name, CCCS §6.3); it was refused with 403. The unread
// count is of the messages the agent was shown, so it is 0 afterwards.
func TestMarkAllReadSkipsOthersMessages(t *testing.T) {
	h := newHarness(t, &harnessOptions{tokens: map[string]string{"claude-token-0123456789": "claude"}})
	mine := h.ingest(envText(t, "CHATGPT", "CLAUDE", envelope.IntentRequest, "g", "for claude"))[0].Event
	h.ingest(envText(t, "GEMINI", "CHATGPT", envelope.IntentRequest, "g", "not for claude"))
	if res, _ := h.post("/ui/login", url.Values{"token": {"claude-token-0123456789"}, "next": {"/"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d", res.StatusCode)
	}
	// The count is of what claude was shown: the message to chatgpt is
	// not one claude could ever mark read.
	_, body := h.get("/ui/groups/g")
	mustContain(t, "group page before", body, "1 unread for <bdi>claude</bdi>")
	if res, body := h.post("/ui/groups/g/read", url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("mark all read = %d\n%s", res.StatusCode, body)
	}
	_, body = h.get("/ui/groups/g")
	mustContain(t, "group page after", body, "0 unread for <bdi>claude</bdi>")
	c, err := h.store.GetCursor(t.Context(), "g", "claude")
	if err != nil || c.Seq != mine.Seq {
		t.Errorf("claude's read cursor = %+v, %v; want at #%d, the last event claude was shown", c, err, mine.Seq)
	}
}
