package envelope

import (
	"strings"
	"testing"
)

// The Reader's fast paths (session 12) must answer exactly what the plain
// code they replaced answered. Each ref* below is that plain code, kept
// as the specification the fast path is checked against.

// refIsULID is isULID as a loop over the alphabet.
func refIsULID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(crockford, rune(s[i])) && !strings.ContainsRune(strings.ToLower(crockford), rune(s[i])) {
			return false
		}
	}
	return true
}

// TestIsULIDEveryByte changes each digit of a ULID to each byte value,
// and tries every length around 26.
func TestIsULIDEveryByte(t *testing.T) {
	const id = "01J9J3DCZ5P8Q2R4S6T8V0W1X3"
	for i := 0; i < len(id); i++ {
		for c := 0; c < 256; c++ {
			s := id[:i] + string([]byte{byte(c)}) + id[i+1:]
			if got, want := isULID(s), refIsULID(s); got != want {
				t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
			}
			if got, want := isULID([]byte(s)), refIsULID(s); got != want {
				t.Fatalf("isULID([]byte(%q)) = %v, want %v", s, got, want)
			}
		}
	}
	for n := 0; n < 40; n++ {
		s := strings.Repeat("0", n)
		if got, want := isULID(s), refIsULID(s); got != want {
			t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzIsULID compares isULID with refIsULID.
func FuzzIsULID(f *testing.F) {
	f.Add("01J9J3DCZ5P8Q2R4S6T8V0W1X3")
	f.Add("01j9j3dcz5p8q2r4s6t8v0w1x3")
	f.Add("81J9J3DCZ5P8Q2R4S6T8V0W1X3")
	f.Add("01J9J3DCZ5P8Q2R4S6T8V0W1XU")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isULID(s), refIsULID(s); got != want {
			t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
		}
		if got, want := isULID([]byte(s)), refIsULID(s); got != want {
			t.Fatalf("isULID([]byte(%q)) = %v, want %v", s, got, want)
		}
	})
}

