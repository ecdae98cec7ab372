package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
	"github.com/crosstalk-go/crosstalk/transports/browser"
)

// pageEnvelopes is chat text with one envelope of each status the page
// shows, and what Check must say of each.
func pageEnvelopes(t *testing.T) (text string, want []string) {
	t.Helper()
	k, err := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := signing.GenerateKey(signing.Ed25519, "gemini@example.com")
	env := func(body string) string {
		e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, body)
		b, err := envelope.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sign := func(k *signing.PrivateKey, text string, announce bool) string {
		b, err := signing.Sign([]byte(text), k, &signing.SignOptions{Announce: announce})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := sign(k, env("signed, the key announced"), true)
	again := sign(k, env("signed again, no announcement"), false)
	tampered := strings.Replace(sign(k, env("signed, then altered"), false), "then altered", "then ALTERED", 1)
	unknown := sign(other, env("signed by a key nobody announced"), false)
	impostor, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	changed := sign(impostor, env("signed by another key for the same key id"), true)
	old, _ := signing.GenerateKey(signing.Ed25519, "old@example.com")
	revoke := sign(old, "[[OLD→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: old@example.com\n\nbody: |\n  Key compromised.\n", true)
	afterRevoke := sign(old, env("signed by a revoked key"), false)
	parts := []string{
		"Claude said:\n```\n" + first + "```\n",
		"> " + strings.ReplaceAll(strings.TrimSuffix(again, "\n"), "\n", "\n> ") + "\n",
		tampered,
		unknown,
		env("plain"),
		changed,
		revoke,
		afterRevoke,
		"[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nintent: ACK\nbody: |\n  two intents\n[[END]]\n",
		"[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  still streaming…\n",
	}
	return strings.Join(parts, "\nsome chat\n"), []string{"first-use", "verified", "invalid", "unknown-key", "unsigned", "key-changed", "first-use", "revoked", "error"}
}

func TestCheck(t *testing.T) {
	text, want := pageEnvelopes(t)
	res, err := browser.Check(context.Background(), text, "")
	if err != nil {
		t.Fatal(err)
	}
	assertStatuses(t, res, want)
	if !strings.Contains(res.Known, "claude@example.com ed25519 ") {
		t.Errorf("Known = %q: the first-use key is not pinned", res.Known)
	}
	// With the store it returned, the first envelope is verified now.
	again, err := browser.Check(context.Background(), text, res.Known)
	if err != nil || again.Envelopes[0].Status != "verified" {
		t.Errorf("second Check: %+v, %v; want the first envelope verified", again.Envelopes[0], err)
	}
	if _, err := browser.Check(context.Background(), text, "garbage line\n"); err == nil {
		t.Error("Check with an unreadable trust store: no error")
	}
}

// TestWasmCheck: the same page through the WebAssembly build.
func TestWasmCheck(t *testing.T) {
	text, want := pageEnvelopes(t)
	got := runWasm(t, []map[string]any{{"check": text, "known": ""}, {"check": text, "known": "garbage\n"}})
	var res browser.CheckResult
	if err := json.Unmarshal([]byte(got[0]), &res); err != nil {
		t.Fatalf("check returned %q: %v", got[0], err)
	}
	assertStatuses(t, res, want)
	if !strings.Contains(got[1], `"error"`) {
		t.Errorf("check with a bad store = %s, want an error", got[1])
	}
}

func assertStatuses(t *testing.T, res browser.CheckResult, want []string) {
	t.Helper()
	var got []string
	for _, f := range res.Envelopes {
		got = append(got, f.Status)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("statuses = %v, want %v (%+v)", got, want, res.Envelopes)
	}
	for i, f := range res.Envelopes {
		switch f.Status {
		case "error":
			if !strings.HasPrefix(f.Reason, "E-FORMAT at line 3 of the envelope: duplicate field \"intent\"") {
				t.Errorf("error reason = %q", f.Reason)
			}
		default:
			if f.Text == "" || f.From == "" || (f.From == "CLAUDE") != (f.Intent != "REVOKE") {
				t.Errorf("envelope %d = %+v", i, f)
			}
			if _, err := envelope.Unmarshal([]byte(f.Text)); err != nil {
				t.Errorf("envelope %d: Text does not parse: %v", i, err)
			}
		}
		if (f.Status == "invalid" || f.Status == "unknown-key" || f.Status == "key-changed" || f.Status == "revoked") && f.Reason == "" {
			t.Errorf("envelope %d (%s) has no reason", i, f.Status)
		}
	}
}

func TestFence(t *testing.T) {
	for in, want := range map[string]string{
		"a\n":           "```\na\n```\n",
		"x ```` y":      "`````\nx ```` y\n`````\n",
		"no newline":    "```\nno newline\n```\n",
		"``\n``` inner": "````\n``\n``` inner\n````\n",
	} {
		if got := browser.Fence(in); got != want {
			t.Errorf("Fence(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckFirstUseBounded: a page can show any number of signed
// envelopes, each from another sender announcing its own key. First use
// pins at most browser.MaxFirstUseKeys keys in the extension's store (kept
// in storage.local, read and rewritten by every check, and capped by the
// browser's quota); past that an announced key is unknown-key, saying why,
// in this check and in later ones.
func TestCheckFirstUseBounded(t *testing.T) {
	ctx := context.Background()
	page := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			k, err := signing.GenerateKey(signing.Ed25519, fmt.Sprintf("k%d@flood.example", i))
			if err != nil {
				t.Fatal(err)
			}
			e := envelope.New(fmt.Sprintf("FLOOD%d", i), "CHATGPT", envelope.IntentRequest, "pin me")
			text, err := envelope.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			s, err := signing.Sign(text, k, &signing.SignOptions{Announce: true})
			if err != nil {
				t.Fatal(err)
			}
			b.Write(s)
			b.WriteString("\n")
		}
		return b.String()
	}
	pinned := func(known string) int { return strings.Count(known, " tofu ") }
	over := 5
	res, err := browser.Check(ctx, page(0, browser.MaxFirstUseKeys+over), "")
	if err != nil {
		t.Fatal(err)
	}
	if n := pinned(res.Known); n != browser.MaxFirstUseKeys {
		t.Errorf("one check pinned %d keys, want %d", n, browser.MaxFirstUseKeys)
	}
	for i, f := range res.Envelopes {
		want := "first-use"
		if i >= browser.MaxFirstUseKeys {
			want = "unknown-key"
		}
		if f.Status != want || (want == "unknown-key" && !strings.Contains(f.Reason, "trust store")) {
			t.Fatalf("envelope %d: %s (%s), want %s", i, f.Status, f.Reason, want)
		}
	}
	// A later check, from the full store.
	again, err := browser.Check(ctx, page(browser.MaxFirstUseKeys+over, browser.MaxFirstUseKeys+over+1), res.Known)
	if err != nil {
		t.Fatal(err)
	}
	if f := again.Envelopes[0]; f.Status != "unknown-key" || pinned(again.Known) != browser.MaxFirstUseKeys {
		t.Errorf("check on a full store: %s (%s), %d pinned", f.Status, f.Reason, pinned(again.Known))
	}
}

// TestCheckTooLong: a message longer than browser.MaxText is checked up
// to the cut, and the cut shows as an error entry instead of the
// envelopes after it vanishing without a word.
func TestCheckTooLong(t *testing.T) {
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "before and after the cut")
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b) + strings.Repeat("chat chat chat\n", browser.MaxText/15+1) + string(b)
	res, err := browser.Check(context.Background(), text, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Envelopes) != 2 || res.Envelopes[0].Status != "unsigned" || res.Envelopes[1].Status != "error" ||
		!strings.Contains(res.Envelopes[1].Reason, "not checked") {
		t.Fatalf("Check of a %d-byte text = %+v, want the first envelope and an error for the cut", len(text), res.Envelopes)
	}
}

// TestCheckKeyOfAnotherSender: a key pinned on first use from one sender's
// envelope proves nothing about another sender (docs/security.md, "Who
// speaks": the relay refuses it). Mallory's key, pinned from her own
// envelope, must not show ✓ verified under [[CLAUDE→…]].
func TestCheckKeyOfAnotherSender(t *testing.T) {
	mallory, err := signing.GenerateKey(signing.Ed25519, "mallory@example.com")
	if err != nil {
		t.Fatal(err)
	}
	env := func(from string, announce bool) string {
		b, err := envelope.Marshal(envelope.New(from, "CHATGPT", envelope.IntentRequest, "hello from "+from))
		if err != nil {
			t.Fatal(err)
		}
		s, err := signing.Sign(b, mallory, &signing.SignOptions{Announce: announce})
		if err != nil {
			t.Fatal(err)
		}
		return string(s)
	}
	text := env("MALLORY", true) + "\n" + env("MALLORY", false) + "\n" + env("CLAUDE", false) + "\n" + env("CLAUDE", true)
	res, err := browser.Check(context.Background(), text, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Envelopes {
		got = append(got, f.Status)
	}
	if strings.Join(got, " ") != "first-use verified unknown-key unknown-key" {
		t.Fatalf("statuses = %v, want first-use verified unknown-key unknown-key", got)
	}
	for _, f := range res.Envelopes[2:] {
		if !strings.Contains(f.Reason, "MALLORY") || !strings.Contains(f.Reason, "mallory@example.com") {
			t.Errorf("reason = %q, want it to name the key id and its sender", f.Reason)
		}
	}
}

// TestForget: the user forgets a sender's keys (a wrong first-use pin, a
// rotated key): the keys first seen from that sender leave the store, and
// the sender's next announced key is a first use instead of key-changed;
// another sender's keys and a revoked key (forgetting it would let the
// compromised key be pinned again) stay.
func TestForget(t *testing.T) {
	ctx := context.Background()
	claude, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	rotated, _ := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	gemini, _ := signing.GenerateKey(signing.Ed25519, "gemini@example.com")
	old, _ := signing.GenerateKey(signing.Ed25519, "old@example.com")
	sign := func(k *signing.PrivateKey, from, body string) string {
		e := envelope.New(from, "CHATGPT", envelope.IntentRequest, body)
		b, err := envelope.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if b, err = signing.Sign(b, k, &signing.SignOptions{Announce: true}); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	revoke, err := signing.Sign([]byte("[[CLAUDE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: old@example.com\n\nbody: |\n  Key compromised.\n[[END]]\n"), old, &signing.SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := browser.Check(ctx, sign(claude, "CLAUDE", "one")+sign(gemini, "GEMINI", "two")+string(revoke), "")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := browser.Keys(res.Known)
	if err != nil || len(keys) != 3 {
		t.Fatalf("Keys() = %+v, %v, want 3", keys, err)
	}
	known, n, err := browser.Forget(res.Known, "CLAUDE")
	if err != nil || n != 1 {
		t.Fatalf("Forget(CLAUDE) = %d, %v, want 1 key forgotten", n, err)
	}
	keys, _ = browser.Keys(known)
	var left []string
	for _, k := range keys {
		left = append(left, fmt.Sprintf("%s from %s revoked=%v", k.Pkid, k.Sender, k.Revoked))
	}
	if want := []string{"gemini@example.com from GEMINI revoked=false", "old@example.com from CLAUDE revoked=true"}; strings.Join(left, "; ") != strings.Join(want, "; ") {
		t.Errorf("after Forget(CLAUDE): %q, want %q", left, want)
	}
	after, err := browser.Check(ctx, sign(rotated, "CLAUDE", "rotated"), known)
	if err != nil || len(after.Envelopes) != 1 || after.Envelopes[0].Status != "first-use" {
		t.Errorf("the rotated key after Forget = %+v, %v, want first-use", after.Envelopes, err)
	}
	before, _ := browser.Check(ctx, sign(rotated, "CLAUDE", "rotated"), res.Known)
	if len(before.Envelopes) != 1 || before.Envelopes[0].Status != "key-changed" {
		t.Errorf("the rotated key without Forget = %+v, want key-changed", before.Envelopes)
	}
	if _, n, err := browser.Forget(known, "NOBODY"); err != nil || n != 0 {
		t.Errorf("Forget(NOBODY) = %d, %v, want 0, nil", n, err)
	}
	if _, _, err := browser.Forget("not a store line\n", "CLAUDE"); err == nil {
		t.Error("Forget of an unreadable store: no error")
	}
}
