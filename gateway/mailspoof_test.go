package gateway_test

import (
	"fmt"
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

// TestMailHoldsNothing: mail authenticates nobody — whoever can mail the
// mailbox can name any sender (docs/security.md) — so it must not hand
// out what only an authenticated sender may have. A first use by mail
// pins the key (the header's sender seen, not its holder): a token holder
// cannot then forward envelopes signed with the key in that sender's
// name. And a REVOKE by mail revokes only the key that signs it: an
// unsigned one in an agent's name does not revoke the agent's key.
func TestMailHoldsNothing(t *testing.T) {
	store := signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "mallory"}, {ID: "gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	mail := func(text string) gateway.Outcome { return mailIntake(t, r, text) }
	revoke := func(from, pkid string) string {
		return env(from, "ALL", "REVOKE", "t", "revoked", func(e *envelope.Envelope) {
			e.Meta = []envelope.Meta{{Namespace: "revoke", Fields: []envelope.Field{{Key: "Pkid", Value: pkid}}}}
		})
	}

	// Claude's own first use, over its token: claude holds claude@test.
	claudeKey := newKey(t, "claude@test")
	if o := ingest(t, r, "claude", signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "mine"), claudeKey, true))[0]; o.Reject != nil {
		t.Fatalf("claude's first use: %v", o.Reject)
	}
	// Mallory mails a first use in claude's name: the header speaks, the
	// key is pinned, but claude does not hold it.
	evil := newKey(t, "evil@x")
	if o := mail(signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "by mail"), evil, true)); o.Reject != nil || o.Verification.Status != gateway.StatusFirstUse {
		t.Fatalf("first use by mail: %v (%s), want accepted", o.Reject, o.Verification.Status)
	}
	if e, ok, _ := store.Lookup("evil@x"); !ok || e.Sender != "" || !strings.EqualFold(e.Seen, "claude") {
		t.Errorf("evil@x = %+v, %v; want pinned with claude seen, held by nobody", e, ok)
	}
	if o := ingest(t, r, "mallory", signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "as claude"), evil, false))[0]; o.Reject == nil || o.Reject.Code != envelope.CodePerm {
		t.Errorf("mallory's token, CLAUDE's header, the key mallory pinned by mail: accepted as %q (%s), want E-PERM", o.Event.By, o.Verification.Status)
	}
	// An unsigned REVOKE by mail in claude's name revokes nothing.
	if o := mail(revoke("CLAUDE", "claude@test")); o.Reject == nil || o.Reject.Code != envelope.CodePerm {
		t.Errorf("unsigned REVOKE of claude@test by mail as CLAUDE: %+v, want E-PERM", o.Reject)
	}
	if e, _, _ := store.Lookup("claude@test"); e.Revoked {
		t.Errorf("claude@test revoked by an unsigned mail")
	}
	// A REVOKE by mail signed by the key it revokes still revokes it.
	if o := mail(signText(t, revoke("CLAUDE", "evil@x"), evil, false)); o.Reject != nil {
		t.Errorf("REVOKE of evil@x signed by evil@x by mail: %v", o.Reject)
	}
	if e, _, _ := store.Lookup("evil@x"); !e.Revoked {
		t.Errorf("evil@x not revoked by its own signed REVOKE")
	}
}

// TestMailPinsSpendNoHoldersQuota: a sender has at most
// signing.MaxFirstUsePins keys pinned on first use. Pins seen by mail in
// its name are counted apart from the ones it holds: else a stranger
// mailing 32 envelopes as CLAUDE, each with a fresh key, would leave
// claude's own first use over its token refused for good.
func TestMailPinsSpendNoHoldersQuota(t *testing.T) {
	store := signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book, Verifier: gateway.NewTrustVerifier(&signing.Verifier{Store: store})})
	mail := func(text string) gateway.Outcome { return mailIntake(t, r, text) }
	for i := range signing.MaxFirstUsePins + 1 {
		o := mail(signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "spam"), newKey(t, fmt.Sprintf("spam%d@evil", i)), true))
		if i < signing.MaxFirstUsePins && o.Reject != nil {
			t.Fatalf("mailed first use %d: %v", i, o.Reject)
		}
		if i == signing.MaxFirstUsePins && (o.Reject == nil || o.Reject.Code != envelope.CodePerm) {
			t.Errorf("mailed first use %d: %v, want E-PERM (the seen pins are bounded too)", i, o.Reject)
		}
	}
	claudeKey := newKey(t, "claude@test")
	if o := ingest(t, r, "claude", signText(t, env("CLAUDE", "GEMINI", "REQUEST", "t", "mine"), claudeKey, true))[0]; o.Reject != nil {
		t.Fatalf("claude's own first use over its token after %d mailed in its name: %v", signing.MaxFirstUsePins, o.Reject)
	}
	if e, ok, _ := store.Lookup("claude@test"); !ok || !strings.EqualFold(e.Sender, "claude") {
		t.Errorf("claude@test = %+v, %v; want held by claude", e, ok)
	}
}

// mailIntake runs text through r as the mail transport delivers it, and
// returns the outcome of its one envelope.
func mailIntake(t *testing.T, r *gateway.Relay, text string) gateway.Outcome {
	t.Helper()
	outs, err := r.Ingest(t.Context(), gateway.Intake{Transport: "mail", Source: "imap://relay@mail/INBOX", Data: strings.NewReader(text)})
	if err != nil || len(outs) != 1 {
		t.Fatalf("mail intake = %d outcomes, %v", len(outs), err)
	}
	return outs[0]
}
