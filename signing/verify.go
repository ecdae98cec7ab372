package signing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"golang.org/x/text/unicode/norm"
)

// Status is the outcome of verifying an envelope (docs/design.md §4.3). What the
// user sees for each is in docs/signing.md §5.
type Status string

// The verification statuses.
const (
	// StatusUnsigned: no sig: line, or `sig: none`.
	StatusUnsigned Status = "unsigned"
	// StatusVerified: the signature verifies under the key pinned (or
	// published in DNS, or given explicitly) for its key id.
	StatusVerified Status = "verified"
	// StatusFirstUse: the signature verifies under the key the envelope
	// announces, and no key was known for its key id: the key is pinned
	// now (trust on first use).
	StatusFirstUse Status = "first-use"
	// StatusKeyChanged: the signature verifies under the announced key,
	// but another key is pinned (or in DNS) for the key id. Rejected
	// until the user re-pins.
	StatusKeyChanged Status = "key-changed"
	// StatusBadSignature: the sig: value is malformed, or the signature
	// does not verify under the key it must verify under. The envelope
	// may have been altered.
	StatusBadSignature Status = "bad-signature"
	// StatusUnknownKey: the signature could not be checked: no key is
	// known for the key id and none is announced (or first use is
	// disabled).
	StatusUnknownKey Status = "unknown-key"
	// StatusRevoked: the signature verifies under a key that was revoked.
	StatusRevoked Status = "revoked"
)

// OK reports whether s is verified or first-use: the envelope may be
// trusted as coming from the key's owner.
func (s Status) OK() bool { return s == StatusVerified || s == StatusFirstUse }

// Result is the outcome of verifying one envelope. Trust decisions are
// made on Status, never on the text of Err.
type Result struct {
	Status Status
	// Pkid is the key id: from the sig: line, or for a bare JWS from
	// `meta: signing` `Pkid:`, the pinned key that verified, or the
	// sender address.
	Pkid string
	// Alg is the signature's algorithm ("" when the sig: value could not
	// be parsed).
	Alg Alg
	// Key is the key the signature verified under, if any (for
	// key-changed: the new, announced key; for unknown-key with first use
	// disabled: the announced key it verified under).
	Key *PublicKey
	// Pinned is the key that was pinned (or in DNS) for Pkid when it is
	// not Key: for key-changed and for bad-signature.
	Pinned *PublicKey
	// Source is where Key came from: the trust store entry's source,
	// dns, or explicit; tofu for first-use.
	Source KeySource
	// Revocation reports that this envelope is a REVOKE signed by the key
	// it names, and that key is now marked revoked in the trust store.
	Revocation bool
	// Err says why the status is not verified or first-use (and wraps
	// ErrBadSignature, ErrMalformedSig, ErrUnknownKey, ErrKeyChanged,
	// ErrRevoked, …); nil otherwise.
	Err error
}

// Verifier verifies envelope signatures under a trust policy: explicit
// keys, a trust store with first-use pinning, DNS keys, revocations
// (docs/design.md §4.3, docs/signing.md §5). The zero value verifies nothing but
// reports unsigned envelopes and unknown keys; a Verifier is safe for
// concurrent use if its Store is.
type Verifier struct {
	// Keys, when not empty, are the only keys tried (verify --key): a
	// signature that verifies under none of them is bad-signature. Nothing
	// is pinned. Store, if set, is still consulted for revocations.
	Keys []*PublicKey
	// Store is the trust store; nil means no pinning (an announced key
	// can then not be trusted: unknown-key).
	Store *TrustStore
	// DNS, when set, looks up the keys published in DNS (docs/signing.md
	// §6) for key ids that name a domain and have no pin, and tells a
	// replaced key (key-changed) from a forged signature for pinned ones.
	DNS *DNSKeys
	// NoTOFU disables trust on first use: an announced key for an
	// unpinned key id gives unknown-key, and nothing new is pinned.
	NoTOFU bool
	// NoRevoke leaves REVOKE envelopes to the caller: Verify then never
	// changes the trust store for one (the relay applies a revocation
	// only after deciding who speaks; docs/security.md).
	NoRevoke bool
	// Logger receives pins and revocations at Info level and lookup
	// failures at Warn. It never sees key material beyond fingerprints.
	// Nil means no logging.
	Logger *slog.Logger
}

