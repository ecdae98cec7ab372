package signing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"golang.org/x/text/unicode/norm"
)

var testNow = time.Date(2025, 10, 9, 17, 0, 0, 0, time.UTC)

func newStore(t testing.TB) *TrustStore {
	t.Helper()
	s := NewTrustStore(filepath.Join(t.TempDir(), "crosstalk", "known_keys"))
	s.Now = func() time.Time { return testNow }
	return s
}

// signed returns env text signed by k, announcing the key when announce.
func signed(t testing.TB, k *PrivateKey, text string, o *SignOptions) *envelope.Envelope {
	t.Helper()
	out, err := Sign([]byte(text), k, o)
	if err != nil {
		t.Fatal(err)
	}
	return readEnv(t, string(out))
}

func wantStatus(t *testing.T, what string, r Result, want Status) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: Verify = %s (%v), want %s", what, r.Status, r.Err, want)
	}
}

func TestTOFUFlow(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := &Verifier{Store: store}
	alice := testKey(t, Ed25519, "alice@example.com")
	ann := &SignOptions{Announce: true}
	text := plainEnv + "sig: none\n[[END]]\n"

	// Unsigned.
	wantStatus(t, "unsigned", v.Verify(ctx, readEnv(t, text)), StatusUnsigned)

	// Signed, key not announced, never seen: unknown-key.
	r := v.Verify(ctx, signed(t, alice, text, nil))
	wantStatus(t, "unannounced", r, StatusUnknownKey)
	if !errors.Is(r.Err, ErrUnknownKey) || r.Pkid != "alice@example.com" {
		t.Errorf("unknown-key result = %+v", r)
	}

	// First use: pinned now.
	r = v.Verify(ctx, signed(t, alice, text, ann))
	wantStatus(t, "first use", r, StatusFirstUse)
	if r.Source != SourceTOFU || !r.Key.Equal(alice.Public()) || r.Err != nil {
		t.Errorf("first-use result = %+v", r)
	}
	e, ok, err := store.Lookup("alice@example.com")
	if err != nil || !ok || !e.Key.Equal(alice.Public()) || e.Source != SourceTOFU || e.Seen != "ALICE" || e.Sender != "" || !e.FirstSeen.Equal(testNow) {
		t.Fatalf("Lookup after first use = %+v, %v, %v", e, ok, err)
	}

	// Later envelopes verify, with or without the announcement.
	wantStatus(t, "second", v.Verify(ctx, signed(t, alice, text, ann)), StatusVerified)
	wantStatus(t, "unannounced after pin", v.Verify(ctx, signed(t, alice, text, nil)), StatusVerified)

	// A new key for the same key id: key-changed, and the pin stays.
	mallory := testKey(t, Ed25519, "alice@example.com")
	r = v.Verify(ctx, signed(t, mallory, text, ann))
	wantStatus(t, "new key", r, StatusKeyChanged)
	if !errors.Is(r.Err, ErrKeyChanged) || !r.Pinned.Equal(alice.Public()) || !r.Key.Equal(mallory.Public()) {
		t.Errorf("key-changed result = %+v", r)
	}
	wantStatus(t, "new key again", v.Verify(ctx, signed(t, mallory, text, ann)), StatusKeyChanged)
	// Without the announcement it is just a bad signature.
	wantStatus(t, "new key unannounced", v.Verify(ctx, signed(t, mallory, text, nil)), StatusBadSignature)

	// A tampered envelope: bad-signature, even with the right key pinned.
	good := signed(t, alice, text, nil)
	bad := readEnv(t, strings.Replace(string(good.Source()), "Hello Bob.", "Hello Bob!", 1))
	r = v.Verify(ctx, bad)
	wantStatus(t, "tampered", r, StatusBadSignature)
	if !errors.Is(r.Err, ErrBadSignature) {
		t.Errorf("tampered: Err = %v", r.Err)
	}

	// The user re-pins: the new key verifies, the old one no longer does.
	if err := store.Pin(mallory.Public()); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "after re-pin", v.Verify(ctx, signed(t, mallory, text, ann)), StatusVerified)
	wantStatus(t, "old key after re-pin", v.Verify(ctx, signed(t, alice, text, ann)), StatusKeyChanged)
}

func TestNoTOFU(t *testing.T) {
	store := newStore(t)
	v := &Verifier{Store: store, NoTOFU: true}
	k := testKey(t, Ed25519, "alice")
	r := v.Verify(context.Background(), signed(t, k, plainEnv, &SignOptions{Announce: true}))
	wantStatus(t, "no tofu", r, StatusUnknownKey)
	if r.Key == nil || !r.Key.Equal(k.Public()) {
		t.Errorf("Key = %v, want the announced key", r.Key)
	}
	if es, _ := store.Entries(); len(es) != 0 {
		t.Errorf("NoTOFU pinned %v", es)
	}
	// An announced key that does not match the signature is bad, not new.
	other := testKey(t, Ed25519, "alice")
	env := signed(t, k, plainEnv, &SignOptions{Announce: true})
	forged := readEnv(t, strings.Replace(string(env.Source()), k.Public().Value(), other.Public().Value(), 1))
	wantStatus(t, "forged announcement", (&Verifier{Store: store}).Verify(context.Background(), forged), StatusBadSignature)
}

