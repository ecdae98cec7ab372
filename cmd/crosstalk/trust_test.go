package main

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/dnstest"
	"github.com/crosstalk-go/crosstalk/signing"
)

// TestRelayVerifiesDNSKeys runs the relay's verifier, configured with
// dns_server pointing at a DNS server on loopback, through the relay's
// intake: a key published in DNS verifies and is pinned with source dns;
// a key that contradicts the record, or the pin it became, is key-changed.
func TestRelayVerifiesDNSKeys(t *testing.T) {
	key := func(pkid string) *signing.PrivateKey {
		k, err := signing.GenerateKey(signing.Ed25519, pkid)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	record := func(k *signing.PrivateKey) [][]string {
		return [][]string{{string(k.Alg()) + ":pk=" + base64.RawURLEncoding.EncodeToString(k.Public().Bytes())}}
	}
	alice, alice2, mallory := key("alice@example.com"), key("alice@example.com"), key("alice@example.com")
	bob, bobOther := key("bob@example.org"), key("bob@example.org")
	srv := dnstest.Start(t, map[string][][]string{
		"alice._crosstalk-key.example.com.": record(alice),
		"_crosstalk-key.example.org.":       record(bob),
	})
	srv.SetTTL(1, 1) // clamped to the 30 s minimum: the rotation below needs a fresh verifier

	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.TrustFile, cfg.DNSServer = dir, filepath.Join(dir, "known_keys"), srv.Addr()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	newRelay := func() *gateway.Relay {
		o, err := cfg.serverOptions(slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		o.Store = memory.New(nil)
		c, err := server.OpenCore(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		return c.Relay
	}
	relay := newRelay()
	send := func(r *gateway.Relay, k *signing.PrivateKey, announce bool, body string) gateway.Outcome {
		t.Helper()
		e := envelope.New("ALICE", "BOB", envelope.IntentRequest, body)
		text, _ := envelope.Marshal(e)
		signed, err := signing.Sign(text, k, &signing.SignOptions{Announce: announce})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := r.Ingest(context.Background(), gateway.Intake{Transport: "test", Data: strings.NewReader(string(signed))})
		if err != nil || len(outs) != 1 {
			t.Fatalf("Ingest = %v, %v", outs, err)
		}
		return outs[0]
	}
	want := func(what string, o gateway.Outcome, status string) {
		t.Helper()
		if o.Verification.Status != status {
			t.Errorf("%s: status %s (%v), want %s", what, o.Verification.Status, o.Verification.Err, status)
		}
	}
	store := signing.NewTrustStore(cfg.TrustFile)

	want("alice, key in DNS, not announced", send(relay, alice, false, "one"), gateway.StatusVerified)
	if e, ok, _ := store.Lookup("alice@example.com"); !ok || e.Source != signing.SourceDNS || !e.Key.Equal(alice.Public()) {
		t.Errorf("trust store entry %+v, %v; want alice's key pinned with source dns", e, ok)
	}
	want("alice again", send(relay, alice, false, "two"), gateway.StatusVerified)
	want("mallory announcing another key for alice", send(relay, mallory, true, "three"), gateway.StatusKeyChanged)
	want("bob announcing a key DNS contradicts", send(relay, bobOther, true, "four"), gateway.StatusKeyChanged)
	if _, ok, _ := store.Lookup("bob@example.org"); ok {
		t.Error("a key DNS contradicts was pinned")
	}
	want("bob with the DNS key", send(relay, bob, false, "five"), gateway.StatusVerified)

	// alice rotates her key in DNS: the pin still wins, and the new key
	// is key-changed (not bad-signature) until someone re-pins.
	srv.Set("alice._crosstalk-key.example.com.", record(alice2))
	relay = newRelay()
	want("alice's new key", send(relay, alice2, false, "six"), gateway.StatusKeyChanged)
	want("alice's pinned key", send(relay, alice, false, "seven"), gateway.StatusVerified)
	want("a forgery", send(relay, mallory, false, "eight"), gateway.StatusBadSignature)

	// dns_server = "none" turns lookups off: a key only DNS knows is unknown.
	cfg.DNSServer = DNSServerNone
	cfg.TrustFile = filepath.Join(dir, "other_keys")
	n := len(srv.Queries())
	want("dns off", send(newRelay(), bob, false, "nine"), gateway.StatusUnknownKey)
	if len(srv.Queries()) != n {
		t.Error("dns_server = none still queried DNS")
	}
}
