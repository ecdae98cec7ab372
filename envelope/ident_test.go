package envelope_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"golang.org/x/text/unicode/norm"
)

func TestNormalizeIdentifier(t *testing.T) {
	tests := []struct {
		in, want string
		refused  rune // 0: accepted
	}{
		{"CLAUDE", "CLAUDE", 0},
		{"Brother AI", "Brother AI", 0},
		{"claude://session/abc", "claude://session/abc", 0},
		{"CAFE\u0301", "CAF\u00c9", 0}, // NFD → NFC
		{"CAF\u00c9", "CAF\u00c9", 0},
		{"日本語", "日本語", 0},
		{"NUL\x00", "", 0},
		{"tab\there", "", '\t'},
		{"del\x7f", "", 0x7f},
		{"c1\u0085", "", 0x85},
		{"CLA\u202eUDE", "", 0x202e},
		{"pro\u200bj", "", 0x200b},
		{"a\u200db", "", 0x200d},
		{"\ufeffbom", "", 0xfeff},
		{"lrm\u200e", "", 0x200e},
		{"isolate\u2066x\u2069", "", 0x2066},
		{"alm\u061c", "", 0x061c},
		{"soft\u00adhyphen", "", 0x00ad},
		{"hangul\u3164filler", "", 0x3164},
		{"vs\ufe0f", "", 0xfe0f},
		{"cgj\u034f", "", 0x034f},
		{"nb\u00a0sp", "", 0x00a0},
		{"ideo\u3000sp", "", 0x3000},
		{"line\u2028sep", "", 0x2028},
		{"bad\xffutf8", "", utf8.RuneError},
	}
	for _, tt := range tests {
		got, err := envelope.NormalizeIdentifier(tt.in)
		var ie *envelope.IdentifierError
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("NormalizeIdentifier(%+q) = %+q, %v; want %+q", tt.in, got, err, tt.want)
		case tt.want == "" && (!errors.As(err, &ie) || !errors.Is(err, envelope.ErrIdentifier)):
			t.Errorf("NormalizeIdentifier(%+q) = %+q, %v; want an *IdentifierError", tt.in, got, err)
		case tt.want == "" && tt.refused != 0 && ie.Rune != tt.refused:
			t.Errorf("NormalizeIdentifier(%+q) refused %U, want %U", tt.in, ie.Rune, tt.refused)
		case tt.want == "" && strings.ContainsAny(err.Error(), "\x00\u202e\u200b\u200d\ufeff\u200e\u2066"):
			t.Errorf("NormalizeIdentifier(%+q): the error message holds the character raw: %q", tt.in, err)
		}
	}
}

func TestReaderRefusesIdentifiers(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
	}{
		{"sender RLO", "chat\n[[CLA\u202eUDE→GEMINI v1]]\nintent: REQUEST\nbody: |\n  hi\n[[END]]\n", 2},
		{"receiver ZWSP", "[[CLAUDE→GEM\u200bINI v1]]\nintent: REQUEST\nbody: |\n  hi\n[[END]]\n", 1},
		{"context ZWSP", "[[CLAUDE→GEMINI v1]]\nintent: REQUEST\n\ncontext: pro\u200bj\nbody: |\n  hi\n[[END]]\n", 4},
		{"META namespace bidi", "[[CLAUDE→GEMINI v1]]\nintent: REQUEST\nmeta: rout\u2067ing\nX-Priority: high\nbody: |\n  hi\n[[END]]\n", 3},
		{"sender NUL", "[[CLA\x00UDE→GEMINI v1]]\nintent: REQUEST\nbody: |\n  hi\n[[END]]\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envelope.NewReader(strings.NewReader(tt.text)).Next()
			var se *envelope.SyntaxError
			if !errors.As(err, &se) || se.Code != envelope.CodeAddress || se.Line != tt.line || !errors.Is(err, envelope.ErrIdentifier) {
				t.Errorf("Next() = %v, want E-ADDRESS at line %d", err, tt.line)
			}
		})
	}
}

// TestReaderNormalizesIdentifiers: identifiers come out in NFC; the body
// and the source keep their bytes.
func TestReaderNormalizesIdentifiers(t *testing.T) {
	text := "[[CAFE\u0301→CAFE\u0301 v1]]\nintent: REQUEST\ncontext: cafe\u0301\nmeta: re\u0301\nK: v\nbody: |\n  e\u0301\n[[END]]\n"
	env, err := envelope.NewReader(strings.NewReader(text)).Next()
	if err != nil {
		t.Fatal(err)
	}
	if env.From != "CAF\u00c9" || env.To != "CAF\u00c9" || env.Context != "caf\u00e9" || env.Meta[0].Namespace != "r\u00e9" {
		t.Errorf("identifiers = %+q %+q %+q %+q, want NFC", env.From, env.To, env.Context, env.Meta[0].Namespace)
	}
	if env.Body != "e\u0301" || string(env.Source()) != text {
		t.Errorf("body %+q / source changed; want the bytes as read", env.Body)
	}
}