func TestRevocation(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := &Verifier{Store: store}
	k := testKey(t, Ed25519, "alice@example.com")
	ann := &SignOptions{Announce: true}
	wantStatus(t, "first", v.Verify(ctx, signed(t, k, plainEnv, ann)), StatusFirstUse)

	// A REVOKE naming another key id changes nothing.
	other := "[[ALICE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: bob@example.com\n\nbody: |\n  not mine\n"
	r := v.Verify(ctx, signed(t, k, other, nil))
	wantStatus(t, "revoke other", r, StatusVerified)
	if r.Revocation {
		t.Error("a REVOKE of another key id revoked something")
	}
	// A REVOKE signed by another key is not applied.
	mallory := testKey(t, Ed25519, "alice@example.com")
	rev := "[[ALICE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: alice@example.com\n\nbody: |\n  Key compromised.\n"
	wantStatus(t, "revoke by another key", v.Verify(ctx, signed(t, mallory, rev, ann)), StatusKeyChanged)
	wantStatus(t, "still good", v.Verify(ctx, signed(t, k, plainEnv, nil)), StatusVerified)

	// The key revokes itself.
	r = v.Verify(ctx, signed(t, k, rev, nil))
	wantStatus(t, "revoke", r, StatusVerified)
	if !r.Revocation {
		t.Error("REVOKE signed by the key did not revoke it")
	}
	e, _, _ := store.Lookup("alice@example.com")
	if !e.Revoked {
		t.Fatalf("entry after REVOKE = %+v", e)
	}
	r = v.Verify(ctx, signed(t, k, plainEnv, nil))
	wantStatus(t, "after revoke", r, StatusRevoked)
	if !errors.Is(r.Err, ErrRevoked) {
		t.Errorf("Err = %v", r.Err)
	}
	// Even with the key given explicitly, the store's revocation counts.
	wantStatus(t, "explicit after revoke", (&Verifier{Store: store, Keys: []*PublicKey{k.Public()}}).Verify(ctx, signed(t, k, plainEnv, nil)), StatusRevoked)
	// The revoked key cannot be re-pinned by hand; a new key can.
	if err := store.Pin(k.Public()); !errors.Is(err, ErrRevoked) {
		t.Errorf("Pin(revoked key) = %v, want ErrRevoked", err)
	}
	if err := store.Pin(mallory.Public()); err != nil {
		t.Errorf("Pin(new key) = %v", err)
	}

	// A REVOKE for a never-seen key id, announcing its key: first use,
	// and the key is revoked at once.
	carol := testKey(t, SECP256R1, "carol@example.com")
	crev := strings.Replace(rev, "alice@", "carol@", 1)
	r = v.Verify(ctx, signed(t, carol, crev, ann))
	wantStatus(t, "carol revoke", r, StatusFirstUse)
	if !r.Revocation {
		t.Error("first-use REVOKE did not revoke")
	}
	wantStatus(t, "carol after", v.Verify(ctx, signed(t, carol, plainEnv, ann)), StatusRevoked)
}

