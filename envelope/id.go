package envelope

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// crockford is the ULID alphabet (Crockford's base32, no I L O U).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var idGen struct {
	sync.Mutex
	lastMS  uint64
	lastRnd [10]byte
}

// NewID returns a new ULID: 48 bits of Unix milliseconds followed by 80
// random bits, as 26 characters of Crockford base32. IDs made by one
// process are strictly increasing: within one millisecond the random part
// is incremented rather than redrawn, as the ULID spec's monotonic mode does.
func NewID() string {
	return newIDAt(time.Now())
}

func newIDAt(t time.Time) string {
	ms := uint64(t.UnixMilli())
	idGen.Lock()
	var rnd [10]byte
	if ms <= idGen.lastMS {
		// Same (or an earlier, after a clock step) millisecond: keep the
		// last timestamp and increment the random part so ordering holds.
		ms = idGen.lastMS
		rnd = idGen.lastRnd
		for i := len(rnd) - 1; i >= 0; i-- {
			rnd[i]++
			if rnd[i] != 0 {
				break
			}
		}
	} else {
		if _, err := rand.Read(rnd[:]); err != nil {
			panic("envelope: crypto/rand failed: " + err.Error())
		}
		rnd[0] &= 0x7f // leave headroom for increments within one millisecond
	}
	idGen.lastMS, idGen.lastRnd = ms, rnd
	idGen.Unlock()

	var b [16]byte
	var tb [8]byte
	binary.BigEndian.PutUint64(tb[:], ms)
	copy(b[:6], tb[2:])
	copy(b[6:], rnd[:])
	return encodeULID(b)
}

func encodeULID(b [16]byte) string {
	// 128 bits → 26 base32 digits; the first digit carries only 3 bits.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// IDFromHash returns a deterministic ULID-shaped id made from the first 16
// bytes of a digest. It is used for v1.0 envelopes that carry no message id
// (docs/design.md §5.3): the same payload always gets the same id. Its time part is
// not meaningful.
func IDFromHash(sum []byte) string {
	var b [16]byte
	copy(b[:], sum)
	b[0] &= 0x7f // keep the first digit within the ULID range 0-7
	return encodeULID(b)
}

// ulidDigit is 1 for the bytes of Crockford's base32 alphabet, either
// case, and 0 for every other byte.
var ulidDigit = func() (t [256]uint8) {
	for i := 0; i < len(crockford); i++ {
		c := crockford[i]
		t[c] = 1
		if 'A' <= c && c <= 'Z' {
			t[c+'a'-'A'] = 1
		}
	}
	return t
}()

// IsULID reports whether s is a canonical ULID: 26 Crockford base32
// characters whose first digit is at most 7. Lower case is accepted, as the
// ULID spec allows.
func IsULID(s string) bool { return isULID(s) }

// isULID is IsULID for either form. The Reader checks three ids on every
// v1.1 envelope, so the 26 digits are looked up unrolled, their marks
// ANDed, with one branch at the end instead of one per digit.
func isULID[T string | []byte](s T) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	t := &ulidDigit
	a := t[s[0]] & t[s[1]] & t[s[2]] & t[s[3]] & t[s[4]] & t[s[5]] & t[s[6]] & t[s[7]] & t[s[8]]
	b := t[s[9]] & t[s[10]] & t[s[11]] & t[s[12]] & t[s[13]] & t[s[14]] & t[s[15]] & t[s[16]] & t[s[17]]
	c := t[s[18]] & t[s[19]] & t[s[20]] & t[s[21]] & t[s[22]] & t[s[23]] & t[s[24]] & t[s[25]]
	return a&b&c != 0
}

// IsUUIDv7 reports whether s is a UUID in the 8-4-4-4-12 hex form whose
// version nibble is 7 and whose variant bits are RFC 9562's (10xx).
func IsUUIDv7(s string) bool { return isUUIDv7(s) }

func isUUIDv7[T string | []byte](s T) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	if s[14] != '7' {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b', 'A', 'B':
		return true
	}
	return false
}

// IsID reports whether s is an id the protocol accepts for thread, parent
// and message: a ULID or a UUIDv7 (spec "ID Format: ULID or UUIDv7").
func IsID(s string) bool { return isULID(s) || isUUIDv7(s) }

func isIDBytes(b []byte) bool { return isULID(b) || isUUIDv7(b) }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
