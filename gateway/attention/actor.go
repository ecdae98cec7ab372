package attention

// SameActor reports whether a and b name the same actor: equal but for
// the case of ASCII letters, so an envelope's CLAUDE is the agent claude.
// Every other character compares exactly. The relay's actor ids are
// canonical already (the address book matches its names without regard
// to case and lower-cases a simple name, docs/security.md "Who speaks"),
// and a Unicode case fold would join ids the ledger keeps apart: "ſam"
// (U+017F LATIN SMALL LETTER LONG S) folds to "sam", and "\u212aate"
// (U+212A KELVIN SIGN) to "kate".
func SameActor(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// lowerASCII is c with an ASCII capital made small; every other byte, a
// byte of a multi-byte UTF-8 character among them, unchanged.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// toLowerASCII is s with its ASCII capitals made small, other characters
// kept: the key of a selector name, as SameActor compares.
func toLowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerASCII(b[j])
			}
			return string(b)
		}
	}
	return s
}