// TestRevocationNFD: a REVOKE re-pasted in NFD (a Mac pasteboard) verifies
// — the signed bytes are compared in NFC — and so must revoke the key it
// names, whose Pkid: is then in NFD too.
func TestRevocationNFD(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := &Verifier{Store: store}
	nfc := "j\u00f6rg@example.com"
	k := testKey(t, Ed25519, nfc)
	rev := "[[ALICE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: " + nfc + "\n\nbody: |\n  Key compromised.\n"
	out, err := Sign([]byte(rev), k, &SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	nfd := norm.NFD.String(string(out))
	if nfd == string(out) {
		t.Fatal("test envelope has nothing to decompose")
	}
	r := v.Verify(ctx, readEnv(t, nfd))
	wantStatus(t, "NFD REVOKE", r, StatusFirstUse)
	if !r.Revocation {
		t.Error("a REVOKE delivered in NFD did not revoke its key")
	}
	if e, _, _ := store.Lookup(nfc); !e.Revoked {
		t.Errorf("entry after NFD REVOKE = %+v, want revoked", e)
	}
}

func TestBareJWSSenderKeys(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := &Verifier{Store: store}
	k := testKey(t, Ed25519, "alice-2025")
	text := plainEnv + "[[END]]\n" // from ALICE
	// First use through an announcement: Pkid: in meta: signing.
	r := v.Verify(ctx, signed(t, k, text, &SignOptions{Form: FormBareJWS, Announce: true}))
	wantStatus(t, "bare first", r, StatusFirstUse)
	if r.Pkid != "alice-2025" {
		t.Errorf("Pkid = %q, want the announced alice-2025", r.Pkid)
	}
	// Later bare JWS without anything: found through the sender.
	r = v.Verify(ctx, signed(t, k, text, &SignOptions{Form: FormBareJWS}))
	wantStatus(t, "bare later", r, StatusVerified)
	if r.Pkid != "alice-2025" {
		t.Errorf("Pkid = %q, want alice-2025", r.Pkid)
	}
	// Another sender's bare JWS is not verified with ALICE's keys.
	other := strings.Replace(text, "[[ALICE→BOB", "[[EVE→BOB", 1)
	wantStatus(t, "other sender", v.Verify(ctx, signed(t, k, other, &SignOptions{Form: FormBareJWS})), StatusUnknownKey)
	// A bare JWS by a sender whose address cannot be a key id.
	spaced := strings.Replace(text, "[[ALICE→BOB", "[[Brother AI→BOB", 1)
	wantStatus(t, "spaced sender", v.Verify(ctx, signed(t, k, spaced, &SignOptions{Form: FormBareJWS})), StatusUnknownKey)

	// ALICE rotates to a new key id, announced with Pkid: that key id was
	// never pinned, so it is a first use, as in the plain form — not
	// key-changed against the old key id's pin.
	k2 := testKey(t, Ed25519, "alice-2026")
	r = v.Verify(ctx, signed(t, k2, text, &SignOptions{Form: FormBareJWS, Announce: true}))
	wantStatus(t, "bare rotation to a new key id", r, StatusFirstUse)
	if r.Pkid != "alice-2026" || !r.Key.Equal(k2.Public()) {
		t.Errorf("rotation: Pkid %q key %v, want alice-2026's", r.Pkid, r.Key)
	}
	// The old key id's pin is untouched, and both keys now verify.
	wantStatus(t, "old key after rotation", v.Verify(ctx, signed(t, k, text, &SignOptions{Form: FormBareJWS})), StatusVerified)
	wantStatus(t, "new key after rotation", v.Verify(ctx, signed(t, k2, text, &SignOptions{Form: FormBareJWS})), StatusVerified)
	// A bare JWS naming a pinned key id, signed by another key, is still
	// key-changed.
	mallory := testKey(t, Ed25519, "alice-2025")
	wantStatus(t, "bare other key for a pinned key id", v.Verify(ctx, signed(t, mallory, text, &SignOptions{Form: FormBareJWS, Announce: true})), StatusKeyChanged)
	// A bare JWS naming a new key id without announcing a key: unknown-key.
	k3 := testKey(t, Ed25519, "alice-2027")
	wantStatus(t, "bare new key id unannounced", v.Verify(ctx, signed(t, k3, strings.Replace(text, "body:", "meta: signing\nPkid: alice-2027\n\nbody:", 1), &SignOptions{Form: FormBareJWS})), StatusUnknownKey)
}

func TestExplicitKey(t *testing.T) {
	k := testKey(t, Ed25519, "alice")
	other := testKey(t, Ed25519, "alice")
	env := signed(t, k, plainEnv, &SignOptions{Announce: true})
	wantStatus(t, "right key", Verify(env, k.Public()), StatusVerified)
	// Only the given key is tried, even though the envelope announces the
	// right one.
	wantStatus(t, "wrong key", Verify(env, other.Public()), StatusBadSignature)
	wantStatus(t, "ES256 key", Verify(env, testKey(t, SECP256R1, "alice").Public()), StatusBadSignature)
	wantStatus(t, "no key", Verify(env), StatusUnknownKey)
	wantStatus(t, "several", Verify(env, other.Public(), k.Public()), StatusVerified)
	// Composed envelopes have no source.
	e := envelope.New("A", "B", "REQUEST", "x")
	e.Sig = "ed25519:pkid=a;sig=" + sigURL
	if r := Verify(e, k.Public()); r.Status != StatusBadSignature || !errors.Is(r.Err, ErrNoSource) {
		t.Errorf("Verify(composed) = %s %v", r.Status, r.Err)
	}
}

func TestTrustStoreFile(t *testing.T) {
	s := newStore(t)
	a, b := testKey(t, Ed25519, "a@x.org"), testKey(t, SECP256R1, "b@x.org")
	if _, err := s.PinFirstUse(a.Public(), SourceTOFU, "Brother AI"); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(b.Public()); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(b.Public()); err != nil {
		t.Errorf("Add(same key) = %v", err)
	}
	if err := s.Add(testKey(t, Ed25519, "b@x.org").Public()); !errors.Is(err, ErrKeyChanged) {
		t.Errorf("Add(other key) = %v, want ErrKeyChanged", err)
	}
	if _, err := s.PinFirstUse(testKey(t, Ed25519, "a@x.org").Public(), SourceTOFU, ""); !errors.Is(err, ErrKeyChanged) {
		t.Errorf("PinFirstUse(other key) = %v, want ErrKeyChanged", err)
	}
	if err := s.Revoke("b@x.org", nil); err != nil {
		t.Fatal(err)
	}
	// A user comment survives rewrites.
	data, _ := os.ReadFile(s.Path())
	os.WriteFile(s.Path(), append([]byte("# my note\n"), data...), 0o644)
	if err := s.Remove("nobody"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Remove(unknown) = %v", err)
	}
	if err := s.Revoke("nobody", nil); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Revoke(unknown, nil) = %v", err)
	}
	c := testKey(t, Ed25519, "c")
	if err := s.Add(c.Public()); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("c"); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(s.Path())
	want := "# my note\n" + strings.TrimSuffix(storeHeader, "\n") + "\n" +
		"a@x.org ed25519 " + b64url(a.Public().Bytes()) + " tofu 2025-10-09T17:00:00Z active sender=Brother%20AI\n" +
		"b@x.org secp256r1 " + b64url(b.Public().Bytes()) + " manual 2025-10-09T17:00:00Z revoked\n"
	if string(data) != want {
		t.Errorf("store file =\n%s\nwant\n%s", data, want)
	}
	es, err := s.Entries()
	if err != nil || len(es) != 2 || es[0].Sender != "Brother AI" || !es[1].Revoked || !es[1].Key.Equal(b.Public()) {
		t.Errorf("Entries = %+v, %v", es, err)
	}
	if fi, err := os.Stat(filepath.Dir(s.Path())); err == nil && fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory mode = %04o, want 0700", fi.Mode().Perm())
	}
}

func TestTrustStoreParseErrors(t *testing.T) {
	key := b64url(testKey(t, Ed25519, "a").Public().Bytes())
	for _, tt := range []struct{ name, line string }{
		{"too few columns", "a ed25519 " + key + " tofu 2025-10-09T17:00:00Z"},
		{"bad alg", "a rsa " + key + " tofu 2025-10-09T17:00:00Z active"},
		{"bad key", "a ed25519 AAAA tofu 2025-10-09T17:00:00Z active"},
		{"bad source", "a ed25519 " + key + " guess 2025-10-09T17:00:00Z active"},
		{"bad time", "a ed25519 " + key + " tofu yesterday active"},
		{"bad state", "a ed25519 " + key + " tofu 2025-10-09T17:00:00Z maybe"},
		{"duplicate", "a ed25519 " + key + " tofu 2025-10-09T17:00:00Z active\na ed25519 " + key + " tofu 2025-10-09T17:00:00Z active"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			os.MkdirAll(filepath.Dir(s.Path()), 0o700)
			os.WriteFile(s.Path(), []byte("# comment\n\n"+tt.line+"\n"), 0o644)
			_, err := s.Entries()
			if !errors.Is(err, ErrTrustStore) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), s.Path()) {
				t.Errorf("Entries = %v, want ErrTrustStore naming %s line 3", err, s.Path())
			}
			// A verifier with a broken store trusts nothing.
			k := testKey(t, Ed25519, "a")
			r := (&Verifier{Store: s}).Verify(context.Background(), signed(t, k, plainEnv, &SignOptions{Announce: true}))
			if r.Status.OK() {
				t.Errorf("Verify with a broken store = %s", r.Status)
			}
		})
	}
}

