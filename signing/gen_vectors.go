//go:build ignore

// gen_vectors writes our own signing vectors to ../fixtures/signing/vectors
// and their test keys to ../fixtures/signing/keys. Run it from this
// directory:
//
//	go run gen_vectors.go
//
// Every signature is deterministic (Ed25519; RFC 6979 for ES256), so a run
// reproduces the checked-in files byte for byte. The keys are test keys
// whose private halves are public: the published canon-v1.1-rc1 Ed25519
// key, and a P-256 key derived from a fixed string.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
	"golang.org/x/text/unicode/norm"
)

const (
	dir      = "../fixtures/signing"
	edPkid   = "canon-test@example.com"
	ecPkid   = "es256-test@example.com"
	ecSeedID = "crosstalk test secp256r1 key v1"
)

func main() {
	pemData, err := os.ReadFile(filepath.Join(dir, "canon-v1.1-rc1/private.pem"))
	check(err)
	ed, err := signing.ParsePrivateKey(pemData, edPkid)
	check(err)
	scalar := sha256.Sum256([]byte(ecSeedID))
	eck, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar[:])
	check(err)
	ec, err := signing.NewPrivateKey(ecPkid, eck)
	check(err)

	writeKey("canon-ed25519.pub", signing.MarshalPublicKey(ed.Public()))
	writeKey("test-secp256r1.pub", signing.MarshalPublicKey(ec.Public()))
	ecPriv, err := signing.MarshalPrivateKey(ec, time.Date(2025, 10, 9, 17, 0, 0, 0, time.UTC))
	check(err)
	writeKey("test-secp256r1.key", append([]byte("# TEST KEY — its private half is public; never use it for anything else\n"), ecPriv...))

	plain := &signing.SignOptions{}
	base := envText("kalle", "2025-10-09T17Z gen001", "", "signing-vectors", "REQUEST", nil,
		"Hello from the generator.\nSecond line.")

	// Tab-indented body lines are signed verbatim.
	tab := "[[BROTHER→CLAUDE v1]]\nuser: kalle\ncontext: tabs\nintent: REQUEST\n\nbody: |\n\tTabbed line 1\n\t\tTabbed line 2\n  mixed\tindent\nsig: none\n[[END]]\n"
	vec("tab-body", "tab-indented body lines, signed verbatim", "verified", "canon-ed25519.pub", sign(tab, ed, plain))

	// Trailing blanks in body lines are part of the payload.
	trail := "[[BROTHER→CLAUDE v1]]\nuser: kalle\ncontext: trailing-blanks\nintent: REQUEST\n\nbody: |\n  two spaces after this  \n  a tab after this\t\n\nsig: none\n[[END]]\n"
	vec("trailing-blanks", "trailing spaces and tabs, and a blank line before sig:, are signed", "verified", "canon-ed25519.pub", sign(trail, ed, plain))

	// CRLF: signed with LF, delivered with CRLF.
	s := sign(base, ed, plain)
	vec("crlf", "signed with LF, delivered with CRLF line ends", "verified", "canon-ed25519.pub", strings.ReplaceAll(s, "\n", "\r\n"))
	vec("lone-cr", "signed with LF, delivered with lone CR line ends", "verified", "canon-ed25519.pub", strings.ReplaceAll(s, "\n", "\r"))

	// NFD: signed in NFC, delivered in NFD; and signed from NFD input.
	uni := envText("källä", "2025-10-09T17Z cafe02", "", "unicode", "REQUEST", nil, "Café naïve — Å ñ ü")
	su := sign(uni, ed, plain)
	vec("nfd-delivery", "signed in NFC, delivered decomposed (NFD): the payload is NFC either way", "verified", "canon-ed25519.pub", norm.NFD.String(su))
	vec("nfd-signed", "signed from decomposed (NFD) text, delivered as signed", "verified", "canon-ed25519.pub", sign(norm.NFD.String(uni), ed, plain))

	// META blocks, thread ids, and a key announcement.
	meta := envText("kalle", "", "01J9ZQ3K8Y5V4W3X2Z1A0B9C8D", "meta-and-ids", "REQUEST",
		[]envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Priority", Value: "high"}, {Key: "X-Route", Value: "claude://a → chatgpt://b"}}}},
		"With META.")
	meta = strings.Replace(meta, "thread: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8D\n", "thread: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8D\nparent: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8E\nmessage: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8F\n", 1)
	vec("meta-announce", "META blocks, thread/parent/message ids, and `meta: signing` Public-Key announcing the key", "verified", "canon-ed25519.pub", sign(meta, ed, &signing.SignOptions{Announce: true}))

	// Fenced and quoted pastes.
	vec("fenced", "pasted inside a ``` fence with chat text around it", "verified", "canon-ed25519.pub",
		"Here is the signed message:\n\n```text\n"+s+"```\n\nLet me know.\n")
	vec("quoted", "pasted as a > quote, with CRLF", "verified", "canon-ed25519.pub",
		strings.ReplaceAll("Earlier you wrote:\n"+quote(s)+"\nThanks.\n", "\n", "\r\n"))
	vec("trailing-noise", "chat text right after [[END]]", "verified", "canon-ed25519.pub", s+"That was the envelope. [[END]] of story.\n")

	// Sig line forms.
	vec("form-jws", "sig=<compact detached JWS>", "verified", "canon-ed25519.pub", sign(base, ed, &signing.SignOptions{Form: signing.FormJWS}))
	vec("form-bare-jws", "bare compact detached JWS as the whole value", "verified", "canon-ed25519.pub", sign(base, ed, &signing.SignOptions{Form: signing.FormBareJWS}))
	vec("form-std-padded", "sig= in standard base64 with padding", "verified", "canon-ed25519.pub", stdPadded(s))

	// ES256.
	vec("es256", "secp256r1 (ES256, r‖s) signature, plain form", "verified", "test-secp256r1.pub", sign(base, ec, plain))
	vec("es256-jws", "secp256r1 as a compact detached JWS with the ES256 header", "verified", "test-secp256r1.pub", sign(base, ec, &signing.SignOptions{Form: signing.FormJWS, Announce: true}))

	// Failures.
	vec("unsigned", "sig: none", "unsigned", "canon-ed25519.pub", base)
	vec("tampered-body", "one body character changed after signing", "bad-signature", "canon-ed25519.pub", strings.Replace(s, "Second line.", "Second line!", 1))
	vec("tampered-field", "the context field changed after signing", "bad-signature", "canon-ed25519.pub", strings.Replace(s, "context: signing-vectors", "context: signing-vector", 1))
	vec("wrong-key", "signed by the ES256 key, verified with the Ed25519 key", "bad-signature", "canon-ed25519.pub", sign(base, ec, plain))
	vec("other-header", "a JWS whose protected header is not the crosstalk header (typ JWT)", "bad-signature", "canon-ed25519.pub", otherHeader(sign(base, ed, &signing.SignOptions{Form: signing.FormJWS})))
	vec("sig-no-space", "`sig:` with no blank after the colon is the sig line too", "verified", "canon-ed25519.pub", strings.Replace(s, "\nsig: ", "\nsig:", 1))
	vec("truncated-sig", "signature cut short", "bad-signature", "canon-ed25519.pub", truncate(s))
}

