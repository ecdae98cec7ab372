package envelope_test

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/internal/v10peer"
)

func TestNewSession(t *testing.T) {
	at := time.Date(2025, 10, 9, 16, 42, 0, 0, time.FixedZone("CEST", 2*3600))
	s := envelope.NewSession(at)
	if !regexp.MustCompile(`^2025-10-09T14Z [0-9a-f]{6}$`).MatchString(s) {
		t.Errorf("NewSession = %q, want the UTC hour and six hex digits", s)
	}
	if a, b := envelope.NewSession(at), envelope.NewSession(at); a == s && b == s {
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

// FuzzToV10 checks that every envelope the Reader returns either has no
// v1.0 form (ErrNotV10) or has one that reads back with the same sender,
// receiver, ids, body and (legacy) intent, and that writing it twice gives
// the same bytes.
func FuzzToV10(f *testing.F) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		f.Fatalf("no fuzz seeds: %v", err)
	}
	for _, n := range names {
		b, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, dropMeta bool) {
		r := envelope.NewReader(bytes.NewReader(in))
		for {
			e, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				continue
			}
			v, err := envelope.ToV10(e, envelope.V10Options{DropMeta: dropMeta, KeepIntents: true})
			if err != nil {
				if !errors.Is(err, envelope.ErrNotV10) || dropMeta {
					t.Fatalf("ToV10 = %v", err)
				}
				continue
			}
			b, err := envelope.MarshalV10(v)
			if err != nil {
				continue // not writable at all (e.g. an unknown field the writer refuses)
			}
			if again, _ := envelope.MarshalV10(v); !bytes.Equal(again, b) {
				t.Fatal("MarshalV10 is not deterministic")
			}
			back, err := envelope.NewReader(bytes.NewReader(b)).Next() // lenient, as e was read
			if err != nil {
				t.Fatalf("the v1.0 form does not read back: %v\n%s", err, b)
			}
			if back.From != e.From || back.To != e.To || back.Thread != e.Thread || back.Parent != e.Parent ||
				back.Message != e.Message || back.Body != e.Body || back.Session == "" || len(back.Meta) != 0 {
				t.Fatalf("read back %+v\nfrom %+v\n%s", back, e, b)
			}
			if back.Intent != e.Intent && !(e.Intent == envelope.IntentRespond && back.LegacyIntent == "ANSWER") && !(e.Intent == envelope.IntentRequest && back.LegacyIntent == "QUESTION") {
				t.Fatalf("intent %s read back as %s (legacy %q)\n%s", e.Intent, back.Intent, back.LegacyIntent, b)
			}
		}
	})
}
