package signing

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// bench1KiB returns a signed envelope of about 1 KiB, its key and text.
func bench1KiB(b *testing.B) (*PrivateKey, string) {
	b.Helper()
	k := testKey(b, Ed25519, "alice@example.com")
	var body strings.Builder
	for body.Len() < 700 {
		body.WriteString("  The quick brown fox jumps over the lazy dog — café.\n")
	}
	text := "[[ALICE→BOB v1]]\nuser: kalle\nthread: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8D\nmessage: 01J9ZQ3K8Y5V4W3X2Z1A0B9C8F\ncontext: bench\nintent: REQUEST\n\nmeta: routing\nX-Priority: high\n\nbody: |\n" + body.String() + "sig: none\n[[END]]\n"
	out, err := Sign([]byte(text), k, nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(out) < 1000 || len(out) > 1080 {
		b.Fatalf("envelope is %d bytes, want about 1 KiB", len(out))
	}
	return k, string(out)
}

// BenchmarkVerify1KiB compares verifying a signed 1 KiB envelope from its
// text (Reader + Payload + ParseSig + Ed25519) with a bare ed25519.Verify
// of the same payload, in the same run (goal: text ≤ 1.25 × bare).
func BenchmarkVerify1KiB(b *testing.B) {
	k, text := bench1KiB(b)
	pub := k.Public()
	env := readEnv(b, text)
	payload, err := Payload(env)
	if err != nil {
		b.Fatal(err)
	}
	sig, err := ParseSig(env.Sig)
	if err != nil {
		b.Fatal(err)
	}
	input := SigningInput(Ed25519, payload)
	edPub := pub.Key.(ed25519.PublicKey)
	payloadSig := ed25519.Sign(k.Key.(ed25519.PrivateKey), payload)

	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			env, err := readToEnd(text)
			if err != nil {
				b.Fatal(err)
			}
			if r := Verify(env, pub); r.Status != StatusVerified {
				b.Fatal(r.Err)
			}
		}
	})
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if r := Verify(env, pub); r.Status != StatusVerified {
				b.Fatal(r.Err)
			}
		}
	})
	b.Run("bare-payload", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if !ed25519.Verify(edPub, payload, payloadSig) {
				b.Fatal("bad")
			}
		}
	})
	b.Run("bare-signing-input", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if !ed25519.Verify(edPub, input, sig.Signature) {
				b.Fatal("bad")
			}
		}
	})
}

// BenchmarkVerify1KiBRatio interleaves the two measurements of
// BenchmarkVerify1KiB (text vs bare ed25519.Verify of the payload) in one
// loop, so that load from other processes hits both alike, and reports
// their ratio (goal ≤ 1.25).
func BenchmarkVerify1KiBRatio(b *testing.B) {
	k, text := bench1KiB(b)
	pub := k.Public()
	payload, err := Payload(readEnv(b, text))
	if err != nil {
		b.Fatal(err)
	}
	edPub := pub.Key.(ed25519.PublicKey)
	payloadSig := ed25519.Sign(k.Key.(ed25519.PrivateKey), payload)
	interleaved(b, "text", func() {
		env, err := readToEnd(text)
		if err != nil {
			b.Fatal(err)
		}
		if r := Verify(env, pub); r.Status != StatusVerified {
			b.Fatal(r.Err)
		}
	}, "bare", func() {
		if !ed25519.Verify(edPub, payload, payloadSig) {
			b.Fatal("bad")
		}
	})
}

// interleaved runs a and then base once per iteration, timing each, so
// that load from other processes weighs on both alike, and reports their
// times per op (aName-ns/op, baseName-ns/op) and the ratio a / base.
func interleaved(b *testing.B, aName string, a func(), baseName string, base func()) {
	var aNS, baseNS time.Duration
	for b.Loop() {
		t0 := time.Now()
		a()
		t1 := time.Now()
		base()
		aNS += t1.Sub(t0)
		baseNS += time.Since(t1)
	}
	b.ReportMetric(float64(aNS.Nanoseconds())/float64(b.N), aName+"-ns/op")
	b.ReportMetric(float64(baseNS.Nanoseconds())/float64(b.N), baseName+"-ns/op")
	b.ReportMetric(float64(aNS)/float64(baseNS), "ratio")
}

func BenchmarkPayload1KiB(b *testing.B) {
	_, text := bench1KiB(b)
	env := readEnv(b, text)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Payload(env); err != nil {
			b.Fatal(err)
		}
	}
}

// readToEnd reads the one envelope of text and then the end of the input,
// as the relay and the CLI do (the Reader recycles its buffers at EOF).
func readToEnd(text string) (*envelope.Envelope, error) {
	r := envelope.NewReader(strings.NewReader(text))
	env, err := r.Next()
	if err != nil {
		return nil, err
	}
	if _, err := r.Next(); err != io.EOF {
		return nil, fmt.Errorf("want one envelope, then EOF: %v", err)
	}
	return env, nil
}
