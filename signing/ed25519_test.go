package signing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Points whose encodings verifiers are known to disagree on: the
// small-order points (identity, order 2, 4 and 8, with and without the
// sign bit) and encodings of y that are not reduced mod p = 2^255-19.
var edgePoints = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"0100000000000000000000000000000000000000000000000000000000000080", // identity, sign bit set (x = 0)
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = -1: order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // y = 0: order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // y = 0, sign bit set
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8, sign bit set
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8, sign bit set
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p: not reduced (0)
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+1: not reduced (1, the identity)
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = p+1, sign bit set
	"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = 2^255-1: not reduced
	"0200000000000000000000000000000000000000000000000000000000000000", // y = 2
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = -1, sign bit set (x = 0)
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = p (0), sign bit set: the other point of order 4
	"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = 2^255-1, sign bit set
}

// Scalars S around the group order L, which crypto/ed25519 requires S
// to be below.
var edgeScalars = []string{
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010", // L-1
	"edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010", // L
	"eed3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010", // L+1
	"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff0f", // 2^252+...: above L, below 2^253
	"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameAsStdlib fails t unless verifyEd25519 and crypto/ed25519 agree on
// (pub, msg, sig), and reports what crypto/ed25519 said.
func sameAsStdlib(t testing.TB, pub, msg, sig []byte) bool {
	t.Helper()
	want := len(pub) == ed25519.PublicKeySize && len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, msg, sig)
	if got := verifyEd25519(pub, msg, sig); got != want {
		t.Fatalf("verifyEd25519(pub %x, msg %q, sig %x) = %v, crypto/ed25519 says %v", pub, msg, sig, got, want)
	}
	if len(pub) == ed25519.PublicKeySize && len(sig) == ed25519.SignatureSize {
		if tbl := negTable(pub); tbl != nil {
			if got := verifyWithTable(tbl, pub, msg, sig); got != want {
				t.Fatalf("verifyWithTable(pub %x, msg %q, sig %x) = %v, crypto/ed25519 says %v", pub, msg, sig, got, want)
			}
		} else if want {
			t.Fatalf("pub %x is not a point, and crypto/ed25519 accepted a signature under it", pub)
		}
	}
	return want
}

// negTable is the fixed-base table of −A for pub's point A, decoded as
// buildTable does, or nil when pub is not a point.
func negTable(pub []byte) *curve.EdwardsBasepointTable {
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(pub); err != nil {
		return nil
	}
	var a curve.EdwardsPoint
	if _, err := a.SetCompressedY(&c); err != nil {
		return nil
	}
	return curve.NewEdwardsBasepointTable(a.Neg(&a))
}

// TestVerifyEd25519EdgeCases checks that verification accepts and refuses
// exactly what crypto/ed25519 does for every combination of a small-order
// or unreduced public key A and commitment R with S at and around the
// group order: the cases where Ed25519 verifiers are known to differ.
// Some of them are accepted (S = 0 with a small-order A and R), so the
// comparison is not only of refusals.
func TestVerifyEd25519EdgeCases(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	real := priv.Public().(ed25519.PublicKey)
	points := [][]byte{real}
	for _, p := range edgePoints {
		points = append(points, unhex(t, p))
	}
	accepted := 0
	for _, a := range points {
		for _, r := range points {
			for _, s := range edgeScalars {
				for _, msg := range []string{"", "crosstalk"} {
					sig := append(append([]byte{}, r...), unhex(t, s)...)
					if sameAsStdlib(t, a, []byte(msg), sig) {
						accepted++
					}
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no edge case was accepted: the table no longer reaches the small-order cases")
	}
	t.Logf("%d of %d edge cases accepted by both", accepted, len(points)*len(points)*len(edgeScalars)*2)
}

// TestVerifyEd25519Random compares verification with crypto/ed25519 on
// valid signatures and on every kind of one-bit corruption of the key,
// the message and the signature, and on random keys (about half of all
// 32-byte strings are not points).
func TestVerifyEd25519Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		seed := make([]byte, ed25519.SeedSize)
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, rng.IntN(200))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		if !sameAsStdlib(t, pub, msg, sig) {
			t.Fatal("a valid signature was refused")
		}
		flip := func(b []byte) []byte {
			c := bytes.Clone(b)
			if len(c) > 0 {
				c[rng.IntN(len(c))] ^= 1 << rng.IntN(8)
			}
			return c
		}
		sameAsStdlib(t, flip(pub), msg, sig)
		sameAsStdlib(t, pub, flip(msg), sig)
		sameAsStdlib(t, pub, msg, flip(sig))
		randomPub := make([]byte, ed25519.PublicKeySize)
		for j := range randomPub {
			randomPub[j] = byte(rng.Uint32())
		}
		sameAsStdlib(t, randomPub, msg, sig)
		if i%50 == 0 { // a key seen before: verified from the cache
			sameAsStdlib(t, pub, msg, sig)
		}
	}
}