// Verify checks env's signature with the given keys only (no trust store,
// no DNS): verified, unsigned or bad-signature — or unknown-key when keys
// is empty.
func Verify(env *envelope.Envelope, keys ...*PublicKey) Result {
	v := &Verifier{Keys: keys, NoTOFU: true}
	return v.Verify(context.Background(), env)
}

// Verify checks env's signature and decides whether to trust it. It
// verifies the signed bytes of env.Source() (Payload), never a
// re-serialization. A verified REVOKE envelope signed by the key it names
// in `meta: revoke` `Pkid:` marks that key revoked in the Store.
//
// The stages, in order (docs/signing.md §5): explicit keys; the pinned
// key; the key published in DNS; the key the envelope announces (first
// use). The first stage that has a key for the key id decides.
func (v *Verifier) Verify(ctx context.Context, env *envelope.Envelope) Result {
	if env == nil || !env.Signed() {
		return Result{Status: StatusUnsigned, Err: ErrNotSigned}
	}
	var c check // on the stack: Verify is on the relay's hot path
	res, ok := c.prepare(env)
	if !ok {
		return res
	}
	defer c.release()
	if len(v.Keys) > 0 {
		return v.verifyExplicit(env, &c, res)
	}
	pinned, err := v.pinned(env, &c, res.Pkid)
	if err != nil {
		return res.fail(StatusUnknownKey, err)
	}
	if len(pinned) > 0 {
		if r, decided := v.verifyPinned(ctx, env, &c, res, pinned); decided {
			return r
		}
	}
	if res.Pkid == "" {
		// A bare JWS without Pkid is known by its sender's address.
		if checkPkid(env.From) != nil {
			return res.fail(StatusUnknownKey, fmt.Errorf("%w: a bare JWS names no key id and the sender %q cannot be one (add `meta: signing` `Pkid:`)", ErrUnknownKey, env.From))
		}
		res.Pkid = env.From
	}
	if c.announced != nil {
		c.announced.Pkid = res.Pkid
	}
	if r, decided := v.verifyDNS(ctx, env, &c, res); decided {
		return r
	}
	return v.verifyAnnounced(env, &c, res)
}

// check is what every stage needs: the parsed sig: value, the signing
// input and the key the envelope announces.
type check struct {
	sig       *Sig
	buf       *[]byte
	input     []byte
	announced *PublicKey
	annErr    error
	// store is the trust store as pinned read it (nil without one): its
	// revocations count for every key id (storeFile.revokedKey).
	store *storeFile
}

// prepare parses env's signature and builds the signing input. Without
// ok the result is decided (bad-signature), and c holds no buffer.
func (c *check) prepare(env *envelope.Envelope) (res Result, ok bool) {
	sig, err := ParseSig(env.Sig)
	if err != nil {
		return Result{Status: StatusBadSignature, Err: err}, false
	}
	res = Result{Pkid: sig.Pkid, Alg: sig.Alg}
	if env.Source() == nil {
		return res.fail(StatusBadSignature, ErrNoSource), false
	}
	payload, _, err := payloadOf(env.Source())
	if err != nil {
		return res.fail(StatusBadSignature, err), false
	}
	c.sig, c.buf = sig, inputPool.Get().(*[]byte)
	c.input = appendSigningInput(*c.buf, sig.Alg, payload)
	if res.Pkid == "" { // bare JWS
		if p, ok := env.MetaValue("signing", "Pkid"); ok && checkPkid(norm.NFC.String(p)) == nil {
			res.Pkid = norm.NFC.String(p)
		}
	}
	c.announced, c.annErr = announcedKey(env)
	return res, true
}

// release returns the signing input's buffer to the pool.
func (c *check) release() {
	if cap(c.input) <= 1<<20 {
		*c.buf = c.input[:0]
		inputPool.Put(c.buf)
	}
}

// verifies reports whether the signature verifies under k.
func (c *check) verifies(k *PublicKey) bool {
	return k != nil && k.Alg() == c.sig.Alg && verifyInput(k, c.input, c.sig.Signature)
}

