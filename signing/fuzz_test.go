package signing

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// keySeeds returns the key files of fixtures/signing (keys/ and the
// published PEM pair); it fails the fuzz target when there are none.
func keySeeds(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for _, glob := range []string{"signing/keys/*", "signing/canon-v1.1-rc1/*.pem"} {
		paths, err := fs.Glob(fixtures.SigningFS, glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			b, err := fs.ReadFile(fixtures.SigningFS, p)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		f.Fatal("no key files found in fixtures/signing")
	}
	return out
}

// isAny reports whether err is one of want.
func isAny(err error, want ...error) bool {
	for _, w := range want {
		if errors.Is(err, w) {
			return true
		}
	}
	return false
}

// FuzzTrustStore checks the known-keys file parser: it never panics, every
// error is ErrTrustStore, and a file it accepts renders to a file that
// parses to the same entries (and comment lines) and renders to the same
// bytes again.
func FuzzTrustStore(f *testing.F) {
	var lines []string
	for _, kf := range keySeeds(f) {
		for _, l := range strings.Split(string(kf), "\n") {
			if c := strings.Fields(l); len(c) == 3 && !strings.HasPrefix(c[0], "#") && !strings.Contains(c[0], "private") {
				lines = append(lines, c[1]+" "+c[0]+" "+c[2])
			}
		}
	}
	if len(lines) == 0 {
		f.Fatal("no public key lines in fixtures/signing/keys")
	}
	f.Add([]byte(storeHeader))
	for i, l := range lines {
		f.Add([]byte(storeHeader + l + " tofu 2025-10-09T17:00:00Z active sender=Brother%20AI\n"))
		f.Add([]byte(l + " tofu 2025-10-09T17:00:00Z active seen=CLA%E2%80%8BUDE\n"))
		f.Add([]byte("# c\n\n" + l + " manual 2025-10-09T19:00:00+02:00 revoked x=y\r\n  # indented\n"))
		f.Add([]byte(l + " dns 2025-10-09T17:00:00.25Z active sender=\n" + lines[(i+1)%len(lines)] + " tofu 2025-10-09T17:00:00Z active\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := parseStore(data)
		if err != nil {
			if !errors.Is(err, ErrTrustStore) {
				t.Fatalf("parseStore(%q) = %v, want ErrTrustStore", data, err)
			}
			return
		}
		out := sf.render()
		again, err := parseStore(out)
		if err != nil {
			t.Fatalf("parseStore(render(parseStore(%q))) = %v\nrendered:\n%s", data, err, out)
		}
		if len(again.lines) != len(sf.lines) {
			t.Fatalf("round trip of %q: %d lines, want %d\nrendered:\n%s", data, len(again.lines), len(sf.lines), out)
		}
		for i, l := range sf.lines {
			a := again.lines[i]
			if (l.entry == nil) != (a.entry == nil) {
				t.Fatalf("round trip of %q: line %d entry %v, want %v", data, i+1, a.entry, l.entry)
			}
			if l.entry == nil {
				if a.raw != l.raw {
					t.Fatalf("round trip of %q: line %d = %q, want %q", data, i+1, a.raw, l.raw)
				}
				continue
			}
			e, g := l.entry, a.entry
			if g.Key.Pkid != e.Key.Pkid || !g.Key.Equal(e.Key) || g.Source != e.Source || !g.FirstSeen.Equal(e.FirstSeen) || g.Revoked != e.Revoked || g.Sender != e.Sender || g.Seen != e.Seen {
				t.Fatalf("round trip of %q: line %d = %+v, want %+v", data, i+1, *g, *e)
			}
		}
		if out2 := again.render(); !bytes.Equal(out2, out) {
			t.Fatalf("render is not idempotent:\n%q\n%q", out, out2)
		}
	})
}

// FuzzParseKey checks the key file parsers (key lines and PEM): they never
// panic, reject with ErrKeyFile, ErrUnsupportedAlg or ErrKeyID, and a key they
// accept has a valid key id and survives a round trip through its key
// file line (String for public keys, the public half for private keys).
func FuzzParseKey(f *testing.F) {
	for _, b := range keySeeds(f) {
		f.Add(b, "")
		f.Add(b, "fuzz@example.org")
	}
	f.Add([]byte("ed25519 a AAAA\ned25519 b AAAA\n"), "")
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"), "x")
	f.Fuzz(func(t *testing.T, data []byte, pkid string) {
		pub, err := ParsePublicKey(data, pkid)
		if err != nil {
			if !isAny(err, ErrKeyFile, ErrUnsupportedAlg, ErrKeyID) {
				t.Fatalf("ParsePublicKey(%q, %q) = %v, want ErrKeyFile, ErrUnsupportedAlg or ErrKeyID", data, pkid, err)
			}
		} else {
			checkPublicRoundTrip(t, pub)
			if pkid != "" && pub.Pkid != pkid {
				t.Fatalf("ParsePublicKey(%q, %q).Pkid = %q", data, pkid, pub.Pkid)
			}
		}
		priv, err := ParsePrivateKey(data, pkid)
		if err != nil {
			if !isAny(err, ErrKeyFile, ErrUnsupportedAlg, ErrKeyID) {
				t.Fatalf("ParsePrivateKey(%q, %q) = %v, want ErrKeyFile, ErrUnsupportedAlg or ErrKeyID", data, pkid, err)
			}
			return
		}
		if priv.Alg() == "" {
			t.Fatalf("ParsePrivateKey(%q, %q) = a key of no algorithm", data, pkid)
		}
		checkPublicRoundTrip(t, priv.Public())
	})
}

// checkPublicRoundTrip checks that k has a valid key id and algorithm and
// that its key file line and its Value parse back to the same key.
func checkPublicRoundTrip(t *testing.T, k *PublicKey) {
	t.Helper()
	if err := checkPkid(k.Pkid); err != nil || k.Alg() == "" {
		t.Fatalf("accepted key %q of algorithm %q: %v", k.Pkid, k.Alg(), err)
	}
	back, err := ParsePublicKey([]byte(k.String()+"\n"), "")
	if err != nil || back.Pkid != k.Pkid || !back.Equal(k) {
		t.Fatalf("ParsePublicKey(%q) = %v, %v; want the same key", k.String(), back, err)
	}
	v, err := ParsePublicKeyValue(k.Pkid, k.Value())
	if err != nil || !v.Equal(k) {
		t.Fatalf("ParsePublicKeyValue(%q) = %v, %v; want the same key", k.Value(), v, err)
	}
}

// FuzzParseKeyValue checks the two one-line key forms from outside: the
// `meta: signing` Public-Key value (ParsePublicKeyValue) and the DNS TXT
// record (ParseDNSRecord). Neither panics, both reject with ErrKeyFile,
// ErrUnsupportedAlg or ErrKeyID, and an accepted key survives its own
// round trip.
func FuzzParseKeyValue(f *testing.F) {
	for _, b := range keySeeds(f) {
		for _, l := range strings.Split(string(b), "\n") {
			if c := strings.Fields(l); len(c) == 3 && !strings.HasPrefix(c[0], "#") {
				f.Add(c[1], c[0]+":"+c[2])
				f.Add(c[1], c[0]+":pk="+c[2]+"; v=1")
			}
		}
	}
	f.Add("a@b.org", "ED25519 : PK = AAAA")
	f.Add("", "secp256r1:pk=")
	f.Fuzz(func(t *testing.T, pkid, value string) {
		k, err := ParsePublicKeyValue(pkid, value)
		if err != nil {
			if !isAny(err, ErrKeyFile, ErrUnsupportedAlg, ErrKeyID) {
				t.Fatalf("ParsePublicKeyValue(%q, %q) = %v, want ErrKeyFile, ErrUnsupportedAlg or ErrKeyID", pkid, value, err)
			}
		} else {
			checkPublicRoundTrip(t, k)
		}
		k, err = ParseDNSRecord(pkid, value)
		if err != nil {
			if !isAny(err, ErrKeyFile, ErrUnsupportedAlg, ErrKeyID) {
				t.Fatalf("ParseDNSRecord(%q, %q) = %v, want ErrKeyFile, ErrUnsupportedAlg or ErrKeyID", pkid, value, err)
			}
			return
		}
		checkPublicRoundTrip(t, k)
		rec := string(k.Alg()) + ":pk=" + b64url(k.Bytes())
		if back, err := ParseDNSRecord(pkid, rec); err != nil || !back.Equal(k) {
			t.Fatalf("ParseDNSRecord(%q, %q) = %v, %v; want the same key", pkid, rec, back, err)
		}
	})
}

// fuzzKeys returns the fixtures' two private test keys: the published
// Ed25519 key (canon-test@example.com) and the P-256 key
// (es256-test@example.com).
func fuzzKeys(f *testing.F) (ed, es *PrivateKey) {
	f.Helper()
	pem, err := fs.ReadFile(fixtures.SigningFS, "signing/canon-v1.1-rc1/private.pem")
	if err != nil {
		f.Fatal(err)
	}
	if ed, err = ParsePrivateKey(pem, "canon-test@example.com"); err != nil {
		f.Fatal(err)
	}
	kf, err := fs.ReadFile(fixtures.SigningFS, "signing/keys/test-secp256r1.key")
	if err != nil {
		f.Fatal(err)
	}
	if es, err = ParsePrivateKey(kf, ""); err != nil {
		f.Fatal(err)
	}
	return ed, es
}

// FuzzVerifier runs the trust policy on whatever envelopes the input
// holds — announced keys (`meta: signing`), bare JWS, REVOKE — against a
// trust store in which the Ed25519 test key is pinned: Verify never
// panics, its Status is a documented one with Err set exactly when it is
// not OK, an OK result names a valid key id and the key it verified
// under, and the trust store file stays readable with valid key ids
// whatever the envelopes announce or revoke. Seeded from
// fixtures/signing/vectors plus announcements and a REVOKE signed with
// the fixtures' test keys.
func FuzzVerifier(f *testing.F) {
	ed, es := fuzzKeys(f)
	for _, v := range readVectors(f) {
		f.Add(v.text)
	}
	sign := func(text string, k *PrivateKey, announce bool) {
		env, err := envelope.NewReader(strings.NewReader(text)).Next()
		if err != nil {
			f.Fatal(err)
		}
		out, err := SignEnvelope(env, k, &SignOptions{Announce: announce})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(out))
	}
	sign(plainEnv, ed, true)
	sign(plainEnv, es, true)
	sign(plainEnv, es, false)
	sign("[[ALICE→@all v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: canon-test@example.com\n\nbody: |\n  compromised\n", ed, false)
	statuses := map[Status]bool{StatusUnsigned: true, StatusVerified: true, StatusFirstUse: true, StatusKeyChanged: true,
		StatusBadSignature: true, StatusUnknownKey: true, StatusRevoked: true}
	f.Fuzz(func(t *testing.T, text string) {
		store := NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
		if _, err := store.PinFirstUse(ed.Public(), SourceManual, "ALICE"); err != nil {
			t.Fatal(err)
		}
		v := &Verifier{Store: store}
		r := envelope.NewReader(strings.NewReader(text))
		for n := 0; n < 8; n++ {
			env, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				continue
			}
			res := v.Verify(t.Context(), env)
			if !statuses[res.Status] || res.Status.OK() != (res.Err == nil) {
				t.Fatalf("Verify(%q) = %s, %v", text, res.Status, res.Err)
			}
			if res.Status.OK() && (checkPkid(res.Pkid) != nil || res.Key == nil || res.Key.Alg() == "") {
				t.Fatalf("Verify(%q) = %s with key id %q, key %v", text, res.Status, res.Pkid, res.Key)
			}
		}
		entries, err := store.Entries()
		if err != nil {
			t.Fatalf("after Verify(%q) the trust store does not read: %v", text, err)
		}
		for _, e := range entries {
			if checkPkid(e.Key.Pkid) != nil || e.Key.Alg() == "" {
				t.Fatalf("after Verify(%q) the trust store holds %+v", text, e)
			}
		}
	})
}