// TestTrustStoreConcurrentWriters: many writers, each with its own
// TrustStore value (as separate processes would have), never lose a pin.
func TestTrustStoreConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known_keys")
	const writers, each = 8, 10
	keys := make([][]*PrivateKey, writers)
	for w := range keys {
		for i := 0; i < each; i++ {
			keys[w] = append(keys[w], testKey(t, Ed25519, fmt.Sprintf("w%d-k%d@example.com", w, i)))
		}
	}
	shared := testKey(t, Ed25519, "shared@example.com")
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*3)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := NewTrustStore(path)
			v := &Verifier{Store: s}
			for i, k := range keys[w] {
				if i%2 == 0 {
					if _, err := s.PinFirstUse(k.Public(), SourceTOFU, ""); err != nil {
						errs <- err
					}
				} else {
					// A sender per writer: first use pins at most
					// MaxFirstUsePins for one.
					text := strings.Replace(plainEnv, "ALICE", fmt.Sprint("ALICE", w), 1)
					env := signed(t, k, text, &SignOptions{Announce: true})
					if r := v.Verify(context.Background(), env); r.Status != StatusFirstUse {
						errs <- fmt.Errorf("%s: %s %v", k.Pkid, r.Status, r.Err)
					}
				}
				// Everybody races to pin the same key: exactly the
				// same entry must win for all.
				if _, err := s.PinFirstUse(shared.Public(), SourceTOFU, ""); err != nil {
					errs <- err
				}
				if _, err := s.Entries(); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	es, err := NewTrustStore(path).Entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != writers*each+1 {
		t.Errorf("store has %d entries, want %d", len(es), writers*each+1)
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".known_keys.tmp-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}

func TestTrustStoreRejectsBadKeys(t *testing.T) {
	s := newStore(t)
	good := testKey(t, Ed25519, "a").Public()
	spaced := *good
	spaced.Pkid = "a b\nc d ed25519 x tofu"
	for name, fn := range map[string]func() error{
		"Add(nil)":          func() error { return s.Add(nil) },
		"Pin(nil key type)": func() error { return s.Pin(&PublicKey{Pkid: "a"}) },
		"Add(bad pkid)":     func() error { return s.Add(&spaced) },
		"PinFirstUse(bad source)": func() error {
			_, err := s.PinFirstUse(good, "explicit", "")
			return err
		},
		"Revoke(bad pkid)": func() error { return s.Revoke("a b", good) },
	} {
		if err := fn(); err == nil {
			t.Errorf("%s = nil error", name)
		}
	}
	if es, err := s.Entries(); err != nil || len(es) != 0 {
		t.Errorf("Entries = %v, %v; want none", es, err)
	}
}

// TestMemoryTrustStore: a store in memory pins on first use like a file,
// and Bytes gives text that a new store (file or memory) reads back the same.
func TestMemoryTrustStore(t *testing.T) {
	ctx := context.Background()
	store, err := NewMemoryTrustStore([]byte("# kept\n"))
	if err != nil {
		t.Fatal(err)
	}
	store.Now = func() time.Time { return testNow }
	v := &Verifier{Store: store}
	alice := testKey(t, Ed25519, "alice@example.com")
	text := plainEnv + "sig: none\n[[END]]\n"
	wantStatus(t, "first use", v.Verify(ctx, signed(t, alice, text, &SignOptions{Announce: true})), StatusFirstUse)
	wantStatus(t, "second", v.Verify(ctx, signed(t, alice, text, nil)), StatusVerified)
	data, err := store.Bytes()
	if err != nil || !strings.HasPrefix(string(data), "# kept\nalice@example.com ed25519 ") {
		t.Fatalf("Bytes = %q, %v", data, err)
	}
	again, err := NewMemoryTrustStore(data)
	if err != nil {
		t.Fatal(err)
	}
	mallory := testKey(t, Ed25519, "alice@example.com")
	v2 := &Verifier{Store: again}
	wantStatus(t, "other key after reload", v2.Verify(ctx, signed(t, mallory, text, &SignOptions{Announce: true})), StatusKeyChanged)
	file := newStore(t)
	if err := os.MkdirAll(filepath.Dir(file.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file.Path(), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if fromFile, err := file.Bytes(); err != nil || string(fromFile) != string(data) {
		t.Errorf("file store Bytes = %q, %v; want %q", fromFile, err, data)
	}
	if _, err := NewMemoryTrustStore([]byte("not a key line\n")); !errors.Is(err, ErrTrustStore) {
		t.Errorf("NewMemoryTrustStore(garbage) = %v, want ErrTrustStore", err)
	}
}

// bigStore writes a trust store file of n pinned Ed25519 keys (key ids
// agentI@example.com, every third with a sender) plus key, pinned for
// ALICE, in the middle, without n rewrites of the file.
func bigStore(t testing.TB, n int, key *PublicKey) *TrustStore {
	t.Helper()
	f := &storeFile{}
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		if i == n/2 {
			f.add(&TrustEntry{Key: key, Source: SourceManual, FirstSeen: seen, Sender: "ALICE"})
		}
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), 1
		pub, err := NewPublicKey(fmt.Sprintf("agent%d@example.com", i), ed25519.NewKeyFromSeed(seed).Public())
		if err != nil {
			t.Fatal(err)
		}
		e := &TrustEntry{Key: pub, Source: SourceTOFU, FirstSeen: seen, Revoked: i%7 == 0}
		if i%3 == 0 {
			e.Sender = fmt.Sprintf("AGENT%d", i)
		}
		f.add(e)
	}
	path := filepath.Join(t.TempDir(), "known_keys")
	if err := writeAtomic(path, f.render()); err != nil {
		t.Fatal(err)
	}
	return NewTrustStore(path)
}

// TestPinnedForMatchesScan checks that the key-id index the Verifier
// looks pins up in gives what a scan of the whole file gives, for a file
// store and a memory store, and that a pin added later is found (the
// index belongs to one parse and is built again for the next).
func TestPinnedForMatchesScan(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com").Public()
	file := bigStore(t, 300, alice)
	data, err := os.ReadFile(file.path)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := NewMemoryTrustStore(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]*TrustStore{"file": file, "memory": mem} {
		t.Run(name, func(t *testing.T) {
			check := func(pkid string, want int) {
				t.Helper()
				got, err := store.pinnedFor(pkid)
				if err != nil {
					t.Fatal(err)
				}
				scan, err := store.matching(func(e *TrustEntry) bool { return e.Key.Pkid == pkid })
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != want || !reflect.DeepEqual(got, scan) {
					t.Fatalf("pinnedFor(%q) = %d entries %v, a scan finds %v", pkid, len(got), got, scan)
				}
				e, ok, err := store.Lookup(pkid)
				if err != nil || ok != (want > 0) || ok && !reflect.DeepEqual(e, scan[0]) {
					t.Fatalf("Lookup(%q) = %v, %v, %v; a scan finds %v", pkid, e, ok, err, scan)
				}
			}
			for i := range 300 {
				check(fmt.Sprintf("agent%d@example.com", i), 1)
			}
			check("alice@example.com", 1)
			check("nobody@example.com", 0)
			late := testKey(t, Ed25519, "late@example.com").Public()
			if _, err := store.PinFirstUse(late, SourceTOFU, "LATE"); err != nil {
				t.Fatal(err)
			}
			check("late@example.com", 1)
			if err := store.Revoke("alice@example.com", nil); err != nil {
				t.Fatal(err)
			}
			got, _ := store.pinnedFor("alice@example.com")
			if len(got) != 1 || !got[0].Revoked {
				t.Fatalf("after Revoke: %+v", got)
			}
		})
	}
}

// BenchmarkVerifyPinnedStore verifies a 1 KiB envelope against a trust
// store holding 1 or 10 000 pins: looking the pin up must not cost in
// proportion to the store (a shared relay's tenth month).
func BenchmarkVerifyPinnedStore(b *testing.B) {
	k, text := bench1KiB(b)
	env, err := envelope.NewReader(strings.NewReader(text)).Next()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v := &Verifier{Store: bigStore(b, n, k.Public())}
			for b.Loop() {
				if r := v.Verify(context.Background(), env); r.Status != StatusVerified {
					b.Fatal(r.Err)
				}
			}
		})
	}
}

