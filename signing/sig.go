package signing

import (
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// SigForm is the shape of a sig: value (docs/design.md §4.2, docs/signing.md §3).
type SigForm int

// The sig: value forms.
const (
	// FormPlain is the seed's form, the one written by default:
	// `ed25519:pkid=<key-id>;sig=<base64url signature>`.
	FormPlain SigForm = iota
	// FormJWS carries a compact detached JWS in sig=:
	// `ed25519:pkid=<key-id>;sig=<protected>..<signature>`.
	FormJWS
	// FormBareJWS is a compact detached JWS as the whole value:
	// `<protected>..<signature>`. It names no key id; the verifier
	// tries the sender's pinned keys.
	FormBareJWS
)

// Sig is a parsed sig: value.
type Sig struct {
	Alg       Alg
	Pkid      string // empty for FormBareJWS
	Signature []byte // 64 bytes: Ed25519, or ES256 as r‖s
	Form      SigForm
}

// ParseSig parses the value of a sig: line (already trimmed by the Reader;
// it is trimmed again). Grammar (docs/signing.md §3):
//
//	value  = "none" / alg ":" param *( ";" param ) / jws
//	alg    = "ed25519" / "secp256r1"          ; any case
//	param  = "pkid=" key-id / "sig=" ( b64 / jws ) / other "=" text
//	jws    = b64 ".." b64                      ; protected ".." signature
//
// b64 is any of the four base64 flavours. pkid and sig are required in the
// alg form; unknown parameters are ignored (forward compatibility). A JWS's
// protected header must be byte-equal to ProtectedHeader of its algorithm,
// and in the alg form its algorithm must be the tagged one. "none" (or an
// empty value) is ErrNotSigned; every other failure wraps ErrMalformedSig,
// ErrUnsupportedAlg or ErrProtectedHeader. ParseSig never panics.
func ParseSig(value string) (*Sig, error) {
	v := strings.TrimSpace(value)
	if v == "" || strings.EqualFold(v, "none") {
		return nil, ErrNotSigned
	}
	if isJWSShape(v) {
		alg, sig, err := parseJWS(v)
		if err != nil {
			return nil, err
		}
		return &Sig{Alg: alg, Signature: sig, Form: FormBareJWS}, nil
	}
	tag, params, ok := strings.Cut(v, ":")
	if !ok {
		return nil, fmt.Errorf("%w: want alg:pkid=…;sig=… or a detached JWS", ErrMalformedSig)
	}
	alg, err := ParseAlg(tag)
	if err != nil {
		if len(tag) > 32 {
			tag = tag[:32] + "…"
		}
		return nil, fmt.Errorf("%w %q in sig value", ErrUnsupportedAlg, tag)
	}
	s := &Sig{Alg: alg}
	var sigText string
	var seenPkid, seenSig bool
	for _, p := range strings.Split(params, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: parameter %q has no '='", ErrMalformedSig, short(p))
		}
		k, val = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(val)
		if k != "pkid" && k != "sig" {
			continue
		}
		seen := &seenSig
		if k == "pkid" {
			seen = &seenPkid
		}
		if *seen {
			return nil, fmt.Errorf("%w: duplicate %s=", ErrMalformedSig, k)
		}
		*seen = true
		if k == "pkid" {
			// Compared in NFC, like the signed bytes: a chat UI that
			// decomposes the text leaves the key id the same.
			val = norm.NFC.String(val)
			if err := checkPkid(val); err != nil {
				return nil, withinKind(ErrMalformedSig, err, "pkid")
			}
			s.Pkid = val
		} else {
			sigText = val
		}
	}
	if !seenPkid {
		return nil, fmt.Errorf("%w: missing pkid=", ErrMalformedSig)
	}
	if !seenSig || sigText == "" {
		return nil, fmt.Errorf("%w: missing sig=", ErrMalformedSig)
	}
	if isJWSShape(sigText) {
		jalg, sig, err := parseJWS(sigText)
		if err != nil {
			return nil, err
		}
		if jalg != alg {
			return nil, fmt.Errorf("%w: the JWS is %s but the sig line says %s", ErrProtectedHeader, jalg.JOSE(), alg)
		}
		s.Signature, s.Form = sig, FormJWS
		return s, nil
	}
	sig, err := decodeB64(sigText)
	if err != nil {
		return nil, fmt.Errorf("%w: sig=: %v", ErrMalformedSig, err)
	}
	if len(sig) != 64 {
		return nil, fmt.Errorf("%w: %s signature is %d bytes, want 64", ErrMalformedSig, alg, len(sig))
	}
	s.Signature = sig
	return s, nil
}

// String returns the sig: value in s's form, base64url without padding.
func (s *Sig) String() string {
	jws := b64Protected[s.Alg] + ".." + b64url(s.Signature)
	switch s.Form {
	case FormBareJWS:
		return jws
	case FormJWS:
		return string(s.Alg) + ":pkid=" + s.Pkid + ";sig=" + jws
	}
	return string(s.Alg) + ":pkid=" + s.Pkid + ";sig=" + b64url(s.Signature)
}

// isJWSShape reports whether v looks like a compact JWS rather than an
// alg-tagged value or bare base64: it has a '.' and no ':', ';' or blank.
// parseJWS then checks the exact shape `<base64url>..<base64url>` with an
// empty middle part (docs/design.md §4.2).
func isJWSShape(v string) bool {
	return strings.Contains(v, ".") && !strings.ContainsAny(v, ":; \t")
}

// parseJWS parses a compact detached JWS and checks its protected header.
func parseJWS(v string) (Alg, []byte, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[1] != "" || parts[0] == "" || parts[2] == "" {
		return "", nil, fmt.Errorf("%w: a detached JWS is <protected>..<signature>", ErrMalformedSig)
	}
	hdr, err := decodeB64(parts[0])
	if err != nil {
		return "", nil, fmt.Errorf("%w: JWS protected header: %v", ErrMalformedSig, err)
	}
	var alg Alg
	switch string(hdr) {
	case protectedEdDSA:
		alg = Ed25519
	case protectedES256:
		alg = SECP256R1
	default:
		return "", nil, fmt.Errorf("%w: got %q", ErrProtectedHeader, short(string(hdr)))
	}
	sig, err := decodeB64(parts[2])
	if err != nil {
		return "", nil, fmt.Errorf("%w: JWS signature: %v", ErrMalformedSig, err)
	}
	if len(sig) != 64 {
		return "", nil, fmt.Errorf("%w: %s signature is %d bytes, want 64", ErrMalformedSig, alg.JOSE(), len(sig))
	}
	return alg, sig, nil
}

// short cuts s for an error message.
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
