package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/fixtures"
)

var (
	sig64    = bytes.Repeat([]byte{0xfb}, 64)
	sigURL   = base64.RawURLEncoding.EncodeToString(sig64)
	hdrEd    = base64.RawURLEncoding.EncodeToString([]byte(protectedEdDSA))
	hdrES    = base64.RawURLEncoding.EncodeToString([]byte(protectedES256))
	jwsEd    = hdrEd + ".." + sigURL
	jwsES    = hdrES + ".." + sigURL
	otherHdr = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","b64":true,"crit":["b64","cty","ver"],"cty":"crosstalk/v1.1","typ":"JWT","ver":"1.1-rc1"}`))
)

func TestParseSig(t *testing.T) {
	good := []struct {
		in   string
		want Sig
	}{
		{"ed25519:pkid=alice@example.com;sig=" + sigURL, Sig{Ed25519, "alice@example.com", sig64, FormPlain}},
		{"ED25519:PKID=a;SIG=" + sigURL, Sig{Ed25519, "a", sig64, FormPlain}},
		{" ed25519 : sig=" + sigURL + " ; pkid=bob@keys/2025 ; x-new=1 ", Sig{Ed25519, "bob@keys/2025", sig64, FormPlain}},
		{"ed25519:pkid=a;sig=" + base64.StdEncoding.EncodeToString(sig64), Sig{Ed25519, "a", sig64, FormPlain}},
		{"ed25519:pkid=a;sig=" + base64.RawStdEncoding.EncodeToString(sig64), Sig{Ed25519, "a", sig64, FormPlain}},
		{"ed25519:pkid=a;sig=" + base64.URLEncoding.EncodeToString(sig64), Sig{Ed25519, "a", sig64, FormPlain}},
		{"secp256r1:pkid=bob;sig=" + sigURL, Sig{SECP256R1, "bob", sig64, FormPlain}},
		{"ed25519:pkid=a;sig=" + jwsEd, Sig{Ed25519, "a", sig64, FormJWS}},
		{"secp256r1:pkid=a;sig=" + jwsES, Sig{SECP256R1, "a", sig64, FormJWS}},
		{jwsEd, Sig{Ed25519, "", sig64, FormBareJWS}},
		{jwsES, Sig{SECP256R1, "", sig64, FormBareJWS}},
		{base64.URLEncoding.EncodeToString([]byte(protectedEdDSA)) + ".." + base64.StdEncoding.EncodeToString(sig64), Sig{Ed25519, "", sig64, FormBareJWS}},
	}
	for _, tt := range good {
		got, err := ParseSig(tt.in)
		if err != nil {
			t.Errorf("ParseSig(%q) = %v", tt.in, err)
			continue
		}
		if got.Alg != tt.want.Alg || got.Pkid != tt.want.Pkid || !bytes.Equal(got.Signature, tt.want.Signature) || got.Form != tt.want.Form {
			t.Errorf("ParseSig(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}

	short := base64.RawURLEncoding.EncodeToString(sig64[:63])
	bad := []struct {
		in   string
		want error
	}{
		{"", ErrNotSigned},
		{"none", ErrNotSigned},
		{"NONE", ErrNotSigned},
		{"rsa:pkid=a;sig=" + sigURL, ErrUnsupportedAlg},
		{"ed448:pkid=a;sig=" + sigURL, ErrUnsupportedAlg},
		{"ed25519:sig=" + sigURL, ErrMalformedSig},                                       // no pkid
		{"ed25519:pkid=a", ErrMalformedSig},                                              // no sig
		{"ed25519:pkid=a;sig=", ErrMalformedSig},                                         // empty sig
		{"ed25519:pkid=;sig=" + sigURL, ErrMalformedSig},                                 // empty pkid
		{"ed25519:pkid=a;pkid=b;sig=" + sigURL, ErrMalformedSig},                         // duplicate
		{"ed25519:pkid=a;sig=" + sigURL + ";sig=" + sigURL, ErrMalformedSig},             // duplicate
		{"ed25519:pkid=a;sig=" + short, ErrMalformedSig},                                 // 63 bytes
		{"ed25519:pkid=a;sig=" + sigURL[:len(sigURL)-3], ErrMalformedSig},                // truncated base64
		{"ed25519:pkid=a;sig=" + sigURL + "AA", ErrMalformedSig},                         // 65 bytes... or bad
		{"ed25519:pkid=a;sig=" + sigURL[:10] + "+" + sigURL[11:] + "_", ErrMalformedSig}, // mixed alphabets
		{"ed25519:pkid=a;sig=" + sigURL[:10] + "!" + sigURL[11:], ErrMalformedSig},       // bad character
		{"ed25519:pkid=a;sig=" + sigURL + "=", ErrMalformedSig},                          // bad padding
		{"ed25519:pkid=a;sig=" + sigURL[:len(sigURL)-1] + "B", ErrMalformedSig},          // non-zero trailing bits
		{"ed25519:pkid=a b;sig=" + sigURL, ErrMalformedSig},                              // blank in pkid
		{"ed25519:pkid=a;junk;sig=" + sigURL, ErrMalformedSig},                           // parameter without =
		{"ed25519", ErrMalformedSig},
		{"garbage", ErrMalformedSig},
		{otherHdr + ".." + sigURL, ErrProtectedHeader},
		{"ed25519:pkid=a;sig=" + otherHdr + ".." + sigURL, ErrProtectedHeader},
		{"ed25519:pkid=a;sig=" + jwsES, ErrProtectedHeader},    // ES256 JWS under ed25519 tag
		{"secp256r1:pkid=a;sig=" + jwsEd, ErrProtectedHeader},  // EdDSA JWS under secp256r1 tag
		{hdrEd + "." + "eyJ9" + "." + sigURL, ErrMalformedSig}, // attached payload
		{hdrEd + "..." + sigURL, ErrMalformedSig},
		{hdrEd + "..", ErrMalformedSig},
		{".." + sigURL, ErrMalformedSig},
		{hdrEd + ".." + short, ErrMalformedSig},
	}
	for _, tt := range bad {
		got, err := ParseSig(tt.in)
		if !errors.Is(err, tt.want) {
			t.Errorf("ParseSig(%q) = %+v, %v; want %v", tt.in, got, err, tt.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "signing: ") {
			t.Errorf("ParseSig(%q) error %q does not start with \"signing: \"", tt.in, err)
		}
	}
}

func TestSigStringRoundTrip(t *testing.T) {
	for _, s := range []*Sig{
		{Ed25519, "alice@example.com", sig64, FormPlain},
		{SECP256R1, "bob", sig64, FormJWS},
		{Ed25519, "", sig64, FormBareJWS},
	} {
		got, err := ParseSig(s.String())
		if err != nil || got.String() != s.String() {
			t.Errorf("ParseSig(%q) = %v, %v", s.String(), got, err)
		}
	}
}

// FuzzParseSig: ParseSig never panics; what it accepts is a 64-byte
// signature of a known algorithm that survives a String round trip; what
// it rejects is one of the documented errors.
func FuzzParseSig(f *testing.F) {
	seeds := 0
	for _, dir := range []string{"signing/vectors", "signing/canon-v1.1-rc1"} {
		paths, _ := fs.Glob(fixtures.SigningFS, dir+"/*.txt")
		for _, p := range paths {
			data, _ := fs.ReadFile(fixtures.SigningFS, p)
			for _, l := range strings.Split(strings.ReplaceAll(string(data), "\r", "\n"), "\n") {
				l = strings.TrimPrefix(l, "> ")
				if v, ok := strings.CutPrefix(l, "sig:"); ok {
					f.Add(v)
					seeds++
				} else if strings.HasPrefix(l, "eyJ") {
					f.Add(l)
					seeds++
				}
			}
		}
	}
	if seeds == 0 {
		f.Fatal("no sig lines found in fixtures/signing")
	}
	for _, s := range []string{"none", "ed25519:pkid=a;sig=" + sigURL, jwsES, "ed25519:pkid=a;sig=" + otherHdr + ".." + sigURL, "x:y=z", "..", "a..b", "ed25519:;;;=;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSig(in)
		if err != nil {
			for _, want := range []error{ErrNotSigned, ErrMalformedSig, ErrUnsupportedAlg, ErrProtectedHeader} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("ParseSig(%q) = %v: not a documented error", in, err)
		}
		if len(s.Signature) != 64 || (s.Alg != Ed25519 && s.Alg != SECP256R1) {
			t.Fatalf("ParseSig(%q) = %+v", in, s)
		}
		if s.Form != FormBareJWS && checkPkid(s.Pkid) != nil {
			t.Fatalf("ParseSig(%q) accepted key id %q", in, s.Pkid)
		}
		again, err := ParseSig(s.String())
		if err != nil || again.String() != s.String() || again.Pkid != s.Pkid || !bytes.Equal(again.Signature, s.Signature) {
			t.Fatalf("round trip of %q: %q → %+v, %v", in, s.String(), again, err)
		}
	})
}