// TestVerifyEd25519WrongSizes checks that keys and signatures of the wrong
// length are refused, not a panic (crypto/ed25519 panics on a short key).
func TestVerifyEd25519WrongSizes(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, []byte("m"))
	for _, c := range []struct{ pub, sig []byte }{
		{pub[:31], sig}, {append(bytes.Clone(pub), 0), sig}, {nil, sig},
		{pub, sig[:63]}, {pub, append(bytes.Clone(sig), 0)}, {pub, nil},
	} {
		if verifyEd25519(c.pub, []byte("m"), c.sig) {
			t.Errorf("key of %d bytes, signature of %d bytes: accepted", len(c.pub), len(c.sig))
		}
	}
}

// TestExpandedKeysBounded checks that the expanded-key cache stays within
// maxExpanded entries when more distinct keys than that are used (a relay
// that sees many first-use keys), that verification stays right while
// entries make room, from many goroutines at once, and that a key whose
// signature failed is not kept.
func TestExpandedKeysBounded(t *testing.T) {
	msg := []byte("bounded")
	verifyMany(t, seededKeys(maxExpanded+maxExpanded/2, 0), msg, 1)
	expandedKeys.RLock()
	size := len(expandedKeys.m)
	expandedKeys.RUnlock()
	if size > maxExpanded {
		t.Fatalf("cache holds %d keys, bound is %d", size, maxExpanded)
	}
	// A key whose signature does not verify is not kept.
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xee}, ed25519.SeedSize)) // used by no other test
	pub := k.Public().(ed25519.PublicKey)
	verifyEd25519(pub, []byte("other"), ed25519.Sign(k, msg))
	expandedKeys.RLock()
	_, kept := expandedKeys.m[[ed25519.PublicKeySize]byte(pub)]
	expandedKeys.RUnlock()
	if kept {
		t.Error("a key was cached after a signature that failed")
	}
}

// TestTablesBounded makes every key busy at its first signature and
// verifies, from several goroutines, more keys than the expanded-key cache
// holds: at most maxTables tables exist, the count matches the entries
// that hold one (eviction and building race here), each of those tables
// is of its own key's −A, and every verification stays right, through a
// table or not.
func TestTablesBounded(t *testing.T) {
	busyKeyCache(t)
	// The second verification of each key goes through its table, if it
	// got one.
	verifyMany(t, seededKeys(maxExpanded+maxExpanded/4, 0x7b), []byte("tables"), 2)
	if checkTables(t) == 0 {
		t.Fatal("no key got a table")
	}
}

// seededKeys returns n distinct keys, from seeds marked with tag.
func seededKeys(n int, tag byte) []ed25519.PrivateKey {
	keys := make([]ed25519.PrivateKey, n)
	for i := range keys {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), tag
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	return keys
}

