package gateway

import (
	"context"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
)

// SigningVerifier adapts a signing.Verifier (trust on first use over a
// trust store, docs/signing.md) to the relay's Verifier. It is the one
// adapter between the two packages: the relay, the bench and the tests use
// it.
func SigningVerifier(v *signing.Verifier) Verifier {
	return VerifierFunc(func(ctx context.Context, env *envelope.Envelope) Verification {
		res := v.Verify(ctx, env)
		return Verification{Status: string(res.Status), Pkid: res.Pkid, Alg: string(res.Alg), Err: res.Err}
	})
}
