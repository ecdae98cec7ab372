package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"golang.org/x/text/unicode/norm"
)

const canonDir = "signing/canon-v1.1-rc1"

// publishedVector is one of the three canon-v1.1-rc1 vectors.
type publishedVector struct {
	name    string
	payload []byte // the lines under "Payload:", each LF-terminated
	sha     string
	jws     string
}

func readPublished(t testing.TB) []publishedVector {
	t.Helper()
	paths, err := fs.Glob(fixtures.SigningFS, canonDir+"/vector*.txt")
	if err != nil || len(paths) != 3 {
		t.Fatalf("published vectors: %v, %d files, want 3", err, len(paths))
	}
	var out []publishedVector
	for _, p := range paths {
		data, err := fs.ReadFile(fixtures.SigningFS, p)
		if err != nil {
			t.Fatal(err)
		}
		v := publishedVector{name: path.Base(p)}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			switch l := lines[i]; {
			case l == "Payload:":
				for i++; i < len(lines) && lines[i] != ""; i++ {
					v.payload = append(v.payload, lines[i]+"\n"...)
				}
			case strings.HasPrefix(l, "SHA-256: "):
				v.sha = strings.TrimPrefix(l, "SHA-256: ")
			case l == "Detached JWS:":
				v.jws = strings.TrimSpace(lines[i+1])
			}
		}
		if v.payload == nil || v.sha == "" || v.jws == "" {
			t.Fatalf("%s: could not read payload, SHA-256 and JWS", p)
		}
		out = append(out, v)
	}
	return out
}

func canonKeys(t testing.TB) (*PrivateKey, *PublicKey) {
	t.Helper()
	privPEM, err := fs.ReadFile(fixtures.SigningFS, canonDir+"/private.pem")
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := fs.ReadFile(fixtures.SigningFS, canonDir+"/public.pem")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM, "canon-test@example.com")
	if err != nil {
		t.Fatalf("ParsePrivateKey(private.pem) = %v", err)
	}
	pub, err := ParsePublicKey(pubPEM, "canon-test@example.com")
	if err != nil {
		t.Fatalf("ParsePublicKey(public.pem) = %v", err)
	}
	if !priv.Public().Equal(pub) {
		t.Fatal("public.pem is not the public half of private.pem")
	}
	return priv, pub
}

func readEnv(t testing.TB, text string) *envelope.Envelope {
	t.Helper()
	env, err := envelope.NewReader(strings.NewReader(text)).Next()
	if err != nil {
		t.Fatalf("reading envelope: %v\n%s", err, text)
	}
	return env
}

