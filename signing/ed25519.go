package signing

import (
	"crypto/ed25519"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdlibRules makes curve25519-voi accept and refuse exactly what
// crypto/ed25519 does (cofactorless, RFC 8032 §5.1.7 with a canonical S,
// any A and R): docs/signing.md §10.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// maxExpanded bounds the expanded-key cache: each entry is about 1.5 KiB.
const maxExpanded = 1024

// expandedKeys caches the precomputed form of the Ed25519 public keys
// that signatures verified under, keyed by the 32-byte key. Only a key
// with a valid signature gets in, so garbage keys cannot push the pinned
// ones out; when full, one entry makes room.
var expandedKeys struct {
	sync.RWMutex
	m map[[ed25519.PublicKeySize]byte]*voi.ExpandedPublicKey
}

// verifyEd25519 reports whether sig is a valid Ed25519 signature of msg by
// key, with crypto/ed25519's rules, reusing key's precomputed form.
func verifyEd25519(key ed25519.PublicKey, msg, sig []byte) bool {
	if len(key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	k := [ed25519.PublicKeySize]byte(key)
	expandedKeys.RLock()
	x := expandedKeys.m[k]
	expandedKeys.RUnlock()
	if x != nil {
		return voi.VerifyExpandedWithOptions(x, msg, sig, stdlibRules)
	}
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(key))
	if err != nil {
		return false // not a point: crypto/ed25519 refuses it too
	}
	if !voi.VerifyExpandedWithOptions(x, msg, sig, stdlibRules) {
		return false
	}
	expandedKeys.Lock()
	if expandedKeys.m == nil {
		expandedKeys.m = make(map[[ed25519.PublicKeySize]byte]*voi.ExpandedPublicKey)
	}
	if len(expandedKeys.m) >= maxExpanded {
		for old := range expandedKeys.m { // one, in the map's own random order
			delete(expandedKeys.m, old)
			break
		}
	}
	expandedKeys.m[k] = x
	expandedKeys.Unlock()
	return true
}
