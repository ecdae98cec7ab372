package signing

import (
	"crypto/ed25519"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdlibRules makes curve25519-voi accept and refuse exactly what
// crypto/ed25519 does (cofactorless, RFC 8032 §5.1.7 with a canonical S,
// any A and R): docs/signing.md §10.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// maxExpanded bounds the expanded-key cache: each entry is about 1.5 KiB.
const maxExpanded = 1024

// Busy keys get a fixed-base table of −A (docs/signing.md §10): about
// 40 KiB and 160 µs to build, after which a verification costs about two
// thirds of the expanded key's. tableAfter is how many valid signatures a
// key needs before it gets one (a variable so that tests can make every
// key busy); maxTables bounds their memory to about 2.5 MiB. When every
// table is taken, a busy key takes the table of the key whose table has
// gone unused longest, if that is more than tableIdle; if none has, it
// asks again after every tableRetry more valid signatures.
var tableAfter uint32 = 32

const (
	maxTables  = 64
	tableIdle  = time.Minute
	tableRetry = 1024
)

// expandedKey is one cached key: its expanded form, and once it is busy
// its table.
type expandedKey struct {
	x    *voi.ExpandedPublicKey
	uses atomic.Uint32
	tbl  atomic.Pointer[curve.EdwardsBasepointTable]
	// used is when the table last verified a signature (Unix
	// nanoseconds, to the second): the idlest table is the one a busy
	// key takes.
	used atomic.Int64
}

// expandedKeys caches the precomputed form of the Ed25519 public keys
// that signatures verified under, keyed by the 32-byte key. Only a key
// with a valid signature gets in, so garbage keys cannot push the pinned
// ones out; when full, one entry makes room. tables counts the entries
// whose table is built or being built, and changes only under the lock.
var expandedKeys struct {
	sync.RWMutex
	m      map[[ed25519.PublicKeySize]byte]*expandedKey
	tables int
}

// checkEd25519Point refuses an Ed25519 public key that is no point, or a
// point of small order (the identity and the seven other torsion points,
// in any encoding). Verification follows crypto/ed25519 (docs/signing.md
// §10), which accepts signatures under such a key: under a small-order A
// the signature R = [S]B is valid for every message, so it can be made
// without any secret, and a pin of that key would let anyone sign as its
// key id. No key generator makes one; refusing it as a key (announced, in
// DNS, in a key file or the trust store) leaves the verification rules
// as they are.
func checkEd25519Point(k ed25519.PublicKey) error {
	c, err := curve.NewCompressedEdwardsYFromBytes(k)
	if err != nil {
		return fmt.Errorf("%w: ed25519 public key: %v", ErrKeyFile, err)
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(c); err != nil {
		return fmt.Errorf("%w: ed25519 public key is not a curve point", ErrKeyFile)
	}
	if p.IsSmallOrder() {
		return fmt.Errorf("%w: ed25519 public key is a point of small order: any signature under it can be made without a private key", ErrKeyFile)
	}
	return nil
}

// verifyEd25519 reports whether sig is a valid Ed25519 signature of msg by
// key, with crypto/ed25519's rules, reusing key's precomputed form.
func verifyEd25519(key ed25519.PublicKey, msg, sig []byte) bool {
	if len(key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	k := [ed25519.PublicKeySize]byte(key)
	expandedKeys.RLock()
	e := expandedKeys.m[k]
	expandedKeys.RUnlock()
	if e != nil {
		if t := e.tbl.Load(); t != nil {
			// At most one write a second: verifications of one key on
			// several cores then only read the shared word.
			if now := time.Now().UnixNano(); now-e.used.Load() > int64(time.Second) {
				e.used.Store(now)
			}
			return verifyWithTable(t, key, msg, sig)
		}
		if !voi.VerifyExpandedWithOptions(e.x, msg, sig, stdlibRules) {
			return false
		}
		if n := e.uses.Add(1); n == tableAfter || n > tableAfter && (n-tableAfter)%tableRetry == 0 {
			e.buildTable(k)
		}
		return true
	}
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(key))
	if err != nil {
		return false // not a point: crypto/ed25519 refuses it too
	}
	if !voi.VerifyExpandedWithOptions(x, msg, sig, stdlibRules) {
		return false
	}
	e = &expandedKey{x: x}
	e.uses.Store(1)
	expandedKeys.Lock()
	if expandedKeys.m == nil {
		expandedKeys.m = make(map[[ed25519.PublicKeySize]byte]*expandedKey)
	}
	if old := expandedKeys.m[k]; old != nil {
		e = nil // another goroutine cached it meanwhile
	} else {
		if len(expandedKeys.m) >= maxExpanded {
			for old, o := range expandedKeys.m { // one, in the map's own random order
				if o.tbl.Load() != nil {
					expandedKeys.tables--
				}
				delete(expandedKeys.m, old)
				break
			}
		}
		expandedKeys.m[k] = e
	}
	expandedKeys.Unlock()
	if e != nil && tableAfter <= 1 {
		e.buildTable(k)
	}
	return true
}

// buildTable gives e, cached under k, its table if fewer than maxTables
// exist, or if one has gone unused for tableIdle (its key loses it). The
// table is built outside the lock and kept only if e is still cached: an
// entry evicted meanwhile gives its place back.
func (e *expandedKey) buildTable(k [ed25519.PublicKeySize]byte) {
	expandedKeys.Lock()
	ok := expandedKeys.tables < maxTables
	if ok {
		expandedKeys.tables++
	} else if idle := idlestTable(); idle != nil {
		idle.tbl.Store(nil) // its place is e's now: the count stays
		ok = true
	}
	expandedKeys.Unlock()
	if !ok {
		return
	}
	var a curve.EdwardsPoint
	var c curve.CompressedEdwardsY
	_, err := c.SetBytes(k[:])
	if err == nil {
		_, err = a.SetCompressedY(&c)
	}
	var t *curve.EdwardsBasepointTable
	if err == nil { // always, for a key that expanded: it is the same decoding
		t = curve.NewEdwardsBasepointTable(a.Neg(&a))
	}
	expandedKeys.Lock()
	if t != nil && expandedKeys.m[k] == e {
		e.used.Store(time.Now().UnixNano())
		e.tbl.Store(t)
	} else {
		expandedKeys.tables--
	}
	expandedKeys.Unlock()
}

// idlestTable returns the cached key whose table has gone unused longest,
// if more than tableIdle, or nil. The caller holds expandedKeys' lock.
func idlestTable() *expandedKey {
	var idle *expandedKey
	for _, o := range expandedKeys.m {
		if o.tbl.Load() != nil && (idle == nil || o.used.Load() < idle.used.Load()) {
			idle = o
		}
	}
	if idle == nil || time.Since(time.Unix(0, idle.used.Load())) < tableIdle {
		return nil
	}
	return idle
}

// verifyWithTable is crypto/ed25519's verification (RFC 8032 §5.1.7,
// cofactorless) of sig over msg by key, with negA the fixed-base table of
// −A for key's point A: R' = [S]B + [k](−A), k = SHA-512(R ‖ A ‖ msg) mod
// L, accepted iff S < L and R' encodes as sig's R. It computes the same
// point as voi's double-base multiplication, with two table
// multiplications instead of 253 doublings; the tests hold the two to the
// same answer on every edge case.
func verifyWithTable(negA *curve.EdwardsBasepointTable, key ed25519.PublicKey, msg, sig []byte) bool {
	if !scalar.ScMinimalVartime(sig[32:]) {
		return false
	}
	var s, h scalar.Scalar
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	d := sha512.New()
	d.Write(sig[:32])
	d.Write(key)
	d.Write(msg)
	var digest [sha512.Size]byte
	if _, err := h.SetBytesModOrderWide(d.Sum(digest[:0])); err != nil {
		return false
	}
	var sB, hA curve.EdwardsPoint
	sB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &s)
	hA.MulBasepoint(negA, &h)
	var r curve.CompressedEdwardsY
	r.SetEdwardsPoint(sB.Add(&sB, &hA))
	return subtle.ConstantTimeCompare(r[:], sig[:32]) == 1
}