// TestPublishedVectors checks the canon-v1.1-rc1 vectors bit for bit
// (docs/design.md §4.1): payload bytes, SHA-256, verification in every sig line
// form, and re-signing reproducing the published signatures.
func TestPublishedVectors(t *testing.T) {
	priv, pub := canonKeys(t)
	for _, v := range readPublished(t) {
		t.Run(v.name, func(t *testing.T) {
			sum := sha256.Sum256(v.payload)
			if got := hex.EncodeToString(sum[:]); got != v.sha {
				t.Fatalf("SHA-256(payload lines) = %s, want %s", got, v.sha)
			}
			protected, sigB64, ok := strings.Cut(v.jws, "..")
			if !ok || protected != base64.RawURLEncoding.EncodeToString([]byte(ProtectedHeader(Ed25519))) {
				t.Fatalf("published protected header %q is not ours", protected)
			}
			wantSig, err := base64.RawURLEncoding.DecodeString(sigB64)
			if err != nil {
				t.Fatal(err)
			}
			if !ed25519.Verify(pub.Key.(ed25519.PublicKey), SigningInput(Ed25519, v.payload), wantSig) {
				t.Fatal("bare ed25519.Verify of the published signature failed")
			}
			got, err := SignPayload(priv, v.payload)
			if err != nil || !bytes.Equal(got, wantSig) {
				t.Fatalf("SignPayload = %x, %v; want the published %x", got, err, wantSig)
			}

			// The vector as an envelope, in every sig line form.
			forms := map[string]string{
				"bare JWS":         v.jws,
				"sig=JWS":          "ed25519:pkid=canon-test@example.com;sig=" + v.jws,
				"plain base64url":  "ed25519:pkid=canon-test@example.com;sig=" + sigB64,
				"plain url padded": "ed25519:pkid=canon-test@example.com;sig=" + base64.URLEncoding.EncodeToString(wantSig),
				"plain std":        "ed25519:pkid=canon-test@example.com; sig=" + base64.RawStdEncoding.EncodeToString(wantSig),
				"plain std padded": "ed25519: pkid=canon-test@example.com ;sig=" + base64.StdEncoding.EncodeToString(wantSig) + "  ",
			}
			for name, value := range forms {
				text := string(v.payload) + "sig: " + value + "\n[[END]]\n"
				env := readEnv(t, text)
				p, err := Payload(env)
				if err != nil || !bytes.Equal(p, v.payload) {
					t.Fatalf("%s: Payload = %q, %v; want %q", name, p, err, v.payload)
				}
				if r := Verify(env, pub); r.Status != StatusVerified {
					t.Errorf("%s: Verify = %s (%v), want verified", name, r.Status, r.Err)
				}
			}

			// Re-signing the envelope reproduces the published signature.
			signed, err := Sign([]byte(string(v.payload)+"sig: none\n[[END]]\n"), priv, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := string(v.payload) + "sig: ed25519:pkid=canon-test@example.com;sig=" + sigB64 + "\n[[END]]\n"
			if string(signed) != want {
				t.Errorf("Sign = \n%s\nwant\n%s", signed, want)
			}
			bare, err := Sign([]byte(v.payload), priv, &SignOptions{Form: FormBareJWS})
			if err != nil {
				t.Fatal(err)
			}
			if want := string(v.payload) + "sig: " + v.jws + "\n[[END]]\n"; string(bare) != want {
				t.Errorf("Sign(bare JWS form) = \n%s\nwant\n%s", bare, want)
			}

			// Decomposed input gives the same payload (NFC).
			nfd := readEnv(t, norm.NFD.String(string(v.payload)+"sig: "+v.jws+"\n[[END]]\n"))
			if p, _ := Payload(nfd); !bytes.Equal(p, v.payload) {
				t.Errorf("Payload(NFD input) = %q, want %q", p, v.payload)
			}
			if r := Verify(nfd, pub); r.Status != StatusVerified {
				t.Errorf("Verify(NFD input) = %s (%v), want verified", r.Status, r.Err)
			}
		})
	}
}

// vectorFile is one of our vectors: a header, a blank line, the input.
type vectorFile struct {
	name, comment, expect, key, sha string
	text                            string
}

func readVectors(t testing.TB) []vectorFile {
	t.Helper()
	paths, err := fs.Glob(fixtures.SigningFS, "signing/vectors/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no signing vectors found (%v)", err)
	}
	var out []vectorFile
	for _, p := range paths {
		data, err := fs.ReadFile(fixtures.SigningFS, p)
		if err != nil {
			t.Fatal(err)
		}
		head, text, ok := strings.Cut(string(data), "\n\n")
		if !ok {
			t.Fatalf("%s: no blank line after the header", p)
		}
		v := vectorFile{name: strings.TrimSuffix(path.Base(p), ".txt"), text: text}
		for _, l := range strings.Split(head, "\n") {
			k, val, _ := strings.Cut(l, ": ")
			switch k {
			case "comment":
				v.comment = val
			case "expect":
				v.expect = val
			case "key":
				v.key = val
			case "payload-sha256":
				v.sha = val
			default:
				t.Fatalf("%s: unknown header line %q", p, l)
			}
		}
		out = append(out, v)
	}
	return out
}

func vectorKey(t testing.TB, name string) *PublicKey {
	t.Helper()
	data, err := fs.ReadFile(fixtures.SigningFS, "signing/keys/"+name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePublicKey(data, "")
	if err != nil {
		t.Fatalf("ParsePublicKey(%s) = %v", name, err)
	}
	return k
}

func TestVectors(t *testing.T) {
	for _, v := range readVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			env := readEnv(t, v.text)
			r := Verify(env, vectorKey(t, v.key))
			if string(r.Status) != v.expect {
				t.Fatalf("%s: Verify = %s (%v), want %s", v.comment, r.Status, r.Err, v.expect)
			}
			if r.Status.OK() != (r.Err == nil) {
				t.Errorf("Verify = %s with Err %v", r.Status, r.Err)
			}
			if v.sha != "" {
				p, err := Payload(env)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(p)
				if got := hex.EncodeToString(sum[:]); got != v.sha {
					t.Errorf("SHA-256(Payload) = %s, want %s", got, v.sha)
				}
			}
		})
	}
}

// TestVectorKeysLoad checks that the vectors' private test key loads and
// matches its public key.
func TestVectorKeysLoad(t *testing.T) {
	data, err := fs.ReadFile(fixtures.SigningFS, "signing/keys/test-secp256r1.key")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePrivateKey(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if !k.Public().Equal(vectorKey(t, "test-secp256r1.pub")) {
		t.Error("test-secp256r1.key and .pub differ")
	}
}