// verifyMany verifies, from 4 goroutines, rounds valid signatures of msg
// by each key, and as many of another message, and fails t unless every
// verdict is right.
func verifyMany(t *testing.T, keys []ed25519.PrivateKey, msg []byte, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(keys); i += 4 {
				k := keys[i]
				pub := k.Public().(ed25519.PublicKey)
				for range rounds {
					if !verifyEd25519(pub, msg, ed25519.Sign(k, msg)) {
						t.Errorf("key %d: valid signature refused", i)
					}
					if verifyEd25519(pub, []byte("other"), ed25519.Sign(k, msg)) {
						t.Errorf("key %d: signature accepted for another message", i)
					}
				}
			}
		})
	}
	wg.Wait()
}

// busyKeyCache empties the key cache and makes every key busy at its
// first signature for the rest of t, then empties the cache again: the
// table slots go back to other tests.
func busyKeyCache(t *testing.T) {
	reset := func() {
		expandedKeys.Lock()
		expandedKeys.m, expandedKeys.tables = nil, 0
		expandedKeys.Unlock()
	}
	reset()
	after := tableAfter
	tableAfter = 1
	t.Cleanup(func() {
		tableAfter = after
		reset()
	})
}

// checkTables fails t unless the table count matches the cached entries
// that hold a table, within maxTables, and each table is of its own
// key's −A; it returns the count.
func checkTables(t *testing.T) int {
	t.Helper()
	expandedKeys.RLock()
	defer expandedKeys.RUnlock()
	held := 0
	for k, e := range expandedKeys.m {
		if tbl := e.tbl.Load(); tbl != nil {
			held++
			if tbl.Basepoint().Equal(negTable(k[:]).Basepoint()) != 1 {
				t.Errorf("key %x holds a table of another point", k)
			}
		}
	}
	if held != expandedKeys.tables || held > maxTables {
		t.Fatalf("%d entries hold a table, the count says %d, the bound is %d", held, expandedKeys.tables, maxTables)
	}
	return held
}

// TestBusyKeyUsesTable checks that a key gets its table after tableAfter
// valid signatures, and that signatures under it are then still accepted
// and refused as crypto/ed25519 does.
func TestBusyKeyUsesTable(t *testing.T) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5d}, ed25519.SeedSize)) // used by no other test
	pub := k.Public().(ed25519.PublicKey)
	entry := func() *expandedKey {
		expandedKeys.RLock()
		defer expandedKeys.RUnlock()
		return expandedKeys.m[[ed25519.PublicKeySize]byte(pub)]
	}
	for i := range tableAfter {
		msg := []byte{byte(i)}
		if !sameAsStdlib(t, pub, msg, ed25519.Sign(k, msg)) {
			t.Fatal("valid signature refused")
		}
		sameAsStdlib(t, pub, []byte("other"), ed25519.Sign(k, msg)) // failures do not count
	}
	if e := entry(); e == nil || e.tbl.Load() == nil {
		t.Fatalf("no table after %d valid signatures", tableAfter)
	}
	for i := range 50 {
		msg := []byte{byte(i), 1}
		sig := ed25519.Sign(k, msg)
		sameAsStdlib(t, pub, msg, sig)
		sig[i%64] ^= 1 << (i % 8)
		sameAsStdlib(t, pub, msg, sig)
	}
}

// FuzzVerifyEd25519 checks that verification accepts and refuses exactly
// what crypto/ed25519 does, whatever the key, message and signature.
// Seeded with a valid signature and the edge cases' points and scalars.
func FuzzVerifyEd25519(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	f.Add([]byte(pub), []byte("crosstalk"), ed25519.Sign(priv, []byte("crosstalk")))
	for i, p := range edgePoints {
		a := unhex(f, p)
		r := unhex(f, edgePoints[(i+1)%len(edgePoints)])
		f.Add(a, []byte(""), append(r, unhex(f, edgeScalars[i%len(edgeScalars)])...))
		f.Add(a, []byte("crosstalk"), append(bytes.Clone(a), make([]byte, 32)...))
	}
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		sameAsStdlib(t, pub, msg, sig)
	})
}

