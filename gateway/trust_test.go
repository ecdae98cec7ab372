package gateway_test

import (
	"crypto/elliptic"
	"encoding/base64"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/signing"
)

// TestTrustWithoutPrincipal: over a transport without authentication the
// header's sender speaks (docs/security.md), but the pin and revocation
// rules hold all the same: no first use under a key id the address book
// gives another actor, no revocation of another actor's key. Each step
// runs in order on one relay and trust store.
func TestTrustWithoutPrincipal(t *testing.T) {
	store, book := claudeKeyedBook(t)
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	sign := func(text string, k *signing.PrivateKey) string { return signText(t, text, k, true) }
	key := func(pkid string) *signing.PrivateKey { return newKey(t, pkid) }
	revoke := func(from, pkid string) string {
		return env(from, "ALL", "REVOKE", "t", "revoked", func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "revoke", Fields: []envelope.Field{{Key: "Pkid", Value: pkid}}}}
		})
	}
	claudeKey, geminiKey := key("claude@test"), key("gemini@test")
	steps := []struct {
		name, text string
		ok         bool
		by, status string
	}{
		{"gemini pins claude's key id", sign(env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), key("claude@test")), false, "", ""},
		{"as CLAUDE, a throwaway key under claude's key id", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), key("claude@test")), true, "claude", gateway.StatusFirstUse},
		{"claude's real key is now key-changed: the header spoke", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), claudeKey), false, "", ""},
		{"gemini's unassigned key id pins for gemini", sign(env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), geminiKey), true, "gemini", gateway.StatusFirstUse},
		{"gemini's key does not speak for claude", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), geminiKey), false, "", ""},
		{"claude revokes gemini's key, unsigned", revoke("CLAUDE", "gemini@test"), false, "", ""},
		{"gemini revokes its own key, unsigned", revoke("GEMINI", "gemini@test"), true, "gemini", gateway.StatusUnsigned},
		{"gemini's revoked key", sign(env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), geminiKey), false, "", ""},
	}
	for _, s := range steps {
		outs := ingest(t, r, "", s.text)
		if len(outs) != 1 {
			t.Fatalf("%s: %d outcomes", s.name, len(outs))
		}
		o := outs[0]
		switch {
		case s.ok && (o.Reject != nil || o.Event.By != s.by || o.Verification.Status != s.status):
			t.Errorf("%s: %v by %q status %q, want accepted by %q with %s", s.name, o.Reject, o.Event.By, o.Verification.Status, s.by, s.status)
		case !s.ok && (o.Reject == nil || o.Reject.Code != envelope.CodePerm):
			t.Errorf("%s: %+v, want E-PERM", s.name, o.Reject)
		}
	}
	if e, ok, _ := store.Lookup("gemini@test"); !ok || !e.Revoked || e.Sender != "gemini" {
		t.Errorf("gemini@test = %+v, %v; want pinned by gemini and revoked", e, ok)
	}
}

// TestPollTargetsAreIdentifiers: a POLL's extra receivers follow the rule
// of the header's: a zero-width space is refused with E-ADDRESS.
func TestPollTargetsAreIdentifiers(t *testing.T) {
	r := newRelay(t, nil)
	text := env("CLAUDE", "GEMINI", "POLL", "t", "vote", func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "poll", Fields: []envelope.Field{{Key: "Targets", Value: "CHATGPT, CLA\u200bUDE"}}}}
	})
	if outs := ingest(t, r, "", text); len(outs) != 1 || outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeAddress {
		t.Errorf("POLL with target CLA<ZWSP>UDE = %+v, want E-ADDRESS", outs[0].Reject)
	}
}

// TestPollTargetsBounded: a POLL names at most MaxPollTargets receivers;
// one more is refused with E-ADDRESS before anything is decided for them.
func TestPollTargetsBounded(t *testing.T) {
	r := newRelay(t, nil)
	poll := func(n int) []gateway.Outcome {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("AGENT%d", i)
		}
		text := env("CLAUDE", "GEMINI", "POLL", "t", fmt.Sprintf("vote %d", n), func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "poll", Fields: []envelope.Field{{Key: "Targets", Value: strings.Join(names, ", ")}}}}
		})
		return ingest(t, r, "", text)
	}
	if outs := poll(gateway.MaxPollTargets); len(outs) != 1 || outs[0].Reject != nil {
		t.Fatalf("POLL with %d targets = %+v, want recorded", gateway.MaxPollTargets, outs[0].Reject)
	}
	outs := poll(gateway.MaxPollTargets + 1)
	if len(outs) != 1 || outs[0].Reject == nil || outs[0].Reject.Code != envelope.CodeAddress || !strings.Contains(outs[0].Reject.Reason, "at most") {
		t.Errorf("POLL with %d targets = %+v, want E-ADDRESS naming the bound", gateway.MaxPollTargets+1, outs[0].Reject)
	}
}

