package envelope

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf8"
)

func isLetterOrDigit(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func quote(s string) string { return strconv.Quote(s) }

// validUTF8 is utf8.Valid for what the Reader checks, every envelope's
// source and header: ASCII with a few other characters (an arrow, a
// name). It tests 64 bytes for ASCII per step, indexing one fixed-size
// window so that the loads need no bounds checks (utf8.Valid takes 32 per
// step and, after each character that is not ASCII, walks byte by byte
// until 8 bytes are ASCII again); in a window that is not all ASCII it
// finds the first such byte and decodes the character there. A byte
// sequence that utf8.DecodeRune answers with (RuneError, 1) is exactly
// one utf8.Valid refuses.
func validUTF8(p []byte) bool {
	const hi = 0x8080808080808080
	le := binary.LittleEndian
	i := 0
	for i+8 <= len(p) {
		if i+64 <= len(p) {
			q := p[i : i+64 : i+64]
			if (le.Uint64(q)|le.Uint64(q[8:])|le.Uint64(q[16:])|le.Uint64(q[24:])|
				le.Uint64(q[32:])|le.Uint64(q[40:])|le.Uint64(q[48:])|le.Uint64(q[56:]))&hi == 0 {
				i += 64
				continue
			}
			for le.Uint64(q)&hi == 0 { // some word of q has a high bit
				q, i = q[8:], i+8
			}
		}
		w := le.Uint64(p[i:i+8:i+8]) & hi
		if w == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(w) / 8 // the first byte that is not ASCII
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		i += n
	}
	for ; i < len(p); i++ {
		if p[i] >= utf8.RuneSelf {
			return utf8.Valid(p[i:])
		}
	}
	return true
}