// TestTrustStoreLongLine: a line too long to read is an error naming the
// file and the line, as every other malformed line is.
func TestTrustStoreLongLine(t *testing.T) {
	s := newStore(t)
	os.MkdirAll(filepath.Dir(s.Path()), 0o700)
	os.WriteFile(s.Path(), []byte("# comment\n\n#"+strings.Repeat("x", 70<<10)+"\n"), 0o644)
	_, err := s.Entries()
	if !errors.Is(err, ErrTrustStore) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), s.Path()) {
		t.Errorf("Entries = %v, want ErrTrustStore naming %s line 3", err, s.Path())
	}
}

// TestByteOrderMark: a trust store or key file saved by an editor that
// starts files with a UTF-8 BOM reads as without it. Before, the store's
// first line was an entry "\ufeff#…" (the whole store refused) or its
// first pin belonged to the key id "\ufeffa@x.org", so a signature by
// a@x.org found no pin and an announced key was pinned on first use.
func TestByteOrderMark(t *testing.T) {
	k := testKey(t, Ed25519, "a@x.org")
	s := newStore(t)
	if err := s.Add(k.Public()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.Path())
	noComments := data[bytes.LastIndex(data, []byte("\na@x.org"))+1:]
	for _, c := range []struct {
		name string
		text []byte
	}{{"with comments", data}, {"entry first", noComments}} {
		name := c.name
		s := newStore(t)
		os.MkdirAll(filepath.Dir(s.Path()), 0o700)
		os.WriteFile(s.Path(), append([]byte("\ufeff"), c.text...), 0o644)
		if e, ok, err := s.Lookup("a@x.org"); err != nil || !ok || !e.Key.Equal(k.Public()) {
			t.Errorf("%s: store with a BOM: Lookup = %+v, %v, %v", name, e, ok, err)
		}
		other := testKey(t, Ed25519, "a@x.org")
		if r := (&Verifier{Store: s}).Verify(context.Background(), signed(t, other, plainEnv, &SignOptions{Announce: true})); r.Status != StatusKeyChanged {
			t.Errorf("%s: store with a BOM: another key for a@x.org = %s, want key-changed", name, r.Status)
		}
	}
	for name, text := range map[string]string{"public": string(MarshalPublicKey(k.Public())), "public line": k.Public().String()} {
		if got, err := ParsePublicKey([]byte("\ufeff"+text), ""); err != nil || !got.Equal(k.Public()) || got.Pkid != "a@x.org" {
			t.Errorf("%s key file with a BOM: %v, %v", name, got, err)
		}
	}
	priv, _ := MarshalPrivateKey(k, testNow)
	if got, err := ParsePrivateKey(append([]byte("\ufeff"), priv...), ""); err != nil || !got.Public().Equal(k.Public()) {
		t.Errorf("private key file with a BOM: %v, %v", got, err)
	}
}

// TestRepinKeepsSeen: re-pinning a key id after key-changed (trust pin)
// keeps whom the key was seen from, as it keeps its holder: a bare JWS
// without Pkid: from that sender, verified before the key changed, is
// verified under the new key after the re-pin, not unknown-key.
func TestRepinKeepsSeen(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := &Verifier{Store: store}
	text := plainEnv + "[[END]]\n" // from ALICE
	old := testKey(t, Ed25519, "alice-k")
	wantStatus(t, "first", v.Verify(ctx, signed(t, old, text, &SignOptions{Form: FormBareJWS, Announce: true})), StatusFirstUse)
	wantStatus(t, "bare", v.Verify(ctx, signed(t, old, text, &SignOptions{Form: FormBareJWS})), StatusVerified)
	k := testKey(t, Ed25519, "alice-k")
	wantStatus(t, "new key", v.Verify(ctx, signed(t, k, text, &SignOptions{Form: FormBareJWS, Announce: true})), StatusKeyChanged)
	if err := store.Pin(k.Public()); err != nil {
		t.Fatal(err)
	}
	if e, _, _ := store.Lookup("alice-k"); e.Seen != "ALICE" {
		t.Errorf("after Pin, entry = %+v; want seen ALICE kept", e)
	}
	wantStatus(t, "bare after re-pin", v.Verify(ctx, signed(t, k, text, &SignOptions{Form: FormBareJWS})), StatusVerified)
}

