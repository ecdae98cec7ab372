package signing

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestIsNFC checks the fast NFC check on text that mixes ASCII with
// composed and decomposed characters: it must never call non-NFC text NFC
// (a false "no" only costs a normalization), and it must say yes wherever
// the check of the whole text by norm.NFC.QuickSpan does.
func TestIsNFC(t *testing.T) {
	parts := []string{"a", "e", "E", " ", "\n", "\t", "\u0301", "\u0308", "é", "e\u0301", "Å", "\u212b", "가", "\u1100\u1161", "—", "☃️", "\xff", "\xe2\x82", "ﬁ", "\u0338", "<", "=", "\u0f73"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b []byte
		for n := r.IntN(12); n >= 0; n-- {
			b = append(b, parts[r.IntN(len(parts))]...)
		}
		got := isNFC(b)
		if got && !norm.NFC.IsNormal(b) {
			t.Fatalf("isNFC(%q) = true for text that is not NFC", b)
		}
		if !got && norm.NFC.QuickSpan(b) == len(b) {
			t.Fatalf("isNFC(%q) = false where QuickSpan accepts it", b)
		}
	}
}
