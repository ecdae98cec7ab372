package envelope

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddressKind classifies an address (spec "Addressing Scheme", docs/design.md §3.3).
type AddressKind int

// The address kinds.
const (
	AddressInvalid  AddressKind = iota
	AddressName                 // a simple name: CLAUDE, peer-1, Brother AI
	AddressURL                  // scheme://…: claude://session/abc, human://…
	AddressEmail                // email:user@host, or a bare user@host
	AddressTel                  // tel:+1-555-0100
	AddressSelector             // a group selector: @all, @peers, *
)

var addressKindNames = [...]string{"invalid", "name", "url", "email", "tel", "selector"}

// String returns the kind's name: name, url, email, tel, selector or invalid.
func (k AddressKind) String() string {
	if int(k) < len(addressKindNames) {
		return addressKindNames[k]
	}
	return fmt.Sprintf("AddressKind(%d)", int(k))
}

// Address is a parsed sender or receiver.
type Address struct {
	Kind AddressKind
	Raw  string // as written
	// Scheme is the URL scheme for AddressURL ("claude"), "email" or "tel"
	// for those kinds, empty otherwise.
	Scheme string
	// Target is what the address points at: the name, the part after the
	// scheme (without "//"), the mailbox, the number or the selector.
	Target string
}

// AddressError is ParseAddress's error: what is wrong with Address.
type AddressError struct {
	Address string
	Reason  string
}

// Error returns "envelope: " and Detail.
func (e *AddressError) Error() string { return "envelope: " + e.Detail() }

// Detail is the message without the package prefix, for a line of its own
// in a warning: `address "x y": surrounding space or a control character`.
func (e *AddressError) Detail() string {
	if e.Address == "" {
		return e.Reason
	}
	return fmt.Sprintf("address %q: %s", e.Address, e.Reason)
}

// ParseAddress classifies s. It returns an error naming what is wrong when
// s is none of the kinds, or when it could not be written in a header
// (invalid UTF-8, control characters, surrounding space, `[[`, `]]` or an
// arrow), so that every address it accepts reads back unchanged.
func ParseAddress(s string) (Address, error) {
	a := Address{Raw: s}
	switch {
	case s == "":
		return a, &AddressError{Reason: "empty address"}
	case !utf8.ValidString(s):
		return a, &AddressError{Address: s, Reason: "not valid UTF-8"}
	case s != strings.TrimSpace(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		// A header is one line, trimmed (docs/format.md §2): an address
		// with a control character or surrounding space cannot be written.
		return a, &AddressError{Address: s, Reason: "surrounding space or a control character"}
	case strings.Contains(s, "[[") || strings.Contains(s, "]]") || containsArrow(s):
		return a, &AddressError{Address: s, Reason: "brackets or an arrow would break the header"}
	case s == "*" || strings.HasPrefix(s, "@") && isNameChars(s[1:], false):
		a.Kind, a.Target = AddressSelector, s
		return a, nil
	case hasPrefixFold(s, "email:"):
		m := s[len("email:"):]
		if i := strings.IndexByte(m, '?'); i >= 0 {
			m = m[:i]
		}
		if !isMailbox(m) {
			return a, &AddressError{Address: s, Reason: "not an email address"}
		}
		a.Kind, a.Scheme, a.Target = AddressEmail, "email", m
		return a, nil
	case hasPrefixFold(s, "tel:"):
		n := s[len("tel:"):]
		if n == "" || strings.Trim(n, "+-0123456789 ().") != "" {
			return a, &AddressError{Address: s, Reason: "not a telephone number"}
		}
		a.Kind, a.Scheme, a.Target = AddressTel, "tel", n
		return a, nil
	}
	if i := strings.Index(s, "://"); i > 0 {
		scheme := s[:i]
		if !isScheme(scheme) || len(s) == i+3 || strings.ContainsAny(s, " \t") {
			return a, &AddressError{Address: s, Reason: "malformed URL"}
		}
		a.Kind, a.Scheme, a.Target = AddressURL, strings.ToLower(scheme), s[i+3:]
		return a, nil
	}
	if strings.Contains(s, "@") {
		if !isMailbox(s) {
			return a, &AddressError{Address: s, Reason: "not an email address"}
		}
		a.Kind, a.Scheme, a.Target = AddressEmail, "email", s
		return a, nil
	}
	if !isNameChars(s, true) {
		return a, &AddressError{Address: s, Reason: "not a name (letters, digits, _ . - and single inner spaces), URL, email:, tel: or selector"}
	}
	a.Kind, a.Target = AddressName, s
	return a, nil
}

// IsBroadcast reports whether a receiver means every actor: ALL, * or @all
// (docs/design.md §5.2).
func IsBroadcast(to string) bool {
	return to == "*" || strings.EqualFold(to, "ALL") || strings.EqualFold(to, "@all")
}

func containsArrow(s string) bool {
	for _, a := range arrows {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// isNameChars reports whether s is letters, digits, '_', '.', '-', and (if
// spaces) single spaces between other characters.
func isNameChars(s string, spaces bool) bool {
	if s == "" {
		return false
	}
	prevSpace := true // forbids a leading space
	for _, r := range s {
		switch {
		case r == ' ':
			if !spaces || prevSpace {
				return false
			}
			prevSpace = true
			continue
		case r == '_' || r == '.' || r == '-':
		case r < 0x80 && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'):
		case r >= 0x80 && isLetterOrDigit(r):
		default:
			return false
		}
		prevSpace = false
	}
	return !prevSpace
}

// isPlainName reports whether b is an ASCII name that ParseAddress
// accepts as AddressName: letters, digits, '_', '.', '-' and single inner
// spaces. It is the Reader's shortcut for the usual CLAUDE or peer-1;
// anything else goes through ParseAddress.
func isPlainName(b []byte) bool {
	if len(b) == 0 || b[0] == ' ' || b[len(b)-1] == ' ' {
		return false
	}
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		case c == ' ' && b[i-1] != ' ':
		default:
			return false
		}
	}
	return true
}

func isMailbox(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return false
	}
	return !strings.ContainsAny(s, " \t<>\",;") && !strings.Contains(s[at+1:], "@")
}