// TestTrustStoreThroughSymlink: a trust store path that is a symlink (a
// user's known_keys linked to the relay's trust_file) is written through:
// the pin or revocation lands in the file the link names, which other
// processes read, and the link stays. Before, the rename replaced the
// link with a file of its own, so a `crosstalk trust revoke` never reached
// the relay.
func TestTrustStoreThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "relay", "known_keys")
	os.MkdirAll(filepath.Dir(real), 0o700)
	relay := NewTrustStore(real)
	k := testKey(t, Ed25519, "a@x.org")
	if err := relay.Add(k.Public()); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "user", "known_keys")
	os.MkdirAll(filepath.Dir(link), 0o700)
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	if err := NewTrustStore(link).Revoke("a@x.org", nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v, %v", fi.Mode(), err)
	}
	if e, ok, err := relay.Lookup("a@x.org"); err != nil || !ok || !e.Revoked {
		t.Errorf("the file the link names: %+v, %v, %v; want a@x.org revoked", e, ok, err)
	}
}

// TestTrustStoreThroughDanglingSymlink: a link to a trust file that does
// not exist yet (the relay has pinned nothing so far) is written through
// too, the first pin creating the file it names; before, the rename
// replaced the link with a file of its own, and the two stores parted.
func TestTrustStoreThroughDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "relay", "known_keys")
	os.MkdirAll(filepath.Dir(real), 0o700)
	user := filepath.Join(dir, "user")
	os.MkdirAll(user, 0o700)
	for _, tc := range []struct{ name, target string }{
		{"absolute", real},
		{"relative", filepath.Join("..", "relay", "known_keys")},
	} {
		os.Remove(real)
		link := filepath.Join(user, "known_keys-"+tc.name)
		if err := os.Symlink(tc.target, link); err != nil {
			t.Skip("no symlinks here:", err)
		}
		k := testKey(t, Ed25519, tc.name+"@x.org")
		if err := NewTrustStore(link).Add(k.Public()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: the symlink was replaced: %v, %v", tc.name, fi.Mode(), err)
		}
		if _, ok, err := NewTrustStore(real).Lookup(tc.name + "@x.org"); err != nil || !ok {
			t.Errorf("%s: the file the link names does not hold the pin: %v, %v", tc.name, ok, err)
		}
	}
}

// TestFirstUsePinsBounded: first use pins at most MaxFirstUsePins keys
// held by one sender and as many seen in its name (seen=), each counted
// apart — so pins seen by mail never use up the sender's own — revoked
// ones included, and names the way out; another sender, and pins by hand,
// are not held back; removing one makes room.
func TestFirstUsePinsBounded(t *testing.T) {
	s := newStore(t)
	key := func(i int) *PublicKey {
		k, err := GenerateKey(Ed25519, fmt.Sprintf("k%d@mallory.example", i))
		if err != nil {
			t.Fatal(err)
		}
		return k.Public()
	}
	for i := range 2 * MaxFirstUsePins {
		var err error
		if i%2 == 0 {
			_, err = s.PinFirstUse(key(i), SourceTOFU, "mallory")
		} else {
			_, err = s.PinFirstUseSeen(key(i), SourceTOFU, "MALLORY")
		}
		if err != nil {
			t.Fatalf("pin %d: %v", i, err)
		}
	}
	if err := s.Revoke("k0@mallory.example", nil); err != nil {
		t.Fatal(err)
	}
	next := 2 * MaxFirstUsePins
	for _, seen := range []bool{false, true} {
		pin := s.PinFirstUse
		if seen {
			pin = s.PinFirstUseSeen
		}
		_, err := pin(key(next), SourceTOFU, "mallory")
		if !errors.Is(err, ErrTooManyPins) || !strings.Contains(err.Error(), "trust remove") {
			t.Fatalf("pin %d for one sender (seen %v) = %v, want ErrTooManyPins naming trust remove", MaxFirstUsePins+1, seen, err)
		}
		if _, ok, _ := s.Lookup(fmt.Sprintf("k%d@mallory.example", next)); ok {
			t.Fatal("the refused key was pinned")
		}
	}
	if _, err := s.PinFirstUse(key(100), SourceTOFU, "alice"); err != nil {
		t.Errorf("another sender: %v", err)
	}
	if err := s.Add(key(101)); err != nil {
		t.Errorf("a pin by hand: %v", err)
	}
	if err := s.Remove("k2@mallory.example"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PinFirstUse(key(next), SourceTOFU, "mallory"); err != nil {
		t.Errorf("after a removal: %v", err)
	}
}

// TestSeenPinsBoundedOverall: mail lets anyone write in any sender's
// name, so the per-sender bound did not bound the store: a stranger
// mailing under a new name each time pinned a key each time (and every
// pin rewrites the file). Seen pins are now bounded over all senders;
// a token holder's own first use is not.
func TestSeenPinsBoundedOverall(t *testing.T) {
	// Each pin rewrites the file: the bound's logic with 1024 pins is
	// the same as with 40, at a fortieth of the cost.
	defer func(n int) { seenPinsLimit = n }(seenPinsLimit)
	seenPinsLimit = 40
	s := newStore(t)
	key := func(i int) *PublicKey {
		k, err := GenerateKey(Ed25519, fmt.Sprintf("k%d@spam.example", i))
		if err != nil {
			t.Fatal(err)
		}
		return k.Public()
	}
	for i := range seenPinsLimit {
		if _, err := s.PinFirstUseSeen(key(i), SourceTOFU, fmt.Sprintf("name%d", i)); err != nil {
			t.Fatalf("seen pin %d: %v", i, err)
		}
	}
	_, err := s.PinFirstUseSeen(key(seenPinsLimit), SourceTOFU, "yet-another-name")
	if !errors.Is(err, ErrTooManyPins) || !strings.Contains(err.Error(), "trust remove") {
		t.Fatalf("seen pin %d under a new name = %v, want ErrTooManyPins naming trust remove", seenPinsLimit+1, err)
	}
	if _, ok, _ := s.Lookup(fmt.Sprintf("k%d@spam.example", seenPinsLimit)); ok {
		t.Fatal("the refused key was pinned")
	}
	if _, err := s.PinFirstUse(key(seenPinsLimit+1), SourceTOFU, "claude"); err != nil {
		t.Errorf("a holder's own first use past the seen bound: %v", err)
	}
	if err := s.Remove("k0@spam.example"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PinFirstUseSeen(key(seenPinsLimit+2), SourceTOFU, "yet-another-name"); err != nil {
		t.Errorf("a seen pin after one was removed: %v", err)
	}
}

// TestTrustStoreUnreadable: a store that cannot be read or parsed — a
// directory, garbage — is ErrTrustStore naming the file, for readers and
// for the Verifier's result, also with explicit keys (--key), where the
// store says whether the key was revoked: that verified before, the
// revocation unread.
func TestTrustStoreUnreadable(t *testing.T) {
	k := testKey(t, Ed25519, "a")
	for _, tt := range []struct {
		name string
		make func(path string) error
	}{
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("\x00\x01garbage\xff\n"), 0o600) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			os.MkdirAll(filepath.Dir(s.Path()), 0o700)
			if err := tt.make(s.Path()); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Entries(); !errors.Is(err, ErrTrustStore) || !strings.Contains(err.Error(), s.Path()) {
				t.Errorf("Entries = %v, want ErrTrustStore naming %s", err, s.Path())
			}
			env := signed(t, k, plainEnv, &SignOptions{Announce: true})
			for _, v := range []*Verifier{{Store: s}, {Store: s, Keys: []*PublicKey{k.Public()}}} {
				r := v.Verify(context.Background(), env)
				if r.Status.OK() || !errors.Is(r.Err, ErrTrustStore) || !strings.Contains(r.Err.Error(), s.Path()) {
					t.Errorf("Verify (%d explicit keys) = %s, %v; want a failure wrapping ErrTrustStore naming the file", len(v.Keys), r.Status, r.Err)
				}
			}
		})
	}
}