// verifyExplicit tries the given keys only (verify --key).
func (v *Verifier) verifyExplicit(env *envelope.Envelope, c *check, res Result) Result {
	for _, k := range v.Keys {
		if c.verifies(k) {
			res.Key, res.Source = k, SourceExplicit
			if res.Pkid == "" {
				res.Pkid = k.Pkid
			}
			return v.finish(env, res)
		}
	}
	return res.fail(StatusBadSignature, fmt.Errorf("%w under the given key", ErrBadSignature))
}

// pinned returns the trust store's entries for the key id; for a bare JWS
// also the keys first seen from the sender and, when it names no key id,
// the key pinned under the sender's address (docs/signing.md §3: "the
// keys pinned for the sender's address"; trust add KEY --pkid SENDER).
func (v *Verifier) pinned(env *envelope.Envelope, c *check, pkid string) ([]TrustEntry, error) {
	if v.Store == nil {
		return nil, nil
	}
	f, err := v.Store.read()
	if err != nil {
		return nil, err
	}
	c.store = f
	if c.sig.Form != FormBareJWS {
		if pkid == "" {
			return nil, nil
		}
		return f.pinnedFor(pkid), nil
	}
	return f.matching(func(e *TrustEntry) bool {
		return pkid != "" && e.Key.Pkid == pkid || pkid == "" && e.Key.Pkid == env.From ||
			c.sig.Form == FormBareJWS && (e.Sender != "" && strings.EqualFold(e.Sender, env.From) || e.Seen != "" && strings.EqualFold(e.Seen, env.From))
	}), nil
}

// revokedKey returns the entry that revokes k under any key id, if any
// (storeFile.revokedKey), from the store pinned read.
func (c *check) revokedKey(k *PublicKey) *TrustEntry {
	if c.store == nil {
		return nil
	}
	return c.store.revokedKey(k)
}

// revoked is the failure for a signature by k, revoked by entry r.
func (res Result) revoked(k *PublicKey, r *TrustEntry) Result {
	if r.Key.Pkid != res.Pkid {
		return res.fail(StatusRevoked, fmt.Errorf("%w: %s (%s), revoked as %s", ErrRevoked, res.Pkid, k.Fingerprint(), r.Key.Pkid))
	}
	return res.fail(StatusRevoked, fmt.Errorf("%w: %s (%s)", ErrRevoked, res.Pkid, k.Fingerprint()))
}

// verifyPinned decides for a key id the store has a pin for: the pin
// always wins. A signature that the pin does not verify is key-changed
// when the key published in DNS or the announced key verifies it (the key
// was replaced), else bad-signature. A bare JWS that names a key id
// (`meta: signing` `Pkid:`) nobody pinned, and that none of its sender's
// pinned keys verifies, is not decided here (decided false): its key id is
// new, as a new key id in the alg form is, so DNS and first use decide —
// the sender's other key ids' pins say nothing about it.
func (v *Verifier) verifyPinned(ctx context.Context, env *envelope.Envelope, c *check, res Result, pinned []TrustEntry) (r Result, decided bool) {
	for _, e := range pinned {
		if c.verifies(e.Key) {
			res.Pkid, res.Key, res.Source = e.Key.Pkid, e.Key, e.Source
			if e.Revoked {
				return res.fail(StatusRevoked, fmt.Errorf("%w: %s (%s)", ErrRevoked, e.Key.Pkid, e.Key.Fingerprint())), true
			}
			if r := c.revokedKey(e.Key); r != nil {
				return res.revoked(e.Key, r), true
			}
			return v.finish(env, res), true
		}
	}
	if res.Pkid != "" && !slices.ContainsFunc(pinned, func(e TrustEntry) bool { return e.Key.Pkid == res.Pkid }) {
		return res, false
	}
	res.Pinned = pinned[0].Key
	if res.Pkid == "" {
		res.Pkid = res.Pinned.Pkid
	}
	if k := v.dnsKeyFor(ctx, c, res.Pkid); k != nil {
		res.Key, res.Source = k, SourceDNS
		return res.fail(StatusKeyChanged, fmt.Errorf("%w: %s is pinned to %s, but the envelope is signed by %s, the key DNS publishes now", ErrKeyChanged, res.Pkid, res.Pinned.Fingerprint(), k.Fingerprint())), true
	}
	if a := c.announced; c.verifies(a) {
		a.Pkid = res.Pkid
		res.Key = a
		return res.fail(StatusKeyChanged, fmt.Errorf("%w: %s is pinned to %s, but the envelope is signed by %s", ErrKeyChanged, res.Pkid, res.Pinned.Fingerprint(), a.Fingerprint())), true
	}
	return res.fail(StatusBadSignature, fmt.Errorf("%w under the key pinned for %s (%s)", ErrBadSignature, res.Pkid, res.Pinned.Fingerprint())), true
}

