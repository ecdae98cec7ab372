package gateway_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/signing"
)

// TestRequireSignaturesBoundSender: docs/security.md's advice for senders
// expected over mail — pin their keys ahead, put their key ids in the
// address book, set require_signatures — holds: without a principal, an
// envelope in the name of a sender the address book gives keys to is
// accepted only when signed by one of them; a stranger's fresh key id
// (a first use, or a key verified but held by nobody) speaks for nobody.
func TestRequireSignaturesBoundSender(t *testing.T) {
	store, book := claudeKeyedBook(t)
	key := func(pkid string) *signing.PrivateKey { return newKey(t, pkid) }
	claudeKey := key("claude@test")
	if err := store.Add(claudeKey.Public()); err != nil { // pinned ahead
		t.Fatal(err)
	}
	manual := key("manual@test")
	if err := store.Add(manual.Public()); err != nil { // pinned by hand, held by nobody
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book, RequireSignature: true, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	sign := func(text string, k *signing.PrivateKey) string { return signText(t, text, k, true) }
	for _, s := range []struct {
		name, text string
		ok         bool
	}{
		{"claude's own key", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), claudeKey), true},
		{"as CLAUDE, a stranger's fresh key id", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), key("stranger@evil")), false},
		{"as CLAUDE, a key pinned by hand for nobody", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), manual), false},
		{"as CLAUDE, unsigned", env("CLAUDE", "GEMINI", "REQUEST", "t", "x"), false},
		{"gemini, with no keys in the book, may still first-use", sign(env("GEMINI", "CLAUDE", "REQUEST", "t", "x"), key("gemini@test")), true},
	} {
		outs := ingest(t, r, "", s.text)
		if len(outs) != 1 {
			t.Fatalf("%s: %d outcomes", s.name, len(outs))
		}
		o := outs[0]
		switch {
		case s.ok && o.Reject != nil:
			t.Errorf("%s: refused %v, want accepted", s.name, o.Reject)
		case !s.ok && (o.Reject == nil || o.Reject.Code != envelope.CodePerm):
			t.Errorf("%s: accepted as %q (%s), want E-PERM", s.name, o.Event.By, o.Verification.Status)
		}
	}
	if _, ok, _ := store.Lookup("stranger@evil"); ok {
		t.Errorf("the stranger's key was pinned")
	}
}

// TestVerifyPinHoldsNothing: `crosstalk verify` on a pasted envelope pins
// its announced key in the trust store the relay shares (docs/
// configuration.md, trust_file). That pin records the header's sender as
// seen, not as the key's holder: a token holder cannot then post envelopes
// signed with the key in that sender's name.
func TestVerifyPinHoldsNothing(t *testing.T) {
	store := signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "mallory"}, {ID: "gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	evil := newKey(t, "evil@x")
	sign := func(text string, announce bool) string { return signText(t, text, evil, announce) }
	// The operator verifies mallory's paste with the CLI's verifier.
	pasted, err := envelope.NewReader(strings.NewReader(sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "paste"), true))).Next()
	if err != nil {
		t.Fatal(err)
	}
	if res := (&signing.Verifier{Store: store}).Verify(t.Context(), pasted); res.Status != signing.StatusFirstUse {
		t.Fatalf("verify = %s (%v), want first-use", res.Status, res.Err)
	}
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	o := ingest(t, r, "mallory", sign(env("CLAUDE", "GEMINI", "REQUEST", "t", "as claude"), false))[0]
	if o.Reject == nil || o.Reject.Code != envelope.CodePerm {
		t.Errorf("mallory's token, CLAUDE's header, a key verify pinned: accepted as %q (%s), want E-PERM", o.Event.By, o.Verification.Status)
	}
	// The key still verifies, and speaks for its principal.
	if o := ingest(t, r, "mallory", sign(env("MALLORY", "GEMINI", "REQUEST", "t", "as myself"), false))[0]; o.Reject != nil || o.Event.By != "mallory" {
		t.Errorf("mallory as himself: %v by %q", o.Reject, o.Event.By)
	}
}