// BenchmarkEd25519 verifies a signature of a 1 KiB message with
// verifyEd25519 and with crypto/ed25519, interleaved in one loop so that
// load from other processes weighs on both alike, and reports the ratio
// (docs/signing.md §10).
func BenchmarkEd25519(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	msg := bytes.Repeat([]byte("crosstalk "), 103)
	sig := ed25519.Sign(priv, msg)
	interleaved(b, "ours", func() {
		if !verifyEd25519(pub, msg, sig) {
			b.Fatal("refused")
		}
	}, "stdlib", func() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("refused")
		}
	})
}

// BenchmarkEd25519Table verifies a signature of a 1 KiB message through a
// busy key's table and through its expanded form alone (the path every
// key takes before it is busy), interleaved in one loop, and reports the
// ratio (docs/signing.md §10).
func BenchmarkEd25519Table(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	msg := bytes.Repeat([]byte("crosstalk "), 103)
	sig := ed25519.Sign(priv, msg)
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		b.Fatal(err)
	}
	tbl := negTable(pub)
	interleaved(b, "table", func() {
		if !verifyWithTable(tbl, pub, msg, sig) {
			b.Fatal("refused")
		}
	}, "expanded", func() {
		if !voi.VerifyExpandedWithOptions(x, msg, sig, stdlibRules) {
			b.Fatal("refused")
		}
	})
}

// TestVerifyEd25519MixedOrderKeys checks the keys that the small-order
// cases leave out: A' = A + T for a key A with a known secret and each of
// the eight torsion points T (orders 1, 2, 4 and 8), with R = [r]B + T_R
// for each torsion point T_R and S = r + k·a. Such a signature holds under
// the cofactored equation always, and under crypto/ed25519's cofactorless
// one only when T_R = −[k]T, so about one in ord(T) is accepted: the test
// checks both verdicts against that, through the expanded path, the table
// path, and the cache (every key gets enough valid signatures to become
// busy and verify through the table buildTable built).
func TestVerifyEd25519MixedOrderKeys(t *testing.T) {
	expandedKeys.Lock()
	expandedKeys.m, expandedKeys.tables = nil, 0 // a table slot for each key
	expandedKeys.Unlock()
	var c curve.CompressedEdwardsY
	copy(c[:], unhex(t, edgePoints[5])) // order 8
	var t8 curve.EdwardsPoint
	if _, err := t8.SetCompressedY(&c); err != nil {
		t.Fatal(err)
	}
	torsion := make([]curve.EdwardsPoint, 8) // torsion[i] = [i]T8
	torsion[0].Identity()
	for i := 1; i < 8; i++ {
		torsion[i].Add(&torsion[i-1], &t8)
	}
	if !torsion[7].Add(&torsion[7], &t8).IsIdentity() || torsion[4].IsIdentity() {
		t.Fatal("T8 is not of order 8")
	}
	torsion[7].Sub(&torsion[0], &t8)

	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	seed := random(ed25519.SeedSize)
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	var a scalar.Scalar
	if _, err := a.SetBytesModOrder(h[:32]); err != nil {
		t.Fatal(err)
	}
	var bigA curve.EdwardsPoint
	bigA.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &a)
	if pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey); !bytes.Equal(pub, curve.NewCompressedEdwardsY().SetEdwardsPoint(&bigA)[:]) {
		t.Fatal("the secret scalar does not give the key's point")
	}

	accepted, refused := 0, 0
	for i := range torsion {
		var aMixed curve.EdwardsPoint
		aMixed.Add(&bigA, &torsion[i])
		pub := bytes.Clone(curve.NewCompressedEdwardsY().SetEdwardsPoint(&aMixed)[:])
		valid := 0
		for range 64 {
			var r scalar.Scalar
			if _, err := r.SetBytesModOrderWide(random(64)); err != nil {
				t.Fatal(err)
			}
			msg := random(rng.IntN(64))
			for j := range torsion {
				var bigR curve.EdwardsPoint
				bigR.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r)
				bigR.Add(&bigR, &torsion[j])
				rb := curve.NewCompressedEdwardsY().SetEdwardsPoint(&bigR)[:]
				d := sha512.New()
				d.Write(rb)
				d.Write(pub)
				d.Write(msg)
				var k, s scalar.Scalar
				if _, err := k.SetBytesModOrderWide(d.Sum(nil)); err != nil {
					t.Fatal(err)
				}
				s.Mul(&k, &a)
				s.Add(&s, &r)
				sig := make([]byte, ed25519.SignatureSize)
				copy(sig, rb)
				if err := s.ToBytes(sig[32:]); err != nil {
					t.Fatal(err)
				}
				// Cofactorless: [S]B − [k]A' = R iff T_R + [k]T = 0.
				var kT curve.EdwardsPoint
				kT.Mul(&torsion[i], &k)
				want := kT.Add(&kT, &torsion[j]).IsIdentity()
				if got := sameAsStdlib(t, pub, msg, sig); got != want {
					t.Fatalf("T%d, T_R%d: crypto/ed25519 says %v, the equation %v", i, j, got, want)
				}
				if want {
					accepted++
					valid++
				} else {
					refused++
				}
				sig[rng.IntN(len(sig))] ^= 1 << rng.IntN(8)
				sameAsStdlib(t, pub, msg, sig)
			}
		}
		expandedKeys.RLock()
		e := expandedKeys.m[[ed25519.PublicKeySize]byte(pub)]
		expandedKeys.RUnlock()
		if valid > int(tableAfter) && (e == nil || e.tbl.Load() == nil) {
			t.Fatalf("T%d: %d valid signatures and no table", i, valid)
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d accepted, %d refused: both kinds are needed", accepted, refused)
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
}