// dnsKeys looks up the keys DNS publishes for pkid; ok is false when no
// DNS is configured or pkid names no domain.
func (v *Verifier) dnsKeys(ctx context.Context, pkid string) (keys []*PublicKey, ok bool, err error) {
	if v.DNS == nil || DNSNames(pkid) == nil {
		return nil, false, nil
	}
	keys, err = v.DNS.Lookup(ctx, pkid)
	return keys, true, err
}

// verifying returns the first of keys that verifies the signature, or nil.
func (c *check) verifying(keys []*PublicKey) *PublicKey {
	for _, k := range keys {
		if c.verifies(k) {
			return k
		}
	}
	return nil
}

// dnsKeyFor returns the key DNS publishes for pkid that verifies the
// signature, or nil (no DNS configured, no such key, lookup failed).
func (v *Verifier) dnsKeyFor(ctx context.Context, c *check, pkid string) *PublicKey {
	keys, ok, err := v.dnsKeys(ctx, pkid)
	if !ok || err != nil {
		return nil
	}
	return c.verifying(keys)
}

// verifyDNS decides for an unpinned key id that names a domain, when DNS
// is configured: verified (and pinned with source dns, like a first use)
// when a published key verifies; key-changed or bad-signature when DNS
// publishes other keys; unknown-key when DNS could not answer (no first
// use then). No key in DNS leaves the decision to the next stage.
func (v *Verifier) verifyDNS(ctx context.Context, env *envelope.Envelope, c *check, res Result) (Result, bool) {
	keys, ok, err := v.dnsKeys(ctx, res.Pkid)
	switch {
	case !ok, errors.Is(err, ErrNoDNSKey), err == nil && len(keys) == 0:
		return res, false
	case err != nil:
		v.log(slog.LevelWarn, "DNS key lookup failed", "pkid", res.Pkid, "err", err)
		return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: %w", ErrUnknownKey, res.Pkid, err)), true
	}
	if k := c.verifying(keys); k != nil {
		res.Key, res.Source = k, SourceDNS
		if v.Store != nil && !v.NoTOFU {
			_, err := v.Store.pinFirstUse(k, SourceDNS, "", env.From)
			switch {
			case errors.Is(err, ErrKeyChanged):
				// Pinned to another key by someone else since we looked:
				// the pin wins.
				return res.fail(StatusKeyChanged, err), true
			case err != nil:
				v.log(slog.LevelWarn, "could not pin DNS key", "pkid", res.Pkid, "err", err)
			default:
				v.log(slog.LevelInfo, "pinned DNS key", "pkid", res.Pkid, "fingerprint", k.Fingerprint(), "sender", env.From)
			}
		}
		return v.finish(env, res), true
	}
	res.Pinned = keys[0]
	if a := c.announced; c.verifies(a) {
		res.Key = a
		return res.fail(StatusKeyChanged, fmt.Errorf("%w: DNS publishes %s for %s, but the envelope is signed by %s", ErrKeyChanged, res.Pinned.Fingerprint(), res.Pkid, a.Fingerprint())), true
	}
	return res.fail(StatusBadSignature, fmt.Errorf("%w under the DNS key of %s (%s)", ErrBadSignature, res.Pkid, res.Pinned.Fingerprint())), true
}

