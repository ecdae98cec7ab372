package signing

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"golang.org/x/text/unicode/norm"
)

func testKey(t testing.TB, alg Alg, pkid string) *PrivateKey {
	t.Helper()
	k, err := GenerateKey(alg, pkid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const plainEnv = "[[ALICE→BOB v1]]\nuser: kalle\ncontext: test\nintent: REQUEST\n\nbody: |\n  Hello Bob.\n"

func TestSignSigLine(t *testing.T) {
	k := testKey(t, Ed25519, "alice@example.com")
	for _, tt := range []struct{ name, in string }{
		{"sig none", plainEnv + "sig: none\n[[END]]\n"},
		{"no sig line", plainEnv + "[[END]]\n"},
		{"old signature", plainEnv + "sig: ed25519:pkid=old;sig=AAAA\n[[END]]\n"},
		{"no [[END]]", plainEnv},
		{"blank lines after sig", plainEnv + "sig: none\n\n[[END]]\n"},
		{"CRLF, fence, chat", "chat\r\n```\r\n" + strings.ReplaceAll(plainEnv, "\n", "\r\n") + "sig: none\r\n[[END]]\r\n```\r\nmore chat\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Sign([]byte(tt.in), k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), plainEnv) {
				t.Errorf("Sign changed the lines above sig:\n%s", out)
			}
			if n := strings.Count(string(out), "\nsig:"); n != 1 {
				t.Errorf("Sign wrote %d sig: lines:\n%s", n, out)
			}
			if !strings.HasSuffix(string(out), "[[END]]\n") {
				t.Errorf("Sign output does not end with [[END]]:\n%s", out)
			}
			env := readEnv(t, string(out))
			if r := Verify(env, k.Public()); r.Status != StatusVerified {
				t.Errorf("Verify(Sign(x)) = %s (%v)", r.Status, r.Err)
			}
			again, err := Sign(out, k, nil)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("signing twice = %q, %v; want the same text", again, err)
			}
		})
	}
}

func TestSignErrors(t *testing.T) {
	k := testKey(t, Ed25519, "alice")
	if _, err := Sign([]byte("no envelope here"), k, nil); err == nil {
		t.Error("Sign(no envelope) = nil error")
	}
	two := plainEnv + "[[END]]\n" + plainEnv + "[[END]]\n"
	if _, err := Sign([]byte(two), k, nil); err == nil {
		t.Error("Sign(two envelopes) = nil error")
	}
	if _, err := Sign([]byte("[[A→B v1]]\nintent: REQUEST\n"), k, nil); err == nil {
		t.Error("Sign(envelope without body) = nil error")
	}
	bad := &PrivateKey{Pkid: "x", Key: nil}
	if _, err := Sign([]byte(plainEnv+"[[END]]\n"), bad, nil); !errors.Is(err, ErrUnsupportedAlg) {
		t.Errorf("Sign(nil key) = %v, want ErrUnsupportedAlg", err)
	}
}

