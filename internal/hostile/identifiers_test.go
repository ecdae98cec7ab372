package hostile

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestInvisibleNames: NUL, RLO and ZWSP in a receiver, a context or a META
// namespace are refused with E-ADDRESS and the line, as text and as JSON;
// a group "pro<ZWSP>j" that looks like "proj" never comes to exist.
func TestInvisibleNames(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	tests := []struct {
		name, text string
		at         string // the line the error is about starts with this
	}{
		{"receiver RLO", "chat first\n" + hostileText("CA\u202eROL", "ALICE", "CAROL", "REQUEST", "proj", "x"), "[["},
		{"receiver NUL", hostileText("CAROL\x00", "ALICE", "CAROL", "REQUEST", "proj", "x"), "[["},
		{"context ZWSP", hostileText("pro\u200bj", "ALICE", "CAROL", "REQUEST", "proj", "x"), "context:"},
		{"context LRI", hostileText("pro\u2066j", "ALICE", "CAROL", "REQUEST", "proj", "x"), "context:"},
		{"META namespace ZWJ", hostileText("rou\u200dting", "ALICE", "CAROL", "REQUEST", "proj", "x", withMeta("routing", "X-Priority", "high")), "meta:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := r.in(t)
			a := r.refused("alice", tt.text, http.StatusBadRequest, "E-ADDRESS")
			var out struct{ Error struct{ Line int } }
			if json.Unmarshal(a.body, &out); !lineStarts(tt.text, out.Error.Line, tt.at) {
				t.Errorf("error.line = %d, want the line starting %q (%s)", out.Error.Line, tt.at, a.body)
			}
		})
	}
	// The envelope endpoint's text answer is an ERROR envelope with the code.
	a := r.do(http.MethodPost, "/crosstalk/receive", "alice", []byte(hostileText("pro\u200bj", "ALICE", "CAROL", "REQUEST", "proj", "x")), nil)
	if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "Code: E-ADDRESS") || strings.Contains(string(a.body), "\u200b") {
		t.Errorf("text answer = %d %q, want 400, an ERROR envelope with E-ADDRESS, the ZWSP escaped", a.status, a.body)
	}
	// The JSON API refuses the same names.
	a = r.do(http.MethodPost, "/v1/send", "alice", []byte(`{"to":"CAROL","intent":"REQUEST","context":"pro\u200bj","body":"x"}`), nil)
	if a.status != http.StatusBadRequest || a.code() != "E-ADDRESS" {
		t.Errorf("POST /v1/send with context pro<ZWSP>j = %d %s %s, want 400 E-ADDRESS", a.status, a.code(), a.body)
	}
	for _, ev := range r.events() {
		if strings.ContainsAny(ev.GroupID+ev.By, "\x00\u202e\u200b\u2066\u200d") {
			t.Errorf("recorded %s in group %+q by %+q", ev.Kind, ev.GroupID, ev.By)
		}
	}
}

// TestNFCAndNFDAreOneName: CAFÉ spelt in NFC and in NFD is one actor and
// one group, however the address book, the header and the context spell
// it.
func TestNFCAndNFDAreOneName(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	nfc := r.accepted("alice", envText("ALICE", "CAF\u00c9", "REQUEST", "caf\u00e9", "composed"))
	nfd := r.accepted("alice", envText("ALICE", "CAFE\u0301", "REQUEST", "cafe\u0301", "decomposed"))
	if nfc.GroupID != "caf\u00e9" || nfd.GroupID != nfc.GroupID {
		t.Errorf("groups = %+q and %+q, want both %+q", nfc.GroupID, nfd.GroupID, "caf\u00e9")
	}
	for _, res := range []result{nfc, nfd} {
		if _, d := r.event(res.EventID); len(d.To) != 1 || d.To[0] != "caf\u00e9" {
			t.Errorf("event %s: to = %+q, want the one actor café", res.EventID, d.To)
		}
	}
	a := r.do(http.MethodGet, "/v1/agents/caf%C3%A9/deliveries", "", nil, nil)
	if a.status != http.StatusUnauthorized {
		t.Errorf("deliveries without a token = %d, want 401", a.status)
	}
}

// TestNFDRepasteOfIDlessEnvelope: an id-less v1.0 envelope pasted again in
// NFD (as some chat UIs and clipboards hand it back) is the same envelope:
// a duplicate of its first event, not a refusal for "squatting" an empty
// message id, and not a new actor.
func TestNFDRepasteOfIDlessEnvelope(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	text := "[[ZO\u00cb→BOB v1]]\nintent: REQUEST\ncontext: caf\u00e9\n\nbody: |\n  na\u00efve question\n[[END]]\n"
	first := r.accepted("alice", text)
	if ev, _ := r.event(first.EventID); ev.By != "alice" {
		t.Errorf("first paste: by = %q, want alice", ev.By)
	}
	again := r.accepted("alice", norm.NFD.String(text))
	if !again.Duplicate || again.EventID != first.EventID {
		t.Errorf("NFD re-paste = %+v, want a duplicate of %s", again, first.EventID)
	}
	r.refused("bob", norm.NFD.String(text), http.StatusForbidden, "E-PERM") // alice's id, bob's token
	for _, ev := range r.events() {
		if d, _ := gateway.ParseData(ev); ev.Kind == gateway.KindMessage && ev.ID != first.EventID {
			t.Errorf("a second message was recorded: %s by %s (%+q)", ev.ID, ev.By, d.Text)
		}
	}
}

// lineStarts reports whether 1-based line n of text starts with prefix.
func lineStarts(text string, n int, prefix string) bool {
	lines := strings.Split(text, "\n")
	return n >= 1 && n <= len(lines) && strings.HasPrefix(lines[n-1], prefix)
}

// hostileText is envText with the identifier that has bad's letters put
// back into the text: envelope.Marshal refuses to write an identifier
// the Reader refuses, so the hostile spelling is swapped in afterwards.
func hostileText(bad, from, to, intent, ctx, body string, mod ...func(*envelope.Envelope)) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x200b && r <= 0x206f {
			return -1
		}
		return r
	}, bad)
	text := envText(from, to, intent, ctx, body, mod...)
	if !strings.Contains(text, clean) {
		panic("hostileText: " + clean + " not in the envelope")
	}
	return strings.Replace(text, clean, bad, 1)
}