// TestIdleTableTaken fills every table slot, then checks that a busy key
// takes the table of a key idle for longer than tableIdle (and only
// then), that one that finds none idle asks again after tableRetry more
// signatures, and that the count of tables stays right throughout.
func TestIdleTableTaken(t *testing.T) {
	busyKeyCache(t)
	msg := []byte("idle")
	newKey := func(i int) (ed25519.PublicKey, []byte, ed25519.PrivateKey) {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), 0x1d
		k := ed25519.NewKeyFromSeed(seed)
		return k.Public().(ed25519.PublicKey), ed25519.Sign(k, msg), k
	}
	entry := func(pub ed25519.PublicKey) *expandedKey {
		expandedKeys.RLock()
		defer expandedKeys.RUnlock()
		return expandedKeys.m[[ed25519.PublicKeySize]byte(pub)]
	}
	var first []ed25519.PublicKey
	for i := range maxTables {
		pub, sig, _ := newKey(i)
		if !verifyEd25519(pub, msg, sig) || entry(pub).tbl.Load() == nil {
			t.Fatalf("key %d: no table with slots free", i)
		}
		first = append(first, pub)
	}
	checkTables(t)

	// None idle: a new busy key gets none.
	pub, sig, priv := newKey(maxTables)
	if !verifyEd25519(pub, msg, sig) {
		t.Fatal("valid signature refused")
	}
	if entry(pub).tbl.Load() != nil {
		t.Fatal("a table was taken from a key that used it just now")
	}
	checkTables(t)

	// One goes idle: the new key takes it when it asks again, after
	// tableRetry more valid signatures, and verifies through it.
	idle := entry(first[7])
	idle.used.Store(time.Now().Add(-2 * tableIdle).UnixNano())
	for i := range tableRetry {
		m := []byte{byte(i), byte(i >> 8)}
		if !verifyEd25519(pub, m, ed25519.Sign(priv, m)) {
			t.Fatal("valid signature refused")
		}
	}
	if entry(pub).tbl.Load() == nil {
		t.Fatalf("no table after %d more signatures with an idle one to take", tableRetry)
	}
	if idle.tbl.Load() != nil {
		t.Fatal("the idle key kept its table")
	}
	checkTables(t)
	// Both still verify right, through a table or not.
	sameAsStdlib(t, pub, msg, sig)
	_, sig7, _ := newKey(7)
	sameAsStdlib(t, first[7], msg, sig7)
	sameAsStdlib(t, first[7], []byte("other"), sig7)
}