func envText(user, session, thread, ctx, intent string, meta []envelope.Meta, body string) string {
	e := &envelope.Envelope{From: "BROTHER", To: "CLAUDE", Version: 1, User: user, Session: session, Thread: thread,
		Context: ctx, Intent: intent, Meta: meta, Body: body, Sig: "none", Complete: true}
	b, err := envelope.Marshal(e)
	check(err)
	return string(b)
}

func sign(text string, k *signing.PrivateKey, o *signing.SignOptions) string {
	b, err := signing.Sign([]byte(text), k, o)
	check(err)
	return string(b)
}

func quote(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("> " + l)
		}
	}
	return b.String()
}

func sigLine(s string) (pre, value, post string) {
	i := strings.Index(s, "\nsig: ")
	j := strings.Index(s[i+1:], "\n") + i + 1
	return s[:i+6], s[i+6 : j], s[j:]
}

func stdPadded(s string) string {
	pre, v, post := sigLine(s)
	sg, err := signing.ParseSig(v)
	check(err)
	return pre + fmt.Sprintf("%s:pkid=%s;sig=%s", sg.Alg, sg.Pkid, stdB64(sg.Signature)) + post
}

func stdB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func otherHeader(s string) string {
	pre, v, post := sigLine(s)
	tag, jws, _ := strings.Cut(v, ";sig=")
	_, sig, _ := strings.Cut(jws, "..")
	hdr := `{"alg":"EdDSA","b64":true,"crit":["b64","cty","ver"],"cty":"crosstalk/v1.1","typ":"JWT","ver":"1.1-rc1"}`
	return pre + tag + ";sig=" + b64url([]byte(hdr)) + ".." + sig + post
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func truncate(s string) string {
	pre, v, post := sigLine(s)
	return pre + v[:len(v)-8] + post
}

func vec(name, comment, expect, key, text string) {
	var h bytes.Buffer
	fmt.Fprintf(&h, "comment: %s\nexpect: %s\nkey: %s\n", comment, expect, key)
	r := envelope.NewReader(strings.NewReader(text))
	env, err := r.Next()
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	if env.Signed() {
		if p, err := signing.Payload(env); err == nil {
			sum := sha256.Sum256(p)
			fmt.Fprintf(&h, "payload-sha256: %s\n", hex.EncodeToString(sum[:]))
		}
	}
	h.WriteString("\n")
	h.WriteString(text)
	check(os.WriteFile(filepath.Join(dir, "vectors", name+".txt"), h.Bytes(), 0o644))
}

func writeKey(name string, data []byte) {
	check(os.WriteFile(filepath.Join(dir, "keys", name), data, 0o644))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
