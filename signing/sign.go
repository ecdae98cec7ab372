package signing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// SignOptions changes what Sign and SignEnvelope write. The zero value (or
// nil) writes the plain sig: form and no key announcement.
type SignOptions struct {
	// Announce adds a `meta: signing` block with `Public-Key:
	// alg:<base64url>` to the signed part, so a receiver that has never
	// seen the key can pin it on first use (docs/design.md §4.3). An existing
	// Public-Key line in a `meta: signing` block is replaced.
	Announce bool
	// Form is the sig: value form to write (FormPlain by default). With
	// FormBareJWS and Announce, the block also gets `Pkid:`, since the
	// bare JWS names no key id.
	Form SigForm
}

// Sign signs the one envelope in text and returns its new source text:
// LF line ends, no surrounding chat text, fence or quote prefix, the sig:
// line replaced by the signature (or added before [[END]] when missing —
// never two), [[END]] added if the envelope had none. text may hold chat
// text around the envelope, but exactly one envelope.
func Sign(text []byte, key *PrivateKey, opts *SignOptions) ([]byte, error) {
	r := envelope.NewReader(bytes.NewReader(text))
	env, err := r.Next()
	if err == io.EOF {
		return nil, errors.New("signing: no envelope found")
	}
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	if _, err := r.Next(); err != io.EOF {
		return nil, errors.New("signing: more than one envelope (sign them one at a time with SignEnvelope)")
	}
	return SignEnvelope(env, key, opts)
}

// SignEnvelope signs env and returns its new source text, as Sign does.
// The lines above the sig: line are kept as they are in env.Source(); an
// envelope that was not read from text is written in canonical form first.
func SignEnvelope(env *envelope.Envelope, key *PrivateKey, opts *SignOptions) ([]byte, error) {
	if opts == nil {
		opts = &SignOptions{}
	}
	alg := key.Alg()
	if alg == "" {
		return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, key.Key)
	}
	if err := checkPkid(key.Pkid); err != nil {
		return nil, err
	}
	src := env.Source()
	if src == nil {
		var err error
		if src, err = envelope.Marshal(env); err != nil {
			return nil, fmt.Errorf("signing: %w", err)
		}
	}
	lines := strings.SplitAfter(string(src), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			lines[i] = l + "\n"
		}
	}
	cut := len(lines)
	for i := 1; i < len(lines); i++ {
		l := []byte(strings.TrimSuffix(lines[i], "\n"))
		if bytes.HasPrefix(l, []byte("sig:")) || isEndLine(l) {
			cut = i
			break
		}
	}
	signed, tail := lines[:cut], lines[cut:]
	if err := checkRest([]byte(strings.Join(tail, ""))); err != nil {
		return nil, fmt.Errorf("%w: text after the sig: line", err)
	}
	if len(tail) > 0 && isSigField([]byte(strings.TrimSuffix(tail[0], "\n"))) {
		tail = tail[1:] // the old sig: line
	}
	if len(tail) == 0 || !isEndLine([]byte(strings.TrimSuffix(tail[len(tail)-1], "\n"))) {
		tail = append(tail, "[[END]]\n")
	}
	if opts.Announce {
		var err error
		if signed, err = announce(signed, key.Public(), opts.Form == FormBareJWS); err != nil {
			return nil, err
		}
	}
	payload := []byte(strings.Join(signed, ""))
	payload, _, _ = payloadOf(payload)
	raw, err := SignPayload(key, payload)
	if err != nil {
		return nil, err
	}
	s := &Sig{Alg: alg, Pkid: key.Pkid, Signature: raw, Form: opts.Form}
	var out bytes.Buffer
	out.Grow(len(src) + 200)
	for _, l := range signed {
		out.WriteString(l)
	}
	out.WriteString("sig: " + s.String() + "\n")
	for _, l := range tail {
		out.WriteString(l)
	}
	return out.Bytes(), nil
}

// announce adds or updates the `meta: signing` block in the signed lines
// (each LF-terminated): the Public-Key line (and Pkid when withPkid). A new
// block goes before the blank line that precedes the body, so it is in
// the signed part and the envelope stays canonical.
func announce(lines []string, pub *PublicKey, withPkid bool) ([]string, error) {
	body := -1
	for i := 1; i < len(lines); i++ {
		l := strings.TrimSuffix(lines[i], "\n")
		if isFieldLine(l, "body") || isFieldLine(l, "response") {
			body = i
			break
		}
	}
	if body < 0 {
		return nil, errors.New("signing: envelope has no body line; cannot announce the key")
	}
	want := []string{"Public-Key: " + pub.Value() + "\n"}
	if withPkid {
		want = append(want, "Pkid: "+pub.Pkid+"\n")
	}
	// An existing meta: signing block: replace or add its lines.
	for i := 1; i < body; i++ {
		l := strings.TrimRight(strings.TrimSuffix(lines[i], "\n"), " \t")
		if !isFieldLine(l, "meta") || strings.TrimSpace(l[len("meta:"):]) != "signing" {
			continue
		}
		end := i + 1
		for end < body && !isBlankLine([]byte(strings.TrimSuffix(lines[end], "\n"))) && !isTopKey(strings.TrimSuffix(lines[end], "\n")) {
			end++
		}
		block := lines[i+1 : end]
		var add []string
		for _, w := range want {
			key, _, _ := strings.Cut(w, ":")
			found := false
			for j, b := range block {
				if strings.HasPrefix(b, key+":") {
					block[j], found = w, true
				}
			}
			if !found {
				add = append(add, w)
			}
		}
		out := append([]string{}, lines[:end]...)
		out = append(out, add...)
		return append(out, lines[end:]...), nil
	}
	ins := append([]string{"\n", "meta: signing\n"}, want...)
	at := body
	if isBlankLine([]byte(strings.TrimSuffix(lines[body-1], "\n"))) && body-1 > 0 {
		at = body - 1 // before the blank line preceding the body
	} else {
		ins = append(ins, "\n")
	}
	out := append([]string{}, lines[:at]...)
	out = append(out, ins...)
	return append(out, lines[at:]...), nil
}

// isFieldLine reports a column-0 `key:` line followed by a blank or the end.
func isFieldLine(l, key string) bool {
	if !strings.HasPrefix(l, key+":") {
		return false
	}
	rest := l[len(key)+1:]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// isTopKey reports a known top-level key or meta:, which ends a META block
// (docs/format.md §4).
func isTopKey(l string) bool {
	for _, k := range []string{"user", "session", "thread", "parent", "message", "context", "intent", "body", "response", "sig", "meta"} {
		if isFieldLine(l, k) {
			return true
		}
	}
	return false
}
