package reserve

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Root is the canonical scope of the whole repository.
const Root = "."

// MaxScopeLen bounds a scope's length in bytes before canonicalisation.
const MaxScopeLen = 1024

// Sentinel errors of Canonical, wrapped in a *ScopeError.
var (
	// ErrEscapesRoot reports a scope that leaves the repository root:
	// an absolute path, or one whose ".." segments climb above the root.
	ErrEscapesRoot = errors.New("reserve: scope escapes the repository root")
	// ErrBadScope reports an empty, over-long or malformed scope: control
	// characters, or a wildcard other than a final "/*" (§5.2: glob
	// semantics beyond a suffix "*" are out of scope for v1).
	ErrBadScope = errors.New("reserve: malformed scope")
)

// ScopeError is a scope Canonical refused and why; it wraps
// ErrEscapesRoot or ErrBadScope.
type ScopeError struct {
	Scope  string // the scope as given
	Reason string // what is wrong with it
	Err    error  // ErrEscapesRoot or ErrBadScope
}

func (e *ScopeError) Error() string {
	scope := e.Scope
	if len(scope) > 256 { // the message is echoed to the caller and logged
		scope = scope[:256] + "…"
	}
	return fmt.Sprintf("%v: %q: %s", e.Err, scope, e.Reason)
}

func (e *ScopeError) Unwrap() error { return e.Err }

// Canonical returns the canonical form of a path scope relative to the
// repository root, per BeadBoard §5.1: backslashes become "/", "./",
// ".." and repeated slashes are resolved, a trailing slash is removed.
// The whole repository is Root ("."). A prefix wildcard keeps its final
// "/*" ("src/./*" → "src/*"; "*" alone is every path under the root).
// Scopes are relative: an absolute path, a Windows drive or one climbing
// above the root is refused with ErrEscapesRoot. Case is kept (§5.1's
// lowercasing applies to Windows hosts only; the relay compares scopes
// from every host as written).
func Canonical(scope string) (string, error) {
	bad := func(err error, reason string) (string, error) {
		return "", &ScopeError{Scope: scope, Reason: reason, Err: err}
	}
	if scope == "" {
		return bad(ErrBadScope, "empty")
	}
	if len(scope) > MaxScopeLen {
		return bad(ErrBadScope, fmt.Sprintf("longer than %d bytes", MaxScopeLen))
	}
	// A scope is shown to people deciding whether two agents collide, so
	// it may hold nothing they cannot see (controls, bidi controls,
	// invisible characters: "src/\u202egnp.exe" reads as another path),
	// and it is compared in NFC, so "café" typed and pasted is one scope.
	nfc, err := envelope.NormalizeIdentifier(scope)
	if err != nil {
		var ie *envelope.IdentifierError
		if errors.As(err, &ie) {
			return bad(ErrBadScope, fmt.Sprintf("%s (%U) at byte %d", ie.Reason, ie.Rune, ie.Offset))
		}
		return bad(ErrBadScope, err.Error())
	}
	s := strings.ReplaceAll(nfc, `\`, "/")
	if strings.HasPrefix(s, "/") {
		return bad(ErrEscapesRoot, "absolute path; scopes are relative to the repository root")
	}
	if len(s) >= 2 && s[1] == ':' {
		return bad(ErrEscapesRoot, "drive letter; scopes are relative to the repository root")
	}
	wild := false
	if s == "*" || strings.HasSuffix(s, "/*") {
		wild = true
		s = strings.TrimSuffix(strings.TrimSuffix(s, "*"), "/")
		if s == "" {
			s = "."
		}
	}
	if strings.Contains(s, "*") {
		return bad(ErrBadScope, `wildcard other than a final "/*"`)
	}
	c := path.Clean(s)
	if c == ".." || strings.HasPrefix(c, "../") {
		return bad(ErrEscapesRoot, `".." climbs above the root`)
	}
	if wild {
		if c == Root {
			return "*", nil
		}
		return c + "/*", nil
	}
	return c, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Class is how two scopes overlap (BeadBoard §5.2).
type Class string

// The scope classes of §5.2.
const (
	Exact    Class = "exact"    // the same canonical scope
	Partial  Class = "partial"  // one is a parent of (or prefix-wildcard over) the other
	Disjoint Class = "disjoint" // neither
)

// Classify classifies two canonical scopes (Canonical's results). A
// prefix wildcard "d/*" is a directory prefix match (§5.2): it overlaps d
// and everything under d; a plain scope is a parent of every path below it.
func Classify(a, b string) Class {
	if a == b {
		return Exact
	}
	da, db := base(a), base(b)
	if within(da, db) || within(db, da) {
		return Partial
	}
	return Disjoint
}

// base is the directory a canonical scope covers: d for "d/*", Root for
// "*", the scope itself otherwise.
func base(s string) string {
	if s == "*" {
		return Root
	}
	return strings.TrimSuffix(s, "/*")
}

// within reports whether p is parent or equal to q.
func within(p, q string) bool {
	return p == Root || p == q || len(q) > len(p) && q[len(p)] == '/' && strings.HasPrefix(q, p)
}
