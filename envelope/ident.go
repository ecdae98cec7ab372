package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// CodeAddress is crosstalk's error code for an identifier — a sender,
// receiver, context, group or META namespace — holding a character a
// reader cannot see or that reorders the text around it (docs/format.md
// §12). It is not one of the spec's eight codes; readers that do not know
// it treat it as E-FORMAT.
const CodeAddress Code = "E-ADDRESS"

// ErrIdentifier is wrapped by every error about a refused identifier
// character: errors.Is(err, envelope.ErrIdentifier).
var ErrIdentifier = errors.New("envelope: identifier with an invisible or reordering character")

// IdentifierError reports the first refused character of an identifier.
type IdentifierError struct {
	Value  string // the identifier as written
	Rune   rune   // the refused character
	Offset int    // its byte offset in Value
	Reason string // "a bidi control", "an invisible character", …
}

// Error names the character by code point and the identifier with every
// non-printable character escaped, so the message itself is safe to show.
func (e *IdentifierError) Error() string {
	return fmt.Sprintf("%s holds %s (%U) at byte %d", quoteVisible(e.Value), e.Reason, e.Rune, e.Offset)
}

// Unwrap returns ErrIdentifier.
func (e *IdentifierError) Unwrap() error { return ErrIdentifier }

// NormalizeIdentifier returns s in Unicode NFC — the form identifiers are
// stored and compared in — or an *IdentifierError when s holds a character
// a person could not see or that changes how the text around it is shown:
// C0 and C1 controls, bidi controls (U+061C, U+200E–200F, U+202A–202E,
// U+2066–2069), zero-width and other default-ignorable characters,
// line and paragraph separators, and spaces other than U+0020. Printable
// ASCII returns at once, unchanged.
func NormalizeIdentifier(s string) (string, error) {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s, nil
	}
	for off, r := range s[i:] {
		if why := refusedRune(r); why != "" {
			return "", &IdentifierError{Value: s, Rune: r, Offset: i + off, Reason: why}
		}
	}
	if norm.NFC.IsNormalString(s) {
		return s, nil
	}
	return norm.NFC.String(s), nil
}

// nfc returns s in NFC: printable ASCII at once, unchanged. Signatures
// cover the NFC form of the source (docs/signing.md §1), so a value the
// Reader interprets — an id, the intent — is read in that form too:
// otherwise two texts with one signature (a KELVIN SIGN U+212A for a K,
// which NFC maps to K) would be two messages.
func nfc(s string) string {
	if printableASCII(s) || norm.NFC.IsNormalString(s) {
		return s
	}
	return norm.NFC.String(s)
}

// IsBidiControl reports whether r is a bidirectional formatting control
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): a character
// that reorders the text around it as displayed.
func IsBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
}

// BreaksLine reports whether r may not stand in a one-line value that
// people read (a META value, a reservation's reason): a control
// character (a terminal escape, CR, LF, tab), a bidi control, or a
// Unicode line or paragraph separator.
func BreaksLine(r rune) bool {
	return unicode.IsControl(r) || IsBidiControl(r) || r == '\u2028' || r == '\u2029'
}

// refusedRune says why r may not stand in an identifier, or "".
func refusedRune(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "invalid UTF-8 or U+FFFD"
	case unicode.IsControl(r):
		return "a control character"
	case IsBidiControl(r):
		return "a bidi control"
	case unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
		return "an invisible character"
	case unicode.In(r, unicode.Zl, unicode.Zp):
		return "a line or paragraph separator"
	case r != ' ' && unicode.Is(unicode.Zs, r):
		return "a space other than U+0020"
	}
	return ""
}

// NormalizeIdentifiers puts env's identifiers — sender, receiver,
// context and META namespaces — in NFC, in place, and returns a
// *SyntaxError with CodeAddress and the identifier's input line when one
// holds a refused character (NormalizeIdentifier). The body, field values
// and the source text keep their bytes; signatures cover the NFC form of
// the source anyway (docs/signing.md §2). (The Reader also reads the ids
// and the intent in NFC, without refusals: docs/format.md §12.)
func (e *Envelope) NormalizeIdentifiers() error {
	if printableASCII(e.From) && printableASCII(e.To) && printableASCII(e.Context) && e.namespacesASCII() {
		return nil // what NormalizeIdentifier returns unchanged: the usual case, without its calls
	}
	ids := [...]struct {
		what, prefix string
		p            *string
	}{{"sender", "", &e.From}, {"receiver", "", &e.To}, {"context", "context:", &e.Context}}
	for _, id := range ids {
		if err := e.normalize(id.what, id.prefix, id.p); err != nil {
			return err
		}
	}
	for i := range e.Meta {
		if err := e.normalize("META namespace", "meta:", &e.Meta[i].Namespace); err != nil {
			return err
		}
	}
	return nil
}

// namespacesASCII reports whether every META namespace is printable ASCII.
func (e *Envelope) namespacesASCII() bool {
	for i := range e.Meta {
		if !printableASCII(e.Meta[i].Namespace) {
			return false
		}
	}
	return true
}

// printableASCII reports whether s is printable ASCII (0x20–0x7e), the
// identifiers NormalizeIdentifier returns at once, unchanged.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i]-0x20 >= 0x7f-0x20 {
			return false
		}
	}
	return true
}

func (e *Envelope) normalize(what, prefix string, p *string) *SyntaxError {
	v, err := NormalizeIdentifier(*p)
	if err == nil {
		*p = v
		return nil
	}
	line := e.Line
	if prefix != "" {
		line = e.lineOf(prefix, *p)
	}
	return &SyntaxError{Code: CodeAddress, Line: line, Msg: what + " " + err.Error(), Err: err}
}

// lineOf returns the input line of the source line that starts with
// prefix and holds value, or the header's line when none does.
func (e *Envelope) lineOf(prefix, value string) int {
	rest := e.source
	for n := 0; len(rest) > 0; n++ {
		line, tail, _ := bytes.Cut(rest, []byte{'\n'})
		if bytes.HasPrefix(line, []byte(prefix)) && bytes.Contains(line, []byte(value)) {
			return e.Line + n
		}
		rest = tail
	}
	return e.Line
}

// quoteVisible quotes s with every character that is not a printable
// graphic escaped (\u202e, \x00), so that a message about an identifier
// shows what it holds.
func quoteVisible(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80 && r >= 0x20 && r != 0x7f || r >= 0x80 && refusedRune(r) == "" && unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ShowInvisible returns s for display with every character
// NormalizeIdentifier refuses written visibly as ⟨U+202E⟩, so that a name
// recorded before this rule, or quoted in an error, cannot hide or reorder
// text on a page. Printable ASCII returns unchanged.
func ShowInvisible(s string) string {
	return showRunes(s, func(r rune) bool { return refusedRune(r) != "" })
}

// ShowBidi returns free text (a META value, a note) for display with its
// bidi controls written visibly as ⟨U+202E⟩, so that it cannot reorder
// the text after it; unlike ShowInvisible it keeps the other invisible
// characters, which emoji sequences are made of (U+200D, U+FE0F).
func ShowBidi(s string) string { return showRunes(s, IsBidiControl) }

// showRunes returns s with the characters show picks written as ⟨U+XXXX⟩.
// Printable ASCII returns unchanged.
func showRunes(s string, show func(rune) bool) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if show(r) {
			fmt.Fprintf(&b, "⟨%U⟩", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