// newKey generates an Ed25519 key with key id pkid.
func newKey(t *testing.T, pkid string) *signing.PrivateKey {
	t.Helper()
	k, err := signing.GenerateKey(signing.Ed25519, pkid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signText signs the envelope text with k, announcing the public key in
// the signature when announce is set.
func signText(t *testing.T, text string, k *signing.PrivateKey, announce bool) string {
	t.Helper()
	out, err := signing.Sign([]byte(text), k, &signing.SignOptions{Announce: announce})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// claudeKeyedBook returns an empty trust store and an address book of
// claude, who owns key id claude@test, and gemini, who owns none.
func claudeKeyedBook(t *testing.T) (*signing.TrustStore, *gateway.AddressBook) {
	t.Helper()
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Keys: []string{"claude@test"}},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys")), book
}

// TestRevokeKeyIDNFD: a REVOKE whose `Pkid:` names the key in NFD (a
// macOS paste), signed by that key, revokes it, as the same REVOKE in
// NFC does: key ids are compared in NFC, as a sig line's pkid= is.
func TestRevokeKeyIDNFD(t *testing.T) {
	store, book := claudeKeyedBook(t)
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	k := newKey(t, "ren\u00e9@test")
	if o := ingest(t, r, "", signText(t, env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), k, true))[0]; o.Reject != nil {
		t.Fatalf("first use: %v", o.Reject)
	}
	rev := env("GEMINI", "ALL", "REVOKE", "t", "revoked", func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "revoke", Fields: []envelope.Field{{Key: "Pkid", Value: "rene\u0301@test"}}}}
	})
	if o := ingest(t, r, "", signText(t, rev, k, true))[0]; o.Reject != nil {
		t.Fatalf("REVOKE in NFD, signed by the key: %v", o.Reject)
	}
	if e, ok, _ := store.Lookup("ren\u00e9@test"); !ok || !e.Revoked {
		t.Errorf("ren\u00e9@test = %+v, %v; want revoked", e, ok)
	}
}

// TestFirstUsePinsPerSenderBounded: a sender announcing a new key id with
// every envelope has the first signing.MaxFirstUsePins pinned; the next
// is refused (E-PERM) with the reason, and nothing more is pinned
// (the relay's trust store, which each pin rewrites, stays bounded).
func TestFirstUsePinsPerSenderBounded(t *testing.T) {
	store, book := claudeKeyedBook(t)
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	for i := range signing.MaxFirstUsePins + 1 {
		k := newKey(t, fmt.Sprintf("g%d@test", i))
		o := ingest(t, r, "", signText(t, env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), k, true))[0]
		if i == signing.MaxFirstUsePins {
			if o.Reject == nil || o.Reject.Code != envelope.CodePerm || !strings.Contains(o.Reject.Reason, "too many keys") {
				t.Fatalf("key %d: %+v, want E-PERM saying too many keys", i, o.Reject)
			}
		} else if o.Reject != nil || o.Verification.Status != gateway.StatusFirstUse {
			t.Fatalf("key %d: %v, status %q; want first use", i, o.Reject, o.Verification.Status)
		}
	}
	es, err := store.Entries()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.Sender == "gemini" {
			n++
		}
	}
	if n != signing.MaxFirstUsePins {
		t.Errorf("trust store holds %d keys of gemini, want %d", n, signing.MaxFirstUsePins)
	}
}

// TestKeyHolderComparedExactly: a key id held by the actor "ſam" (its
// first use over the token of ſam) speaks for ſam only. "ſam" folds to
// "sam" (strings.EqualFold) but the ledger records them as two actors
// (docs/security.md "Who speaks": actor ids are compared exactly), so
// ſam's key does not make an envelope sam's — not sent by ſam's token,
// not forwarded by another principal — and ſam may not revoke sam's key.
func TestKeyHolderComparedExactly(t *testing.T) {
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "gemini", Names: []string{"GEMINI"}}})
	if err != nil {
		t.Fatal(err)
	}
	store := signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	longS, samKey := newKey(t, "longs@test"), newKey(t, "sam@test")
	revoke := func(from, pkid string) string {
		return env(from, "ALL", "REVOKE", "t", "revoked", func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "revoke", Fields: []envelope.Field{{Key: "Pkid", Value: pkid}}}}
		})
	}
	steps := []struct {
		name, principal, text string
		ok                    bool
		by                    string
	}{
		{"ſam's first use pins for ſam", "ſam", signText(t, env("ſam", "GEMINI", "REQUEST", "t1", "x"), longS, true), true, "ſam"},
		{"sam's first use pins for sam", "sam", signText(t, env("sam", "GEMINI", "REQUEST", "t2", "x"), samKey, true), true, "sam"},
		{"ſam's key, sent by ſam as sam", "ſam", signText(t, env("sam", "GEMINI", "REQUEST", "t3", "x"), longS, false), false, ""},
		{"ſam's key, forwarded by mallory as SAM", "mallory", signText(t, env("SAM", "GEMINI", "REQUEST", "t4", "x"), longS, false), false, ""},
		{"ſam's key, sent by ſam as ſam", "ſam", signText(t, env("ſam", "GEMINI", "REQUEST", "t5", "x"), longS, false), true, "ſam"},
		{"sam revokes ſam's key, unsigned", "sam", revoke("sam", "longs@test"), false, ""},
		{"ſam revokes sam's key, unsigned", "ſam", revoke("ſam", "sam@test"), false, ""},
	}
	for _, s := range steps {
		outs := ingest(t, r, s.principal, s.text)
		if len(outs) != 1 {
			t.Fatalf("%s: %d outcomes", s.name, len(outs))
		}
		o := outs[0]
		switch {
		case s.ok && (o.Reject != nil || o.Event.By != s.by):
			t.Errorf("%s: %+v by %q, want accepted by %q", s.name, o.Reject, o.Event.By, s.by)
		case !s.ok && (o.Reject == nil || o.Reject.Code != envelope.CodePerm):
			t.Errorf("%s: accepted by %q (%+v), want E-PERM", s.name, o.Event.By, o.Reject)
		}
	}
	for _, pkid := range []string{"longs@test", "sam@test"} {
		if e, ok, _ := store.Lookup(pkid); !ok || e.Revoked {
			t.Errorf("%s = %+v, %v; want pinned, not revoked", pkid, e, ok)
		}
	}
}

