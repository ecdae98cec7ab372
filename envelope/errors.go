package envelope

import (
	"errors"
	"fmt"
)

// Code is an error code of the protocol's error taxonomy (spec "Error
// Taxonomy"). It appears in `meta: error` `Code:` and in SyntaxError.
type Code string

// The eight error codes of the spec.
const (
	CodeRoute       Code = "E-ROUTE"       // routing failed, destination unreachable
	CodeConsent     Code = "E-CONSENT"     // consent denied or expired
	CodeFormat      Code = "E-FORMAT"      // malformed envelope
	CodeTooLarge    Code = "E-TOO-LARGE"   // message exceeds size limits
	CodePerm        Code = "E-PERM"        // permission denied
	CodeUnsupported Code = "E-UNSUPPORTED" // feature not supported
	CodeTimeout     Code = "E-TIMEOUT"     // response timeout
	CodeRate        Code = "E-RATE"        // rate limit exceeded
)

// Codes lists every error code in the spec's order.
var Codes = []Code{CodeRoute, CodeConsent, CodeFormat, CodeTooLarge, CodePerm, CodeUnsupported, CodeTimeout, CodeRate}

// Valid reports whether c is one of the eight codes, or crosstalk's own
// CodeAddress.
func (c Code) Valid() bool {
	if c == CodeAddress {
		return true
	}
	for _, k := range Codes {
		if c == k {
			return true
		}
	}
	return false
}

// SyntaxError describes a malformed envelope. Line and Column are 1-based
// positions in the input (Column 0 when the error concerns the whole line).
// It prints as "envelope: line 7: body block not terminated".
type SyntaxError struct {
	Code   Code
	Line   int
	Column int
	Msg    string
	Err    error // underlying cause, if any
}

var _ error = (*SyntaxError)(nil)

// Error returns "envelope: line N: message".
func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("envelope: line %d: %s", e.Line, e.Msg)
	}
	return "envelope: " + e.Msg
}

// Unwrap returns the underlying cause.
func (e *SyntaxError) Unwrap() error { return e.Err }

// ErrTooLarge is wrapped by every SyntaxError with code E-TOO-LARGE, so
// callers can test errors.Is(err, envelope.ErrTooLarge).
var ErrTooLarge = errors.New("envelope: size limit exceeded")

func syntaxErr(code Code, line, col int, format string, args ...any) *SyntaxError {
	e := &SyntaxError{Code: code, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
	if code == CodeTooLarge {
		e.Err = ErrTooLarge
	}
	return e
}
