package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestSendRetry: chat.send_message retried with the same idempotencyKey
// records the message once; a retry with another body is not sent, and
// the answer says so instead of reporting it recorded.
func TestSendRetry(t *testing.T) {
	relay := gateway.New(memory.New(nil), nil)
	cs := session(t, &c2a.Local{Relay: relay, Transport: "mcp"}, "claude")
	args := func(body string) map[string]any {
		return map[string]any{"to": "CHATGPT", "directedness": "to_me", "intent": "REQUEST", "body": body, "idempotencyKey": "k-1"}
	}
	for _, tc := range []struct {
		name, body       string
		duplicate, diffs bool
		says             string
	}{
		{"first", "Is the deploy blocked?", false, false, "sent claude"},
		{"retry", "Is the deploy blocked?", true, false, "nothing sent twice"},
		{"retry, edited", "Is the deploy done?", true, true, "NOT sent"},
	} {
		out, res := call[c2a.SendResult](t, cs, "chat.send_message", args(tc.body))
		if out.Duplicate != tc.duplicate || out.Differs != tc.diffs || !strings.Contains(text(res), tc.says) {
			t.Errorf("%s: send = %+v %q; want duplicate %v, differs %v, saying %q", tc.name, out, text(res), tc.duplicate, tc.diffs, tc.says)
		}
	}
}

// TestSendUnknownReceiver: chat.send_message to a name the relay knows no
// agent by (a typo, a look-alike letter) is recorded, and the answer says
// that no such agent is known.
func TestSendUnknownReceiver(t *testing.T) {
	relay := gateway.New(memory.New(nil), &gateway.Options{Book: mustBook(t, []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}})})
	cs := session(t, &c2a.Local{Relay: relay, Transport: "mcp"}, "claude")
	for _, tc := range []struct {
		to      string
		unknown bool
	}{
		{"CHATGPT", false},
		{"chatgpt", false},
		{"СHATGPT", true}, // Cyrillic С
		{"CHATGTP", true},
		{"@reviewers", false},
		{"ALL", false},
	} {
		args := map[string]any{"to": tc.to, "directedness": "to_me", "intent": "REQUEST", "body": "hello"}
		if strings.HasPrefix(tc.to, "@") {
			args["directedness"] = "to_my_role"
		} else if tc.to == "ALL" {
			args["directedness"], args["intent"] = "ambient", "BROADCAST"
		}
		out, res := call[c2a.SendResult](t, cs, "chat.send_message", args)
		if res.IsError || out.EventID == "" || strings.Contains(text(res), "knows no agent") != tc.unknown {
			t.Errorf("send to %s = %q; want it recorded, with a note only for an unknown name (%v)", tc.to, text(res), tc.unknown)
		}
	}
}

func mustBook(t *testing.T, agents []gateway.Agent) *gateway.AddressBook {
	t.Helper()
	b, err := gateway.NewAddressBook(agents)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
