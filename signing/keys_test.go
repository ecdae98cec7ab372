package signing

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestKeyFiles(t *testing.T) {
	for _, alg := range []Alg{Ed25519, SECP256R1} {
		t.Run(string(alg), func(t *testing.T) {
			dir := t.TempDir()
			k := testKey(t, alg, "alice@example.com")
			path := filepath.Join(dir, "alice.key")
			if err := WritePrivateKeyFile(path, k); err != nil {
				t.Fatal(err)
			}
			if err := WritePublicKeyFile(path+".pub", k.Public()); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
				t.Errorf("private key file mode = %04o, want 0600", fi.Mode().Perm())
			}
			if err := WritePrivateKeyFile(path, k); err == nil {
				t.Error("WritePrivateKeyFile over an existing file = nil error")
			}
			got, err := LoadPrivateKey(path, "")
			if err != nil {
				t.Fatal(err)
			}
			if got.Pkid != k.Pkid || !got.Public().Equal(k.Public()) {
				t.Errorf("LoadPrivateKey = %v, want %v", got, k)
			}
			pub, err := LoadPublicKey(path+".pub", "")
			if err != nil {
				t.Fatal(err)
			}
			if pub.Pkid != k.Pkid || !pub.Equal(k.Public()) {
				t.Errorf("LoadPublicKey = %v, want %v", pub, k.Public())
			}
			if over, _ := LoadPublicKey(path+".pub", "other"); over == nil || over.Pkid != "other" {
				t.Errorf("LoadPublicKey with a key id = %v, want key id other", over)
			}
			if _, err := LoadPublicKey(path, ""); !errors.Is(err, ErrKeyFile) {
				t.Errorf("LoadPublicKey(private key file) = %v, want ErrKeyFile", err)
			}
			if _, err := ParsePrivateKey(MarshalPublicKey(k.Public()), ""); !errors.Is(err, ErrKeyFile) {
				t.Errorf("ParsePrivateKey(public key file) = %v, want ErrKeyFile", err)
			}

			if runtime.GOOS != "windows" {
				for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660} {
					if err := os.Chmod(path, mode); err != nil {
						t.Fatal(err)
					}
					if _, err := LoadPrivateKey(path, ""); !errors.Is(err, ErrInsecureKeyFile) {
						t.Errorf("LoadPrivateKey(mode %04o) = %v, want ErrInsecureKeyFile", mode, err)
					}
				}
			}
		})
	}
}

func TestPrivateKeyNotPrinted(t *testing.T) {
	k := testKey(t, Ed25519, "alice")
	data, err := MarshalPrivateKey(k, testNow)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Fields(string(data[strings.LastIndex(string(data), "ed25519-private"):]))[2]
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), fmt.Sprintf("%v %+v %#v", *k, *k, *k)} {
		if strings.Contains(s, secret) || strings.Contains(s, fmt.Sprint([]byte(k.Key.(interface{ Seed() []byte }).Seed()))) {
			t.Errorf("printing a private key shows its material: %s", s)
		}
	}
	ek := testKey(t, SECP256R1, "bob")
	if s := fmt.Sprintf("%+v %#v", ek, *ek); strings.Contains(s, "D:") {
		t.Errorf("printing an ECDSA private key shows its scalar: %s", s)
	}
}

func TestParseKeyErrors(t *testing.T) {
	k32 := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	k31 := base64.RawURLEncoding.EncodeToString(make([]byte, 31))
	for _, tt := range []struct {
		name, data string
		want       error
	}{
		{"empty", "", ErrKeyFile},
		{"comments only", "# nothing\n\n", ErrKeyFile},
		{"two fields", "ed25519 " + k32, ErrKeyFile},
		{"two keys", "ed25519 a " + k32 + "\ned25519 b " + k32, ErrKeyFile},
		{"unknown alg", "rsa a " + k32, ErrUnsupportedAlg},
		{"short key", "ed25519 a " + k31, ErrKeyFile},
		{"truncated base64", "ed25519 a " + k32[:len(k32)-2], ErrKeyFile},
		{"bad base64", "ed25519 a " + k32[:10] + "*" + k32[11:], ErrKeyFile},
		{"p256 not a point", "secp256r1 a " + base64.RawURLEncoding.EncodeToString(make([]byte, 65)), ErrKeyFile},
		{"bad PEM", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", ErrKeyFile},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParsePublicKey([]byte(tt.data), "x"); !errors.Is(err, tt.want) {
				t.Errorf("ParsePublicKey = %v, want %v", err, tt.want)
			} else if !strings.HasPrefix(err.Error(), "signing: ") {
				t.Errorf("error %q does not start with signing:", err)
			}
		})
	}
	for _, tt := range []struct{ name, data string }{
		{"short seed", "ed25519-private a " + k31},
		{"zero p256 scalar", "secp256r1-private a " + k32},
		{"unknown alg", "ed448-private a " + k32},
	} {
		if _, err := ParsePrivateKey([]byte(tt.data), ""); err == nil {
			t.Errorf("ParsePrivateKey(%s) = nil error", tt.name)
		} else if strings.Contains(err.Error(), k32) {
			t.Errorf("ParsePrivateKey(%s) error shows the key: %v", tt.name, err)
		}
	}
	pemPub := "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA5NCXBC/h80o6gPLqLUoxutAE4TmAn2e4tVVfp08HeKA=\n-----END PUBLIC KEY-----\n"
	if _, err := ParsePublicKey([]byte(pemPub), ""); !errors.Is(err, ErrKeyFile) {
		t.Errorf("ParsePublicKey(PEM without key id) = %v, want ErrKeyFile", err)
	}
	if _, err := ParsePrivateKey([]byte(pemPub), "x"); !errors.Is(err, ErrKeyFile) {
		t.Errorf("ParsePrivateKey(PEM public key) = %v, want ErrKeyFile", err)
	}
	for _, id := range []string{"", "a b", "a;b", "a\tb", strings.Repeat("x", 257), "a\x00"} {
		if _, err := GenerateKey(Ed25519, id); err == nil {
			t.Errorf("GenerateKey(key id %q) = nil error", id)
		}
	}
	if _, err := GenerateKey("rsa", "a"); !errors.Is(err, ErrUnsupportedAlg) {
		t.Errorf("GenerateKey(rsa) = %v", err)
	}
}

func TestVerifyPayloadWrongLengths(t *testing.T) {
	k := testKey(t, Ed25519, "a")
	for _, n := range []int{0, 63, 65, 128} {
		if err := VerifyPayload(k.Public(), []byte("x\n"), make([]byte, n)); !errors.Is(err, ErrBadSignature) {
			t.Errorf("VerifyPayload(%d-byte sig) = %v", n, err)
		}
	}
	if err := VerifyPayload(&PublicKey{Pkid: "a"}, []byte("x\n"), make([]byte, 64)); !errors.Is(err, ErrUnsupportedAlg) {
		t.Errorf("VerifyPayload(nil key) = %v", err)
	}
}