// TestSignedReplayWithKelvinSign: a signature covers the NFC form of the
// text, where KELVIN SIGN (U+212A) is K. The same signed envelope with
// the K of its message id swapped for it verified and was recorded as a
// new message from the signer, with require_signatures on: a replay the
// message id did not stop. It is now the duplicate it is.
func TestSignedReplayWithKelvinSign(t *testing.T) {
	store, book := claudeKeyedBook(t)
	r := newRelay(t, &gateway.Options{Book: book, RequireSignature: true, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	text := signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "pay 100", func(e *envelope.Envelope) { e.Message = "01J9ZQ3K8Y5V4W3X2Z1A0B9C8D" }), newKey(t, "claude@test"), true)
	first := ingest(t, r, "", text)[0]
	if first.Reject != nil || first.Duplicate {
		t.Fatalf("first: %+v duplicate %v", first.Reject, first.Duplicate)
	}
	replay := strings.Replace(text, "message: 01J9ZQ3K8Y", "message: 01J9ZQ3\u212a8Y", 1)
	o := ingest(t, r, "", replay)[0]
	if o.Reject != nil || !o.Duplicate || o.Event.ID != first.Event.ID || o.Verification.Status != gateway.StatusVerified {
		t.Errorf("replay: %+v duplicate %v event %s status %s; want verified, a duplicate of %s", o.Reject, o.Duplicate, o.Event.ID, o.Verification.Status, first.Event.ID)
	}
}

// TestES256SecondSignatureIsDuplicate: ECDSA is malleable — (r, n−s) is a
// second valid signature of the same payload, made without the key — and
// any valid ES256 signature is accepted (docs/signing.md §2). The sig:
// line is outside the signed bytes, so the second spelling is the same
// envelope: a duplicate of the first event, with a message id and
// without one (de-duplicated by the payload's hash, docs/design.md §5.3).
func TestES256SecondSignatureIsDuplicate(t *testing.T) {
	for _, withID := range []bool{true, false} {
		store, book := claudeKeyedBook(t)
		r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
		k, err := signing.GenerateKey(signing.SECP256R1, "claude@test")
		if err != nil {
			t.Fatal(err)
		}
		text := signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "x", func(e *envelope.Envelope) {
			if !withID {
				e.Message = ""
			}
		}), k, true)
		i := strings.Index(text, ";sig=") + len(";sig=")
		j := i + strings.Index(text[i:], "\n")
		sig, err := base64.RawURLEncoding.DecodeString(text[i:j])
		if err != nil || len(sig) != 64 {
			t.Fatalf("signature %q: %v", text[i:j], err)
		}
		s := new(big.Int).Sub(elliptic.P256().Params().N, new(big.Int).SetBytes(sig[32:]))
		second := text[:i] + base64.RawURLEncoding.EncodeToString(append(sig[:32:32], s.FillBytes(make([]byte, 32))...)) + text[j:]
		first := ingest(t, r, "claude", text)[0]
		o := ingest(t, r, "claude", second)[0]
		if first.Reject != nil || o.Reject != nil || o.Verification.Status != gateway.StatusVerified || !o.Duplicate || o.Event.ID != first.Event.ID {
			t.Errorf("message id %v: first %+v; second %+v %s duplicate %v event %s, want verified and a duplicate of %s",
				withID, first.Reject, o.Reject, o.Verification.Status, o.Duplicate, o.Event.ID, first.Event.ID)
		}
	}
}
