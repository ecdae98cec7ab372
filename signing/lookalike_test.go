package signing

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// lookalikeKeyIDs are key ids that show as, or read back from the trust
// store as, "alice@example.com" (or break the store's columns).
var lookalikeKeyIDs = []struct{ name, pkid string }{
	{"zero-width space", "alice@example.com\u200b"},
	{"zero-width joiner inside", "alice\u200d@example.com"},
	{"bidi override", "alice@example.com\u202e"},
	{"word joiner", "\u2060alice@example.com"},
	{"no-break space inside", "alice\u00a0@example.com"},
	{"no-break space before a suffix", "alice@example.com\u00a0x"},
	{"ideographic space", "alice@example.com\u3000x"},
	{"line separator", "alice@example.com\u2028x"},
	{"soft hyphen", "ali\u00adce@example.com"},
	{"variation selector", "alice@example.com\ufe0f"},
	// Columns injected with no-break spaces: read back with strings.Fields
	// this line would pin alice@example.com to whatever key it names.
	{"injected columns", "alice@example.com\u00a0ed25519\u00a0" + strings.Repeat("A", 43) + "\u00a0manual\u00a02025-01-01T00:00:00Z\u00a0active"},
}

// TestLookalikeKeyIDsRefused: a key id with an invisible character, a
// bidi control or a space other than U+0020 cannot be made, signed with,
// named in a sig: line or pinned (docs/signing.md §4), so it can neither
// show as another key id nor pin a key for another key id when the trust
// store is read back.
func TestLookalikeKeyIDsRefused(t *testing.T) {
	ctx := context.Background()
	text := plainEnv + "sig: none\n[[END]]\n"
	for _, tt := range lookalikeKeyIDs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := GenerateKey(Ed25519, tt.pkid); !errors.Is(err, ErrKeyID) {
				t.Errorf("GenerateKey(%q) = %v, want ErrKeyID", tt.pkid, err)
			}
			mallory := testKey(t, Ed25519, "m")
			if _, err := NewPublicKey(tt.pkid, mallory.Public().Key); !errors.Is(err, ErrKeyID) {
				t.Errorf("NewPublicKey(%q) = %v, want ErrKeyID", tt.pkid, err)
			}
			if _, err := ParseSig("ed25519:pkid=" + tt.pkid + ";sig=" + strings.Repeat("A", 86)); !errors.Is(err, ErrMalformedSig) {
				t.Errorf("ParseSig(pkid=%q) = %v, want ErrMalformedSig", tt.pkid, err)
			}

			// Mallory signs with his own key id and swaps the (unsigned)
			// key id on the sig: line for the lookalike.
			path := filepath.Join(t.TempDir(), "known_keys")
			v := &Verifier{Store: NewTrustStore(path)}
			env := signed(t, mallory, text, &SignOptions{Announce: true})
			src := strings.Replace(string(env.Source()), "pkid=m;", "pkid="+tt.pkid+";", 1)
			r := v.Verify(ctx, readEnv(t, src))
			if r.Status.OK() {
				t.Errorf("Verify with key id %q = %s, want a refusal", tt.pkid, r.Status)
			}
			// Whatever happened, the store reads back and holds nothing
			// for alice.
			es, err := NewTrustStore(path).Entries()
			if err != nil {
				t.Fatalf("reading the store back: %v", err)
			}
			for _, e := range es {
				if e.Key.Pkid == "alice@example.com" {
					t.Errorf("store pins alice@example.com to %s after a first use of %q", e.Key.Fingerprint(), tt.pkid)
				}
			}
		})
	}
}

// TestKeyIDNFC: a key id is compared in NFC, like the signed bytes: a sig:
// line re-pasted in NFD names the same key, and a key id that is not in
// NFC cannot be made.
func TestKeyIDNFC(t *testing.T) {
	nfc, nfd := "caf\u00e9@example.com", "cafe\u0301@example.com"
	s, err := ParseSig("ed25519:pkid=" + nfd + ";sig=" + strings.Repeat("A", 86))
	if err != nil || s.Pkid != nfc {
		t.Errorf("ParseSig(NFD pkid) = %+v, %v; want pkid %q", s, err, nfc)
	}
	if _, err := GenerateKey(Ed25519, nfd); !errors.Is(err, ErrKeyID) {
		t.Errorf("GenerateKey(NFD) = %v, want ErrKeyID", err)
	}
	k := testKey(t, Ed25519, nfc)
	v := &Verifier{Store: NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))}
	text := plainEnv + "sig: none\n[[END]]\n"
	ctx := context.Background()
	wantStatus(t, "first use", v.Verify(ctx, signed(t, k, text, &SignOptions{Announce: true})), StatusFirstUse)
	env := signed(t, k, text, nil)
	src := strings.Replace(string(env.Source()), "pkid="+nfc, "pkid="+nfd, 1)
	wantStatus(t, "NFD sig line", v.Verify(ctx, readEnv(t, src)), StatusVerified)
}

// TestRevokeSpacedKeyID: a revocation cannot write a key id that the
// store's columns would split either.
func TestRevokeSpacedKeyID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known_keys")
	k := testKey(t, Ed25519, "m").Public()
	for _, tt := range lookalikeKeyIDs {
		if strings.ContainsFunc(tt.pkid, func(r rune) bool { return r > 0x7f && (r == 0xa0 || r == 0x3000 || r == 0x2028) }) {
			if err := NewTrustStore(path).Revoke(tt.pkid, k); !errors.Is(err, ErrKeyID) {
				t.Errorf("Revoke(%q) = %v, want ErrKeyID", tt.pkid, err)
			}
		}
	}
	if _, err := NewTrustStore(path).Entries(); err != nil {
		t.Errorf("reading the store back: %v", err)
	}
}

// TestKeyIDCommentMark: a key id may not start with '#': its trust store
// line would read back as a comment, so its pin vanished and every later
// key announced for it was a first use again — any key passed as its
// holder's. Such a key id cannot be made, named or pinned.
func TestKeyIDCommentMark(t *testing.T) {
	for _, id := range []string{"#alice", "#"} {
		if _, err := GenerateKey(Ed25519, id); !errors.Is(err, ErrKeyID) {
			t.Errorf("GenerateKey(%q) = %v, want ErrKeyID", id, err)
		}
		if _, err := ParseSig("ed25519:pkid=" + id + ";sig=" + strings.Repeat("A", 86)); !errors.Is(err, ErrMalformedSig) {
			t.Errorf("ParseSig(pkid=%q) = %v, want ErrMalformedSig", id, err)
		}
		if err := newStore(t).Revoke(id, nil); !errors.Is(err, ErrKeyID) {
			t.Errorf("Revoke(%q) = %v, want ErrKeyID", id, err)
		}
	}
	// Inside a key id '#' is an ordinary character.
	if _, err := GenerateKey(Ed25519, "alice#2"); err != nil {
		t.Errorf("GenerateKey(alice#2) = %v", err)
	}
	// The first use of one key, then another: never two first uses.
	ctx := context.Background()
	v := &Verifier{Store: newStore(t)}
	a, b := testKey(t, Ed25519, "m"), testKey(t, Ed25519, "m")
	text := plainEnv + "sig: none\n[[END]]\n"
	for _, k := range []*PrivateKey{a, b} {
		src := strings.Replace(string(signed(t, k, text, &SignOptions{Announce: true}).Source()), "pkid=m;", "pkid=#m;", 1)
		if r := v.Verify(ctx, readEnv(t, src)); r.Status.OK() {
			t.Errorf("Verify with key id #m = %s, want a refusal", r.Status)
		}
	}
}
