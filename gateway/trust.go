package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
)

// A TrustKeeper is a Verifier whose Verify changes nothing: pinning a key
// on first use and applying a revocation are left to the relay, which asks
// only once it has decided who speaks and that this speaker may change
// the trust store (docs/security.md). Its Verify reports a signature that
// verifies only under the key the envelope announces, for a key id with
// no pinned key, as StatusFirstUse with Pending set — and one that
// verifies under a key found in DNS, not pinned yet, as StatusVerified
// with Pending set.
type TrustKeeper interface {
	Verifier
	// Pin pins v.Key for v.Pkid as first used by actor; v comes from
	// Verify with Pending set. It returns v as it now stands: first-use
	// (verified for a DNS key), or key-changed when another key was
	// pinned for the id meanwhile.
	Pin(ctx context.Context, v Verification, actor string) Verification
	// PinSeen is Pin for a first use over a medium that authenticates
	// nobody (mail): the key is pinned with actor recorded as seen, not
	// as its holder (FirstUsedBy does not report it).
	PinSeen(ctx context.Context, v Verification, actor string) Verification
	// FirstUsedBy returns the actor (or, for pins older than this rule,
	// the sender address) a key id was pinned from on first use, if any.
	FirstUsedBy(ctx context.Context, pkid string) (string, bool)
	// Revoke marks the key of pkid revoked. With key nil the pinned key
	// is revoked; with a key, a key id pinned to another key is an error
	// and an unknown one is recorded revoked for that key.
	Revoke(ctx context.Context, pkid string, key *signing.PublicKey) error
}

// TrustVerifier is the relay's TrustKeeper over package signing: a trust
// store with first-use pinning, revocations, and whatever else the
// signing.Verifier it wraps consults (explicit keys, DNS).
type TrustVerifier struct {
	v    signing.Verifier // the wrapped verifier, with NoTOFU and NoRevoke set
	tofu bool             // the wrapped verifier pins on first use
	log  *slog.Logger
}

var _ TrustKeeper = (*TrustVerifier)(nil)

// NewTrustVerifier returns the relay's verifier over v: v's keys, trust
// store, resolver and first-use policy, except that nothing is pinned or
// revoked until the relay asks (TrustKeeper). v is copied; its Store is
// shared.
func NewTrustVerifier(v *signing.Verifier) *TrustVerifier {
	t := &TrustVerifier{v: *v, tofu: !v.NoTOFU && v.Store != nil, log: v.Logger}
	t.v.NoTOFU, t.v.NoRevoke = true, true
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t
}

// Verify checks env's signature without changing the trust store.
func (t *TrustVerifier) Verify(ctx context.Context, env *envelope.Envelope) Verification {
	res := t.v.Verify(ctx, env)
	v := Verification{Status: string(res.Status), Pkid: res.Pkid, Alg: string(res.Alg), Err: res.Err, Key: res.Key}
	switch {
	case res.Status == signing.StatusUnknownKey && res.Key != nil && t.tofu:
		// The announced key verifies and nothing is pinned for the id:
		// first use, once the relay allows it.
		v.Status, v.Pending, v.Err, v.source = StatusFirstUse, true, nil, signing.SourceTOFU
	case res.Status == signing.StatusVerified && res.Source == signing.SourceDNS && t.tofu:
		// A key published in DNS for an id nothing is pinned for: pinned
		// like a first use (source dns) once the relay accepts it.
		v.Pending, v.source = true, signing.SourceDNS
	}
	return v
}

// Pin pins the key of a pending first use, held by actor.
func (t *TrustVerifier) Pin(ctx context.Context, v Verification, actor string) Verification {
	return t.pin(ctx, v, actor, t.v.Store.PinFirstUse)
}

// PinSeen pins the key of a pending first use, seen from actor and held
// by nobody.
func (t *TrustVerifier) PinSeen(ctx context.Context, v Verification, actor string) Verification {
	return t.pin(ctx, v, actor, t.v.Store.PinFirstUseSeen)
}

func (t *TrustVerifier) pin(ctx context.Context, v Verification, actor string,
	pin func(*signing.PublicKey, signing.KeySource, string) (signing.TrustEntry, error)) Verification {
	if !v.Pending || v.Key == nil {
		return v
	}
	v.Pending = false
	entry, err := pin(v.Key, v.source, actor)
	switch {
	case errors.Is(err, signing.ErrKeyChanged):
		v.Status, v.Err = StatusKeyChanged, err
	case err != nil:
		v.Status, v.Err = StatusUnknownKey, err
	case entry.Revoked:
		v.Status, v.Err = StatusRevoked, signing.ErrRevoked
	default:
		t.log.LogAttrs(ctx, slog.LevelInfo, "pinned key on first use", slog.String("pkid", v.Pkid),
			slog.String("fingerprint", v.Key.Fingerprint()), slog.String("source", string(v.source)), slog.String("actor", actor))
	}
	return v
}

// FirstUsedBy returns the sender recorded with the pin of pkid.
func (t *TrustVerifier) FirstUsedBy(ctx context.Context, pkid string) (string, bool) {
	if t.v.Store == nil || pkid == "" {
		return "", false
	}
	e, ok, err := t.v.Store.Lookup(pkid)
	if err != nil {
		t.log.LogAttrs(ctx, slog.LevelWarn, "reading the trust store", slog.String("pkid", pkid), slog.Any("err", err))
		return "", false
	}
	return e.Sender, ok && e.Sender != ""
}

// Revoke marks the key of pkid revoked in the trust store.
func (t *TrustVerifier) Revoke(ctx context.Context, pkid string, key *signing.PublicKey) error {
	if t.v.Store == nil {
		return errors.New("gateway: the relay has no trust store to record a revocation in")
	}
	return t.v.Store.Revoke(pkid, key)
}