// TestSmallOrderKeysRefused: under a small-order public key A the
// signature (R, S) = ([S]B, S) — S = 0 and R the identity, say — is valid
// for every message under crypto/ed25519's rules, which verification
// keeps (docs/signing.md §10). So such a key must never be a key: else
// anyone announces it for a fresh key id, gets it pinned on first use,
// and from then on anyone at all can sign as that key id. Every
// small-order encoding (and every encoding that is no point) is refused
// where keys come in: an announcement, DNS, a key file, the trust store.
// (y = 2^255-1 is y = 18 unreduced, a point of large order: a signature
// under it still needs its secret, so it stays a key, as crypto/ed25519
// has it.)
func TestSmallOrderKeysRefused(t *testing.T) {
	for _, h := range edgePoints {
		if strings.HasPrefix(h, "ffffffff") {
			if _, err := NewPublicKey("big@example.com", ed25519.PublicKey(unhex(t, h))); err != nil {
				t.Errorf("NewPublicKey(%s) = %v; want the key (large order)", h, err)
			}
			continue
		}
		raw := unhex(t, h)
		b64 := base64.RawURLEncoding.EncodeToString(raw)
		if k, err := ParsePublicKeyValue("weak@example.com", "ed25519:"+b64); !errors.Is(err, ErrKeyFile) {
			t.Errorf("ParsePublicKeyValue(%s) = %v, %v; want ErrKeyFile", h, k, err)
		}
		if k, err := ParsePublicKey([]byte("ed25519 weak@example.com "+b64+"\n"), ""); !errors.Is(err, ErrKeyFile) {
			t.Errorf("ParsePublicKey(%s) = %v, %v; want ErrKeyFile", h, k, err)
		}
		if k, err := NewPublicKey("weak@example.com", ed25519.PublicKey(raw)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("NewPublicKey(%s) = %v, %v; want ErrKeyFile", h, k, err)
		}
		line := "weak@example.com ed25519 " + b64 + " tofu 2025-10-09T17:00:00Z active\n"
		if _, err := NewMemoryTrustStore([]byte(line)); !errors.Is(err, ErrTrustStore) {
			t.Errorf("trust store with %s: %v, want ErrTrustStore", h, err)
		}
	}
	// The attack: the identity announced, and one signature for every body.
	store := newStore(t)
	v := &Verifier{Store: store}
	sig := make([]byte, 64)
	sig[0] = 1 // R = the identity, S = 0
	for _, body := range []string{"  Pin me.\n", "  Anything at all, by anyone.\n"} {
		text := strings.Replace(plainEnv, "  Hello Bob.\n", body, 1)
		text = strings.Replace(text, "\nbody:", "meta: signing\nPublic-Key: ed25519:AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n\nbody:", 1)
		text += "sig: ed25519:pkid=weak@example.com;sig=" + base64.RawURLEncoding.EncodeToString(sig) + "\n[[END]]\n"
		if r := v.Verify(context.Background(), readEnv(t, text)); r.Status.OK() || !errors.Is(r.Err, ErrKeyFile) {
			t.Errorf("%q: Verify = %s (%v), want refused for the announced key", body, r.Status, r.Err)
		}
	}
	if es, err := store.Entries(); err != nil || len(es) != 0 {
		t.Errorf("store = %v, %v; want nothing pinned", es, err)
	}
}