// TestTrustStoreOnBadFile: with OnBadFile, readers go on with the last
// good version of a file that turns bad — what they read or the store
// wrote — and report the error once per error, then nil when it is
// fixed; writers fail meanwhile. Without a good read before, the error
// stands.
func TestTrustStoreOnBadFile(t *testing.T) {
	s := newStore(t)
	var reports []error
	s.OnBadFile = func(err error) { reports = append(reports, err) }
	a, b := testKey(t, Ed25519, "a"), testKey(t, Ed25519, "b")
	if err := s.Add(a.Public()); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke("a", nil); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s.Path(), append(append([]byte(nil), good...), "garbage\n"...), 0o644)
	for range 2 {
		e, ok, err := s.Lookup("a")
		if err != nil || !ok || !e.Revoked {
			t.Errorf("Lookup(a) on a bad file = %+v, %v, %v; want the last good entry, revoked", e, ok, err)
		}
	}
	if len(reports) != 1 || !errors.Is(reports[0], ErrTrustStore) || !strings.Contains(reports[0].Error(), s.Path()) {
		t.Errorf("OnBadFile got %v; want one ErrTrustStore naming %s", reports, s.Path())
	}
	if err := s.Add(b.Public()); !errors.Is(err, ErrTrustStore) {
		t.Errorf("Add on a bad file = %v, want ErrTrustStore", err)
	}
	os.WriteFile(s.Path(), good, 0o644)
	if _, ok, err := s.Lookup("a"); !ok || err != nil {
		t.Errorf("Lookup(a) on the fixed file = %v, %v", ok, err)
	}
	if len(reports) != 2 || reports[1] != nil {
		t.Errorf("OnBadFile got %v; want the error, then nil", reports)
	}

	fresh := NewTrustStore(s.Path())
	fresh.OnBadFile = func(err error) { t.Errorf("OnBadFile(%v) without a good read", err) }
	os.WriteFile(s.Path(), []byte("garbage\n"), 0o644)
	if _, err := fresh.Entries(); !errors.Is(err, ErrTrustStore) {
		t.Errorf("Entries of a bad file, never read good = %v, want ErrTrustStore", err)
	}
}

// TestRevokedUnderAnyKeyID: the sig line's pkid= is outside the signed
// bytes, so anyone can take an old envelope the revoked key signed and
// name another key id in it — a Cyrillic lookalike, a fresh one. The key
// is revoked all the same: not verified with the key given, not pinned on
// first use (the envelope announces it), not verified under another key
// id it was pinned to before (docs/signing.md §7).
func TestRevokedUnderAnyKeyID(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, Ed25519, "alice@example.com")
	old, err := Sign([]byte(plainEnv), k, &SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	relabel := func(pkid string) *envelope.Envelope {
		return readEnv(t, strings.Replace(string(old), "pkid=alice@example.com;", "pkid="+pkid+";", 1))
	}
	// setup returns a store where alice@example.com's key is revoked.
	setup := func(t *testing.T) *TrustStore {
		store := newStore(t)
		wantStatus(t, "first use", (&Verifier{Store: store}).Verify(ctx, relabel("alice@example.com")), StatusFirstUse)
		if err := store.Revoke("alice@example.com", nil); err != nil {
			t.Fatal(err)
		}
		return store
	}
	for _, pkid := range []string{"alice@example.com", "\u0430lice@example.com", "Alice@example.com", "mallory@example.net"} {
		t.Run(pkid, func(t *testing.T) {
			store := setup(t)
			before, _ := store.Bytes()
			for name, v := range map[string]*Verifier{
				"first use": {Store: store},
				"no TOFU":   {Store: store, NoTOFU: true},
				"--key":     {Store: store, Keys: []*PublicKey{k.Public()}},
			} {
				r := v.Verify(ctx, relabel(pkid))
				wantStatus(t, name, r, StatusRevoked)
				if !errors.Is(r.Err, ErrRevoked) {
					t.Errorf("%s: Err = %v, want ErrRevoked", name, r.Err)
				}
			}
			if after, _ := store.Bytes(); !bytes.Equal(before, after) {
				t.Errorf("the store changed:\n%s", after)
			}
		})
	}
	t.Run("pinned under another key id first", func(t *testing.T) {
		store := newStore(t)
		v := &Verifier{Store: store}
		wantStatus(t, "first use as bob", v.Verify(ctx, relabel("bob@example.com")), StatusFirstUse)
		wantStatus(t, "first use as alice", v.Verify(ctx, relabel("alice@example.com")), StatusFirstUse)
		wantStatus(t, "as bob", v.Verify(ctx, relabel("bob@example.com")), StatusVerified)
		if err := store.Revoke("alice@example.com", nil); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "as bob after alice's revocation", v.Verify(ctx, relabel("bob@example.com")), StatusRevoked)
	})
	t.Run("PinFirstUse", func(t *testing.T) {
		store := setup(t)
		pub := *k.Public()
		pub.Pkid = "\u0430lice@example.com"
		e, err := store.PinFirstUse(&pub, SourceTOFU, "mallory")
		if err != nil || !e.Revoked {
			t.Errorf("PinFirstUse(revoked key, other key id) = %+v, %v; want the revoked entry", e, err)
		}
		if _, ok, _ := store.Lookup(pub.Pkid); ok {
			t.Errorf("%s pinned", pub.Pkid)
		}
	})
}

