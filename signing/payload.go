package signing

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"golang.org/x/text/unicode/norm"
)

// The fixed JWS protected headers (docs/design.md §4.1, docs/signing.md §2):
// minified JSON with sorted keys. A JWS whose header is not byte-equal to
// the one for its algorithm does not verify.
const (
	protectedEdDSA = `{"alg":"EdDSA","b64":true,"crit":["b64","cty","ver"],"cty":"crosstalk/v1.1","typ":"JOSE","ver":"1.1-rc1"}`
	protectedES256 = `{"alg":"ES256","b64":true,"crit":["b64","cty","ver"],"cty":"crosstalk/v1.1","typ":"JOSE","ver":"1.1-rc1"}`
)

var (
	b64Protected = map[Alg]string{
		Ed25519:   base64.RawURLEncoding.EncodeToString([]byte(protectedEdDSA)),
		SECP256R1: base64.RawURLEncoding.EncodeToString([]byte(protectedES256)),
	}
)

// ProtectedHeader returns the fixed JWS protected header for alg, exactly as
// signed (before base64url), or "" for an unsupported algorithm.
func ProtectedHeader(alg Alg) string {
	switch alg {
	case Ed25519:
		return protectedEdDSA
	case SECP256R1:
		return protectedES256
	}
	return ""
}

// Payload returns the signed bytes of env (docs/design.md §4.1): its source text
// with line ends made LF and fences and quote prefixes removed (as the
// Reader returns it), NFC-normalized, from the header line up to, not
// including, the first column-0 line starting with `sig:` or equal to
// `[[END]]` (trailing blanks allowed, as the Reader allows them), every
// line LF-terminated. Lines are taken verbatim: nothing is re-indented,
// reordered or trimmed.
//
// It fails with ErrNoSource for an envelope that was not read from text,
// and with ErrUnsignedLines when anything but the sig: line, blank lines
// and [[END]] follows the signed part. The Reader never returns such an
// envelope (it ends the body at any column-0 `sig:` line and allows only
// blank lines after it); the check keeps a signature from covering less
// than an envelope shows if its source came from elsewhere.
func Payload(env *envelope.Envelope) ([]byte, error) {
	if env == nil || env.Source() == nil {
		return nil, ErrNoSource
	}
	p, _, err := payloadOf(env.Source())
	if err != nil {
		return nil, err
	}
	if len(p) > 0 && &p[0] == &env.Source()[0] {
		p = bytes.Clone(p) // never hand out the envelope's own bytes
	}
	return p, nil
}

// PayloadOf returns the payload of src, which must be source text in the
// form Envelope.Source returns (LF line ends, no fence or quote prefix,
// starting at the header line). Unlike Payload it does not check what
// follows the signed part.
func PayloadOf(src []byte) []byte {
	p, _, _ := payloadOf(src)
	return bytes.Clone(p)
}

// SigningInput returns b64url(protected) "." b64url(payload) for alg, the
// bytes that are signed (docs/design.md §4.1). It returns nil for an unsupported
// algorithm.
func SigningInput(alg Alg, payload []byte) []byte {
	return appendSigningInput(nil, alg, payload)
}

// appendSigningInput appends the signing input to dst (nil for an
// unsupported algorithm).
func appendSigningInput(dst []byte, alg Alg, payload []byte) []byte {
	h, ok := b64Protected[alg]
	if !ok {
		return nil
	}
	enc := base64.RawURLEncoding
	n := len(h) + 1 + enc.EncodedLen(len(payload))
	out := slices.Grow(dst[:0], n)[:n]
	copy(out, h)
	out[len(h)] = '.'
	enc.Encode(out[len(h)+1:], payload)
	return out
}

// inputPool holds signing-input buffers for Verify, which needs one per
// call only while it verifies.
var inputPool = sync.Pool{New: func() any { return new([]byte) }}

// payloadOf splits src into the payload (NFC, may alias src) and the rest,
// and checks that the rest holds only the sig: line, blank lines and
// [[END]].
func payloadOf(src []byte) (payload, rest []byte, err error) {
	cut := len(src)
	for i := 0; i < len(src); {
		j := bytes.IndexByte(src[i:], '\n')
		end := len(src)
		if j >= 0 {
			end = i + j
		}
		line := src[i:end]
		if i > 0 && (bytes.HasPrefix(line, []byte("sig:")) || isEndLine(line)) {
			cut = i
			break
		}
		if j < 0 {
			break
		}
		i = end + 1
	}
	payload, rest = src[:cut], src[cut:]
	if len(payload) > 0 && payload[len(payload)-1] != '\n' {
		payload = append(bytes.Clone(payload), '\n')
	}
	if !isNFC(payload) {
		payload = norm.NFC.Bytes(payload)
	}
	return payload, rest, checkRest(rest)
}

// isNFC reports whether b is in NFC. ASCII is always NFC and every ASCII
// character is a starter that nothing composes onto from the left, so only
// the runs of non-ASCII bytes need checking, each with the ASCII byte before
// it (which a combining mark could compose with). Most envelopes are
// mostly ASCII, and this is several times faster than checking it all.
func isNFC(b []byte) bool {
	for i := 0; i < len(b); {
		// Skip ASCII, eight bytes at a time.
		for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 == 0 {
			i += 8
		}
		for i < len(b) && b[i] < utf8.RuneSelf {
			i++
		}
		if i == len(b) {
			return true
		}
		j := i
		for j < len(b) && b[j] >= utf8.RuneSelf {
			j++
		}
		start := max(i-1, 0)
		if seg := b[start:j]; norm.NFC.QuickSpan(seg) != len(seg) {
			return false
		}
		i = j
	}
	return true
}

// checkRest reports ErrUnsignedLines unless rest is an optional sig: field
// line followed by blank lines and an optional [[END]] (the last line).
func checkRest(rest []byte) error {
	first := true
	ended := false
	for len(rest) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		rest = after
		switch {
		case ended:
			return ErrUnsignedLines
		case first && isSigField(line):
		case isEndLine(line):
			ended = true
		case isBlankLine(line):
		default:
			return ErrUnsignedLines
		}
		first = false
	}
	return nil
}

// isSigField reports a sig: line: any column-0 line starting with `sig:`,
// with or without a blank after the colon, as the Reader reads it.
func isSigField(line []byte) bool { return bytes.HasPrefix(line, []byte("sig:")) }

func isEndLine(line []byte) bool {
	return bytes.Equal(bytes.TrimRight(line, " \t"), []byte("[[END]]"))
}

func isBlankLine(line []byte) bool {
	return len(bytes.Trim(line, " \t")) == 0
}