// TestReaderIDsAndIntentInNFC: the ids and the intent are read in NFC,
// the form a signature covers (docs/signing.md §1). KELVIN SIGN (U+212A)
// is K in NFC, so a K of a signed ULID or of ACK swapped for it keeps the
// signature valid; read verbatim, the relay recorded the same signed
// envelope again under "another" message id, and took the ACK for an
// unknown intent. The source keeps its bytes; no warning is left for a
// value that is valid in NFC.
func TestReaderIDsAndIntentInNFC(t *testing.T) {
	const k = "\u212a"
	text := "[[A→B v1]]\nmessage: 01J9ZQ3" + k + "8Y5V4W3X2Z1A0B9C8D\nthread: 01J9ZQ3" + k + "8Y5V4W3X2Z1A0B9C8E\nparent: 01J9ZQ3" + k + "8Y5V4W3X2Z1A0B9C8F\nintent: AC" + k + "\nbody: |\n  ok\n[[END]]\n"
	env, err := envelope.NewReader(strings.NewReader(text)).Next()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"message", env.Message, "01J9ZQ3K8Y5V4W3X2Z1A0B9C8D"},
		{"thread", env.Thread, "01J9ZQ3K8Y5V4W3X2Z1A0B9C8E"},
		{"parent", env.Parent, "01J9ZQ3K8Y5V4W3X2Z1A0B9C8F"},
		{"intent", env.Intent, envelope.IntentAck},
	} {
		if c.got != c.want {
			t.Errorf("%s = %+q, want %q", c.what, c.got, c.want)
		}
	}
	if w := env.Warnings(); len(w) > 0 {
		t.Errorf("warnings %q, want none", w)
	}
	if string(env.Source()) != text {
		t.Error("source changed; want the bytes as read")
	}
}

func TestShowInvisible(t *testing.T) {
	for in, want := range map[string]string{
		"CLAUDE":         "CLAUDE",
		"CAF\u00c9":      "CAF\u00c9",
		"CLA\u202eUDE":   "CLA⟨U+202E⟩UDE",
		"pro\u200bj\x00": "pro⟨U+200B⟩j⟨U+0000⟩",
	} {
		if got := envelope.ShowInvisible(in); got != want {
			t.Errorf("ShowInvisible(%+q) = %q, want %q", in, got, want)
		}
	}
}

// TestShowBidi: free text shows its bidi controls and keeps the other
// invisible characters, which emoji sequences need.
func TestShowBidi(t *testing.T) {
	for in, want := range map[string]string{
		"plain note":            "plain note",
		"ship \u202eti":         "ship ⟨U+202E⟩ti",
		"\u2066x\u2069 \u200fy": "⟨U+2066⟩x⟨U+2069⟩ ⟨U+200F⟩y",
		"ok \u26a0\ufe0f \U0001f469\u200d\U0001f4bb": "ok \u26a0\ufe0f \U0001f469\u200d\U0001f4bb",
	} {
		if got := envelope.ShowBidi(in); got != want {
			t.Errorf("ShowBidi(%+q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzNormalizeIdentifier: an accepted identifier is NFC, idempotent,
// and holds no character the function refuses; nothing panics.
func FuzzNormalizeIdentifier(f *testing.F) {
	for _, s := range []string{"CLAUDE", "CAFE\u0301", "CLA\u202eUDE", "pro\u200bj", "\x00", "\xff", "a\u0301\u0301b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := envelope.NormalizeIdentifier(s)
		if err != nil {
			if envelope.ShowInvisible(s) == s && utf8.ValidString(s) && !strings.ContainsRune(s, utf8.RuneError) {
				t.Errorf("NormalizeIdentifier(%+q) refused %v, but ShowInvisible finds nothing to show", s, err)
			}
			return
		}
		if !norm.NFC.IsNormalString(got) {
			t.Errorf("NormalizeIdentifier(%+q) = %+q, not NFC", s, got)
		}
		if again, err := envelope.NormalizeIdentifier(got); err != nil || again != got {
			t.Errorf("NormalizeIdentifier(%+q) = %+q, %v; not idempotent", got, again, err)
		}
		if envelope.ShowInvisible(got) != got {
			t.Errorf("accepted %+q shows invisible characters", got)
		}
	})
}

// BenchmarkNormalizeIdentifiers measures the identifier check the Reader
// runs on every envelope: printable ASCII names (the fast path) and NFD
// names that must be recomposed. Compare with BenchmarkParse/envelope of
// the same run for its share of a parse.
func BenchmarkNormalizeIdentifiers(b *testing.B) {
	for _, tc := range []struct{ name, from, context string }{
		{"ascii", "CLAUDE", "deploy-status"},
		{"nfd", "CAFE\u0301", "de\u0301ploiement"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := envelope.New(tc.from, "CHATGPT", envelope.IntentRequest, "x")
			e.Meta = []envelope.Meta{{Namespace: "routing"}, {Namespace: "privacy"}}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				e.From, e.Context = tc.from, tc.context
				if err := e.NormalizeIdentifiers(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestBreaksLine(t *testing.T) {
	for _, r := range []rune{'\n', '\r', '\t', 0x1b, 0x07, 0x202e, 0x2066, 0x200f, 0x061c, 0x2028, 0x2029} {
		if !envelope.BreaksLine(r) {
			t.Errorf("BreaksLine(%U) = false, want true", r)
		}
	}
	for _, r := range []rune{'a', ' ', 'é', '→', 0x200b} {
		if envelope.BreaksLine(r) {
			t.Errorf("BreaksLine(%U) = true, want false", r)
		}
	}
}