// verifyAnnounced is trust on first use: the key the envelope announces is
// pinned when nothing else is known for its key id.
func (v *Verifier) verifyAnnounced(env *envelope.Envelope, c *check, res Result) Result {
	a := c.announced
	if a == nil {
		if c.annErr != nil {
			return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: the announced key is unusable: %w", ErrUnknownKey, res.Pkid, c.annErr))
		}
		return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: not pinned and not announced", ErrUnknownKey, res.Pkid))
	}
	if !c.verifies(a) {
		return res.fail(StatusBadSignature, fmt.Errorf("%w under the key the envelope announces (%s)", ErrBadSignature, a.Fingerprint()))
	}
	res.Key = a
	if r := c.revokedKey(a); r != nil {
		// Revoked under another key id: an old envelope of the key,
		// its unsigned pkid= changed, is no first use.
		return res.revoked(a, r)
	}
	if v.Store == nil || v.NoTOFU {
		return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: the envelope announces %s, but first-use pinning is off", ErrUnknownKey, res.Pkid, a.Fingerprint()))
	}
	entry, err := v.Store.pinFirstUse(a, SourceTOFU, "", env.From)
	switch {
	case errors.Is(err, ErrKeyChanged):
		// Pinned by someone else since we looked.
		res.Pinned = nil
		return res.fail(StatusKeyChanged, err)
	case err != nil:
		return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: %w", ErrUnknownKey, res.Pkid, err))
	case entry.Revoked:
		return res.revoked(a, &entry)
	}
	v.log(slog.LevelInfo, "pinned key on first use", "pkid", res.Pkid, "fingerprint", a.Fingerprint(), "sender", env.From)
	res.Status, res.Source = StatusFirstUse, SourceTOFU
	return v.applyRevoke(env, res)
}

// finish turns a signature that verified under res.Key into verified — or
// revoked, when the store says so for an explicit or DNS key — and applies
// a REVOKE.
func (v *Verifier) finish(env *envelope.Envelope, res Result) Result {
	if v.Store != nil && (res.Source == SourceExplicit || res.Source == SourceDNS) {
		// Under any key id: the sig line's pkid= is not signed.
		e, ok, err := v.Store.revokedKey(res.Key)
		if err != nil {
			// Whether the key was revoked is unknown: a broken store
			// trusts nothing.
			return res.fail(StatusUnknownKey, fmt.Errorf("%w %s: %w", ErrUnknownKey, res.Pkid, err))
		}
		if ok {
			return res.revoked(res.Key, &e)
		}
	}
	res.Status = StatusVerified
	return v.applyRevoke(env, res)
}

// applyRevoke marks res.Key revoked when env is a REVOKE signed by the key
// it names (docs/design.md §4.3). A REVOKE naming another key id changes nothing.
func (v *Verifier) applyRevoke(env *envelope.Envelope, res Result) Result {
	if v.Store == nil || v.NoRevoke || !strings.EqualFold(env.Intent, envelope.IntentRevoke) {
		return res
	}
	// In NFC, as the sig line's pkid= is read: a REVOKE re-pasted in NFD
	// verifies, so it revokes too.
	target, ok := env.MetaValue("revoke", "Pkid")
	if !ok || norm.NFC.String(strings.TrimSpace(target)) != res.Pkid {
		return res
	}
	k := *res.Key
	k.Pkid = res.Pkid
	if err := v.Store.Revoke(res.Pkid, &k); err != nil {
		v.log(slog.LevelWarn, "could not record revocation", "pkid", res.Pkid, "err", err)
		return res
	}
	v.log(slog.LevelInfo, "key revoked by its owner", "pkid", res.Pkid, "fingerprint", k.Fingerprint())
	res.Revocation = true
	return res
}

func (r Result) fail(s Status, err error) Result {
	r.Status, r.Err = s, err
	return r
}

func (v *Verifier) log(level slog.Level, msg string, args ...any) {
	if v.Logger != nil {
		v.Logger.Log(context.Background(), level, msg, args...)
	}
}

// announcedKey returns the key in env's `meta: signing` `Public-Key:`
// field; the caller sets its key id. No field is (nil, nil).
func announcedKey(env *envelope.Envelope) (*PublicKey, error) {
	v, ok := env.MetaValue("signing", "Public-Key")
	if !ok {
		return nil, nil
	}
	return ParsePublicKeyValue("announced", v)
}
