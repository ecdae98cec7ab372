package server

import (
	"testing"

	"github.com/crosstalk-go/crosstalk/signing"
)

// TestKeySignerExactActor: the relay signs for the principal whose key it
// holds, with ASCII case folding only. A principal "ſam" (U+017F long s,
// which strings.EqualFold joins to "sam") got its envelopes signed with
// sam's key.
func TestKeySignerExactActor(t *testing.T) {
	k, err := signing.GenerateKey(signing.Ed25519, "sam@x.org")
	if err != nil {
		t.Fatal(err)
	}
	s := keySigner{"sam": k}
	for _, tc := range []struct {
		principal string
		want      bool
	}{
		{"sam", true},
		{"SAM", true},
		{"ſam", false},
		{"ſAM", false},
		{"sa", false},
	} {
		_, ok, err := s.Sign(t.Context(), tc.principal, []byte("[[SAM→BOB v1]]\nintent: INFO\n\nbody: |\n  hi\n[[END]]\n"))
		if ok != tc.want {
			t.Errorf("Sign(principal %q) signed = %v (err %v), want %v", tc.principal, ok, err, tc.want)
		}
	}
}