// TestConcurrentFirstUsesOfOneKeyID: eight verifiers, each with its own
// TrustStore on one file, verify at once eight envelopes that announce
// eight different keys for the same new key id. Exactly one is a first
// use and pinned; every other is key-changed (never a second pin, never
// a first use reported for a key the store does not hold). Run with -race.
func TestConcurrentFirstUsesOfOneKeyID(t *testing.T) {
	for round := range 5 {
		path := newStore(t).Path()
		const n = 8
		envs := make([]*envelope.Envelope, n)
		keys := make([]*PrivateKey, n)
		for i := range envs {
			keys[i] = testKey(t, Ed25519, "new@example.com")
			envs[i] = signed(t, keys[i], plainEnv, &SignOptions{Announce: true})
		}
		results := make([]Result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = (&Verifier{Store: NewTrustStore(path)}).Verify(context.Background(), envs[i])
			}()
		}
		wg.Wait()
		es, err := NewTrustStore(path).Entries()
		if err != nil || len(es) != 1 {
			t.Fatalf("round %d: store = %v, %v; want one pin", round, es, err)
		}
		firstUses := 0
		for i, r := range results {
			switch r.Status {
			case StatusFirstUse:
				firstUses++
				if !es[0].Key.Equal(keys[i].Public()) {
					t.Errorf("round %d: first use of key %d, but the store holds another", round, i)
				}
			case StatusKeyChanged:
			default:
				t.Errorf("round %d: key %d: %s (%v), want first-use or key-changed", round, i, r.Status, r.Err)
			}
		}
		if firstUses != 1 {
			t.Errorf("round %d: %d first uses, want 1", round, firstUses)
		}
	}
}

// TestTrustStoreRestat checks when a reader sees a change of the file: a
// change another process wrote once restatAfter has passed since it (the
// reader reuses a stat that recent), a change the store itself wrote at
// the next read, even while other readers keep stating the file.
func TestTrustStoreRestat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known_keys")
	relay, other := NewTrustStore(path), NewTrustStore(path)
	k := testKey(t, Ed25519, "a@x.org")
	if err := other.Add(k.Public()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := relay.Lookup("a@x.org"); err != nil || !ok {
		t.Fatalf("Lookup() = %v, %v; want the key another store added", ok, err)
	}
	if err := other.Revoke("a@x.org", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(restatAfter + time.Millisecond)
	if e, _, err := relay.Lookup("a@x.org"); err != nil || !e.Revoked {
		t.Fatalf("Lookup() %v after another store's revocation = %+v, %v; want it revoked", restatAfter, e, err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					relay.Lookup("a@x.org")
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 200 {
		pkid := fmt.Sprintf("k%d@x.org", i)
		if err := relay.Add(testKey(t, Ed25519, pkid).Public()); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := relay.Lookup(pkid); err != nil || !ok {
			t.Fatalf("Lookup(%s) right after the store added it = %v, %v; want it found", pkid, ok, err)
		}
	}
}

// TestTrustStoreReaderRacingOwnWrite checks that a reader whose parse
// predates this store's own write does not leave that parse in the cache
// for later readers: a reader that began before a revocation finished
// parsing the file, the revocation returned, a second reader cached the
// revoked file; the first reader's stale parse must not replace it while
// the second reader's stat still stands (the clock stopped: well within
// restatAfter).
func TestTrustStoreReaderRacingOwnWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known_keys")
	s := NewTrustStore(path)
	k := testKey(t, Ed25519, "a@x.org")
	if err := s.Add(k.Public()); err != nil {
		t.Fatal(err)
	}
	frozen := sinceEpoch()
	sinceEpoch = func() time.Duration { return frozen }
	defer func() { sinceEpoch, afterParse = func() time.Duration { return time.Since(trustEpoch) }, nil }()
	once := false
	afterParse = func() {
		if once {
			return
		}
		once = true
		if err := s.Revoke("a@x.org", nil); err != nil {
			t.Error(err)
		}
		if e, _, err := s.Lookup("a@x.org"); err != nil || !e.Revoked {
			t.Errorf("Lookup() after the revocation returned = %+v, %v; want it revoked", e, err)
		}
	}
	// The first reader: the cache is empty, so it stats and parses, and
	// the revocation runs before it stores its parse.
	if _, _, err := s.Lookup("a@x.org"); err != nil {
		t.Fatal(err)
	}
	if !once {
		t.Fatal("the reader did not parse the file")
	}
	if e, _, err := s.Lookup("a@x.org"); err != nil || !e.Revoked {
		t.Errorf("Lookup() after a racing reader finished = %+v, %v; want it revoked (the reader's stale parse is served)", e, err)
	}
}
