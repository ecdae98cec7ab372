package signing

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Functions wrap them with %w and add what the caller
// lacks (the key id, the file, the line); test with errors.Is.
var (
	// ErrMalformedSig: the sig: value does not follow the grammar of
	// docs/design.md §4.2 (docs/signing.md §3).
	ErrMalformedSig = errors.New("signing: malformed sig value")
	// ErrUnsupportedAlg: an algorithm other than ed25519 and secp256r1.
	ErrUnsupportedAlg = errors.New("signing: unsupported algorithm")
	// ErrProtectedHeader: a JWS whose protected header is not byte-equal
	// to the fixed header for its algorithm (docs/design.md §4.2).
	ErrProtectedHeader = errors.New("signing: protected header is not the crosstalk header")
	// ErrBadSignature: the signature does not verify under the key tried.
	ErrBadSignature = errors.New("signing: signature does not verify")
	// ErrUnknownKey: no key is known for the key id (not pinned, not
	// announced, not in DNS).
	ErrUnknownKey = errors.New("signing: unknown key")
	// ErrKeyChanged: the signature verifies under a key other than the
	// one pinned for its key id.
	ErrKeyChanged = errors.New("signing: key changed")
	// ErrTooManyPins: a first use would pin more than MaxFirstUsePins
	// keys for one sender.
	ErrTooManyPins = errors.New("signing: too many keys pinned on first use for one sender")
	// ErrRevoked: the key was revoked.
	ErrRevoked = errors.New("signing: key revoked")
	// ErrNotSigned: the envelope has no signature (no sig: line or
	// `sig: none`).
	ErrNotSigned = errors.New("signing: envelope is not signed")
	// ErrNoSource: the envelope was not read from text, so there are no
	// source bytes to verify (docs/design.md §4.1).
	ErrNoSource = errors.New("signing: envelope has no source text")
	// ErrUnsignedLines: lines other than sig:, blank lines and [[END]]
	// follow the signed part, so they would not be covered.
	ErrUnsignedLines = errors.New("signing: envelope has lines after the signed part")
	// ErrKeyID: a key id is empty, longer than 256 bytes, or holds a
	// blank, a control character or ';' (docs/signing.md §4) — whether it
	// came from a key file, a key line or the caller.
	ErrKeyID = errors.New("signing: invalid key id")
	// ErrKeyFile: a key file or key line could not be parsed.
	ErrKeyFile = errors.New("signing: bad key")
	// ErrNoKeyID: a PEM key file names no key id and the caller gave
	// none. It wraps ErrKeyFile.
	ErrNoKeyID = fmt.Errorf("%w: a PEM key has no key id", ErrKeyFile)
	// ErrInsecureKeyFile: a private key file is readable by group or world.
	ErrInsecureKeyFile = errors.New("signing: private key file is readable by others")
	// ErrNoDNSKey: DNS has no crosstalk key record for the key id.
	ErrNoDNSKey = errors.New("signing: no key in DNS")
	// ErrDNSLookup: DNS could not answer (timeout, SERVFAIL, no server),
	// which says nothing about whether a key is published.
	ErrDNSLookup = errors.New("signing: DNS lookup failed")
	// ErrTrustStore: the trust store file could not be read (a
	// directory, no permission) or parsed; the error names the file.
	ErrTrustStore = errors.New("signing: bad trust store")
)

// contextError adds where an error happened (a file, a line, a key id) in
// front of it, and optionally the kind of error (a sentinel), keeping one
// "signing:" prefix: "signing: bad trust store: line 3: bad key: …". It
// unwraps to the kind and the error it adds to.
type contextError struct {
	kind  error // nil or a sentinel of this package
	where string
	err   error
}

func (e *contextError) Error() string {
	s := prefix
	if e.kind != nil {
		s += bare(e.kind) + ": "
	}
	return s + e.where + ": " + bare(e.err)
}

func (e *contextError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// prefix begins the message of every error of this package.
const prefix = "signing: "

// bare is the message of err, an error of this package, without prefix,
// so that errors composed of others carry it once. It is the only place
// that looks at an error's text, and only to format it.
func bare(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// within returns err with the place it happened in front of it.
func within(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &contextError{where: fmt.Sprintf(format, args...), err: err}
}

// withinKind is within with the kind of error (a sentinel) in front.
func withinKind(kind, err error, format string, args ...any) error {
	return &contextError{kind: kind, where: fmt.Sprintf(format, args...), err: err}
}
