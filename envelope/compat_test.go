package envelope_test

import (
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/v10peer"
)

func TestNewSession(t *testing.T) {
	at := time.Date(2025, 10, 9, 16, 42, 0, 0, time.FixedZone("CEST", 2*3600))
	s := envelope.NewSession(at)
	if !regexp.MustCompile(`^2025-10-09T14Z [0-9a-f]{6}$`).MatchString(s) {
		t.Errorf("NewSession = %q, want the UTC hour and six hex digits", s)
	}
	if envelope.NewSession(at) == s && envelope.NewSession(at) == s {
		t.Errorf("NewSession repeats %q", s)
	}
	if e := envelope.New("A", "B", envelope.IntentRequest, "x"); e.Session == "" {
		t.Error("New wrote no session")
	}
	r := envelope.NewReply(&envelope.Envelope{From: "A", To: "B", Message: "m"}, envelope.IntentRespond, "y")
	if r.Session == "" {
		t.Error("NewReply to an envelope without session wrote none")
	}
}

func TestToV10(t *testing.T) {
	meta := []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}}}}
	tests := []struct {
		name       string
		intent     string
		legacy     string
		meta       []envelope.Meta
		opt        envelope.V10Options
		wantIntent string // "" means an ErrNotV10 error
	}{
		{"request", envelope.IntentRequest, "", nil, envelope.V10Options{}, "QUESTION"},
		{"respond", envelope.IntentRespond, "", nil, envelope.V10Options{}, "ANSWER"},
		{"legacy kept as read", envelope.IntentBroadcast, "status", nil, envelope.V10Options{}, "STATUS"},
		{"broadcast has two v1.0 forms", envelope.IntentBroadcast, "", nil, envelope.V10Options{}, ""},
		{"ack v1.0 lacks", envelope.IntentAck, "", nil, envelope.V10Options{}, ""},
		{"ack kept on request", envelope.IntentAck, "", nil, envelope.V10Options{KeepIntents: true}, "ACK"},
		{"meta refused", envelope.IntentRequest, "", meta, envelope.V10Options{}, ""},
		{"meta dropped", envelope.IntentRequest, "", meta, envelope.V10Options{DropMeta: true}, "QUESTION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := envelope.New("CLAUDE", "CHATGPT", tt.intent, "line one\n\nline three")
			e.User, e.Context, e.LegacyIntent, e.Meta = "kalle", "topic", tt.legacy, tt.meta
			e.Parent = envelope.NewID()
			v, err := envelope.ToV10(e, tt.opt)
			if tt.wantIntent == "" {
				if !errors.Is(err, envelope.ErrNotV10) {
					t.Fatalf("ToV10 = %v, want ErrNotV10", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := envelope.MarshalV10(v)
			if err != nil {
				t.Fatal(err)
			}
			if err := v10peer.CheckGrammar(b); err != nil && v10Intent(tt.wantIntent) {
				t.Errorf("v1.0 grammar: %v\n%s", err, b)
			}
			back, err := envelope.Unmarshal(b)
			if err != nil {
				t.Fatalf("our Reader refuses the v1.0 form: %v\n%s", err, b)
			}
			if back.Body != e.Body || back.Thread != e.Thread || back.Parent != e.Parent || back.Message != e.Message || len(back.Meta) != 0 {
				t.Errorf("read back %+v", back)
			}
			if got := back.LegacyIntent; v10Intent(tt.wantIntent) && got != tt.wantIntent || !v10Intent(tt.wantIntent) && back.Intent != tt.wantIntent {
				t.Errorf("intent %s (legacy %q), want %s", back.Intent, got, tt.wantIntent)
			}
			if e.Intent != tt.intent || len(e.Meta) != len(tt.meta) {
				t.Error("ToV10 changed its argument")
			}
		})
	}
}

func v10Intent(s string) bool {
	switch s {
	case "QUESTION", "ANSWER", "STATUS", "PATCH", "NOTE":
		return true
	}
	return false
}

func TestToV10Signed(t *testing.T) {
	e := envelope.New("A", "B", envelope.IntentRequest, "x")
	e.User = "u"
	e.Sig = "ed25519:pkid=a@example.com;sig=AAAA"
	v, err := envelope.ToV10(e, envelope.V10Options{})
	if err != nil || v.Sig != "none" {
		t.Errorf("ToV10 of a signed envelope: sig %q, %v; want none", v.Sig, err)
	}
}