func TestSignComposed(t *testing.T) {
	k := testKey(t, SECP256R1, "bob@example.com")
	e := envelope.New("BOB", "ALICE", envelope.IntentRespond, "composed\n\tnot read from text")
	out, err := SignEnvelope(e, k, &SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	env := readEnv(t, string(out))
	if r := Verify(env, k.Public()); r.Status != StatusVerified || r.Alg != SECP256R1 {
		t.Errorf("Verify = %s %s (%v)", r.Status, r.Alg, r.Err)
	}
	if v, _ := env.MetaValue("signing", "Public-Key"); v != k.Public().Value() {
		t.Errorf("announced %q, want %q", v, k.Public().Value())
	}
	if _, err := envelope.Unmarshal(out); err != nil {
		t.Errorf("signed composed envelope is not strict-valid: %v", err)
	}
}

func TestSignAnnounce(t *testing.T) {
	k := testKey(t, Ed25519, "alice@example.com")
	val := "Public-Key: " + k.Public().Value() + "\n"
	for _, tt := range []struct{ name, in, wantHead string }{
		{"blank before body",
			"[[A→B v1]]\nintent: REQUEST\n\nbody: |\n  hi\nsig: none\n[[END]]\n",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\n" + val + "\nbody: |\n  hi\n"},
		{"no blank before body",
			"[[A→B v1]]\nintent: REQUEST\nbody: |\n  hi\n[[END]]\n",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\n" + val + "\nbody: |\n  hi\n"},
		{"after other META",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: routing\nX-Priority: high\n\nbody: |\n  hi\n[[END]]\n",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: routing\nX-Priority: high\n\nmeta: signing\n" + val + "\nbody: |\n  hi\n"},
		{"existing block, old key",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\nPublic-Key: ed25519:AAAA\nNote: kept\n\nbody: |\n  hi\n[[END]]\n",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\n" + val + "Note: kept\n\nbody: |\n  hi\n"},
		{"existing block, no key",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\nNote: kept\nbody: |\n  hi\n[[END]]\n",
			"[[A→B v1]]\nintent: REQUEST\n\nmeta: signing\nNote: kept\n" + val + "body: |\n  hi\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Sign([]byte(tt.in), k, &SignOptions{Announce: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), tt.wantHead) {
				t.Fatalf("Sign(announce) =\n%s\nwant it to start with\n%s", out, tt.wantHead)
			}
			env := readEnv(t, string(out))
			if v, ok := env.MetaValue("signing", "Public-Key"); !ok || v != k.Public().Value() {
				t.Errorf("MetaValue(signing, Public-Key) = %q, %v", v, ok)
			}
			p, _ := Payload(env)
			if !bytes.Contains(p, []byte(val)) {
				t.Error("the Public-Key line is not in the signed payload")
			}
			if r := Verify(env, k.Public()); r.Status != StatusVerified {
				t.Errorf("Verify = %s (%v)", r.Status, r.Err)
			}
		})
	}
}

// signedSample is an envelope with most things that could go wrong:
// META, ids, tabs, trailing blanks, non-ASCII, an indented [[END]].
const signedSample = "[[ALICE→BOB v1]]\nuser: källe\nthread: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8D\ncontext: tamper\nintent: REQUEST\n\nmeta: routing\nX-Priority: high\n\nbody: |\n  Café\n\tTabbed  \n  [[END]]\n\n  end\n"

// TestTamper: every single-byte change of the signed part (replace,
// delete, insert) fails; so does every change of the signature.
func TestTamper(t *testing.T) {
	for _, alg := range []Alg{Ed25519, SECP256R1} {
		t.Run(string(alg), func(t *testing.T) {
			k := testKey(t, alg, "alice@example.com")
			signed, err := Sign([]byte(signedSample+"[[END]]\n"), k, nil)
			if err != nil {
				t.Fatal(err)
			}
			sigAt := bytes.Index(signed, []byte("\nsig: ")) + 1
			check := func(what string, text []byte) {
				t.Helper()
				r := envelope.NewReader(bytes.NewReader(text))
				for {
					env, err := r.Next()
					if env == nil && err != nil {
						if _, ok := err.(*envelope.SyntaxError); ok {
							continue
						}
						return
					}
					if res := Verify(env, k.Public()); res.Status == StatusVerified {
						t.Fatalf("%s: still verifies:\n%s", what, text)
					}
				}
			}
			for i := 0; i < sigAt; i++ {
				c := signed[i]
				for _, b := range []byte{c ^ 0x01, c ^ 0x20, 'x', ' ', '\t', '\n'} {
					if b == c {
						continue
					}
					m := bytes.Clone(signed)
					m[i] = b
					check("replace byte "+itoa(i), m)
				}
				check("delete byte "+itoa(i), append(bytes.Clone(signed[:i]), signed[i+1:]...))
				for _, b := range []byte{'x', ' ', '\n'} {
					if i == 0 && b == '\n' {
						continue // a blank line before the header is outside the envelope
					}
					m := append(append(bytes.Clone(signed[:i]), b), signed[i:]...)
					check("insert byte "+itoa(i), m)
				}
			}
			// The signature itself: every base64 character of sig=.
			sigStart := bytes.Index(signed, []byte(";sig=")) + 5
			sigEnd := bytes.Index(signed[sigStart:], []byte("\n")) + sigStart
			for i := sigStart; i < sigEnd; i++ {
				m := bytes.Clone(signed)
				m[i] ^= 0x01
				check("signature byte "+itoa(i), m)
			}
		})
	}
}

// TestChangesOutside: what chat UIs do to a paste, outside the signed
// bytes, does not break the signature.
func TestChangesOutside(t *testing.T) {
	k := testKey(t, Ed25519, "alice@example.com")
	signed, err := Sign([]byte(signedSample+"[[END]]\n"), k, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(signed)
	quote := func(s string) string {
		return "> " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n> ") + "\n"
	}
	for name, text := range map[string]string{
		"CRLF":                   strings.ReplaceAll(s, "\n", "\r\n"),
		"lone CR":                strings.ReplaceAll(s, "\n", "\r"),
		"fence":                  "```\n" + s + "```\n",
		"tilde fence with info":  "Sure:\n~~~~ crosstalk\n" + s + "~~~~\nbye\n",
		"quote":                  quote(s),
		"quote, fence and CRLF":  strings.ReplaceAll(quote("```\n"+s+"```\n"), "\n", "\r\n"),
		"trailing noise":         s + "[[END]] and some noise\nmore\n",
		"noise on the END line":  strings.TrimSuffix(s, "[[END]]\n") + "[[END]]   \n",
		"text before":            "Here you go:\n\n" + s,
		"BOM":                    "\ufeff" + s,
		"blank lines before END": strings.Replace(s, "\n[[END]]", "\n\n\n[[END]]", 1),
		"blanks after sig value": strings.Replace(s, "\n[[END]]", "  \t\n[[END]]", 1),
	} {
		t.Run(name, func(t *testing.T) {
			env := readEnv(t, text)
			if r := Verify(env, k.Public()); r.Status != StatusVerified {
				t.Errorf("Verify = %s (%v)\n%q", r.Status, r.Err, text)
			}
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// FuzzSignVerify: for any text the Reader finds an envelope in, Sign never
// panics, and what it returns reads back as one envelope that verifies —
// also after a chat-style paste (CRLF, quote prefix).
func FuzzSignVerify(f *testing.F) {
	for _, v := range readVectors(f) {
		f.Add(v.text)
	}
	f.Add(signedSample)
	f.Add(plainEnv)
	k := testKey(f, Ed25519, "fuzz@example.com")
	f.Fuzz(func(t *testing.T, text string) {
		env, err := envelope.NewReader(strings.NewReader(text)).Next()
		if err != nil {
			return
		}
		for _, announce := range []bool{false, true} {
			out, err := SignEnvelope(env, k, &SignOptions{Announce: announce})
			if err != nil {
				return
			}
			r := envelope.NewReader(bytes.NewReader(out))
			got, err := r.Next()
			if err != nil {
				t.Fatalf("Sign output does not read back: %v\n%q", err, out)
			}
			if res := Verify(got, k.Public()); res.Status != StatusVerified {
				t.Fatalf("Sign output = %s (%v)\n%q", res.Status, res.Err, out)
			}
			if _, err := r.Next(); err == nil {
				t.Fatalf("Sign output holds more than one envelope:\n%q", out)
			}
			pasted := "> " + strings.ReplaceAll(strings.TrimSuffix(string(out), "\n"), "\n", "\r\n> ") + "\r\n"
			if got, err := envelope.NewReader(strings.NewReader(pasted)).Next(); err == nil {
				// A quote prefix can change a line that starts with
				// blanks only by one space (docs/format.md §1); the
				// prefix "> " never does.
				if res := Verify(got, k.Public()); res.Status != StatusVerified {
					t.Fatalf("quoted paste of Sign output = %s (%v)\n%q", res.Status, res.Err, pasted)
				}
			}
		}
	})
}

// TestVerifiedMeansSameReading: whatever is done to a signed envelope —
// plain, quoted, fenced, or both — by inserting, replacing, prefixing or
// suffixing a line with one that the Reader treats specially (sig:,
// [[END]], META, fields, a header, fences, quote prefixes, line ends,
// invisible characters), or by changing or inserting one byte anywhere:
// if an envelope read from the result still verifies under the key, it
// reads as the signed one did (every field, META and the body, compared
// in NFC). A signature never vouches for text it does not cover.
func TestVerifiedMeansSameReading(t *testing.T) {
	k := testKey(t, Ed25519, "alice@example.com")
	signed, err := Sign([]byte(signedSample+"[[END]]\n"), k, &SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	reading := func(e *envelope.Envelope) string {
		return norm.NFC.String(fmt.Sprintf("%q|%q|%q|%q|%q|%q|%q|%q|%q|%q|%q|%v|%q|%q", e.From, e.To, e.User, e.Session, e.Thread,
			e.Parent, e.Message, e.Context, e.Intent, e.LegacyIntent, e.Body, e.ResponseForm, e.Fields, e.Meta))
	}
	want := reading(readEnv(t, string(signed)))
	var sigLine string
	for _, l := range strings.SplitAfter(string(signed), "\n") {
		if strings.HasPrefix(l, "sig:") {
			sigLine = l
		}
	}
	quote := func(s string) string {
		return "> " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n> ") + "\n"
	}
	special := []string{"sig: none\n", "sig: x\n", "sig:\n", sigLine, "> " + sigLine, "[[END]]\n", "[[END]] x\n", "> [[END]]\n",
		"meta: routing\n", "X-Priority: low\n", "meta: signing\n", "Public-Key: ed25519:AAAA\n", "intent: ACK\n", "user: mallory\n",
		"body: |\n", "response: |\n", "  extra\n", "[[MALLORY→BOB v1]]\n", "```\n", "~~~\n", "> \n", ">\n", "> > x\n",
		"> intent: ACK\n", "\n", " \n", "\t\n", "\r\n", "\r", "\u00a0\n", "\ufeff\n", "\u2028\n"}
	check := func(what, text string) {
		r := envelope.NewReader(strings.NewReader(text))
		for {
			env, err := r.Next()
			var se *envelope.SyntaxError
			if errors.As(err, &se) {
				continue
			}
			if env == nil {
				return
			}
			if Verify(env, k.Public()).Status == StatusVerified {
				if got := reading(env); got != want {
					t.Fatalf("%s: verifies but reads\n%s\nnot\n%s\ntext: %q", what, got, want, text)
				}
			}
		}
	}
	for _, form := range []string{string(signed), quote(string(signed)), "```\n" + string(signed) + "```\n", quote("```\n" + string(signed) + "```\n")} {
		lines := strings.SplitAfter(form, "\n")
		for i := 0; i <= len(lines); i++ {
			for _, s := range special {
				with := func(mid ...string) string {
					return strings.Join(lines[:i], "") + strings.Join(mid, "") + strings.Join(lines[min(i+1, len(lines)):], "")
				}
				check(fmt.Sprintf("insert %q before line %d", s, i), strings.Join(lines[:i], "")+s+strings.Join(lines[i:], ""))
				if i < len(lines) {
					check(fmt.Sprintf("line %d replaced by %q", i, s), with(s))
					check(fmt.Sprintf("line %d prefixed with %q", i, s), with(strings.TrimSuffix(s, "\n"), lines[i]))
					check(fmt.Sprintf("line %d suffixed with %q", i, s), with(strings.TrimSuffix(lines[i], "\n"), s))
				}
			}
		}
		for i := 0; i < len(form); i++ {
			for _, b := range []string{" ", "\n", "\r", ">", "`", "x", ":", ";", "="} {
				check(fmt.Sprintf("byte %d set to %q", i, b), form[:i]+b+form[i+1:])
				check(fmt.Sprintf("%q inserted at %d", b, i), form[:i]+b+form[i:])
			}
		}
	}
}
