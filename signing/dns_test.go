package signing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/crosstalk-go/crosstalk/internal/dnstest"
)

func startDNS(t *testing.T, txt map[string][][]string, rcode map[string]dnsmessage.RCode) *dnstest.Server {
	t.Helper()
	srv := dnstest.Start(t, txt)
	for name, rc := range rcode {
		srv.SetRCode(name, rc)
	}
	return srv
}

func dnsValue(k *PrivateKey) string {
	return string(k.Alg()) + ":pk=" + b64url(k.Public().Bytes())
}

func TestLookupDNSKeys(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com")
	org := testKey(t, SECP256R1, "bob@example.org")
	v := dnsValue(alice)
	srv := startDNS(t, map[string][][]string{
		// split into two character-strings, with an unrelated record
		"alice._crosstalk-key.example.com.": {{"v=spf1 -all"}, {v[:20], v[20:]}},
		"_crosstalk-key.example.org.":       {{dnsValue(org) + "; note=x"}},
		"_crosstalk-key.example.net.":       {{"just text"}},
	}, map[string]dnsmessage.RCode{
		"_crosstalk-key.broken.example.": dnsmessage.RCodeServerFailure,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := srv.Resolver()

	keys, err := LookupDNSKeys(ctx, r, "alice@example.com")
	if err != nil || len(keys) != 1 || !keys[0].Equal(alice.Public()) || keys[0].Pkid != "alice@example.com" {
		t.Fatalf("LookupDNSKeys(alice) = %v, %v", keys, err)
	}
	keys, err = LookupDNSKeys(ctx, r, "bob@example.org")
	if err != nil || len(keys) != 1 || !keys[0].Equal(org.Public()) {
		t.Fatalf("LookupDNSKeys(bob) = %v, %v", keys, err)
	}
	want := []string{"TypeTXT alice._crosstalk-key.example.com.", "TypeTXT bob._crosstalk-key.example.org.", "TypeTXT _crosstalk-key.example.org."}
	if got := srv.Queries(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("queries = %q, want %q", got, want)
	}
	if _, err := LookupDNSKeys(ctx, r, "carol@example.net"); !errors.Is(err, ErrNoDNSKey) {
		t.Errorf("LookupDNSKeys(no crosstalk record) = %v, want ErrNoDNSKey", err)
	}
	if _, err := LookupDNSKeys(ctx, r, "nobody@nowhere.example"); !errors.Is(err, ErrNoDNSKey) {
		t.Errorf("LookupDNSKeys(NXDOMAIN) = %v, want ErrNoDNSKey", err)
	}
	if _, err := LookupDNSKeys(ctx, r, "x@broken.example"); err == nil || errors.Is(err, ErrNoDNSKey) {
		t.Errorf("LookupDNSKeys(SERVFAIL) = %v, want a lookup error", err)
	}
	if _, err := LookupDNSKeys(ctx, r, "alice-2025"); !errors.Is(err, ErrNoDNSKey) {
		t.Errorf("LookupDNSKeys(no domain) = %v, want ErrNoDNSKey", err)
	}
}

func TestDNSNames(t *testing.T) {
	for _, tt := range []struct {
		pkid string
		want []string
	}{
		{"alice@example.com", []string{"alice._crosstalk-key.example.com.", "_crosstalk-key.example.com."}},
		{"example.com", []string{"_crosstalk-key.example.com."}},
		{"a.b@example.com", []string{"_crosstalk-key.example.com."}},
		{"bob@keys/2025", nil},
		{"alice", nil},
		{"alice@localhost", nil},
	} {
		if got := DNSNames(tt.pkid); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("DNSNames(%q) = %q, want %q", tt.pkid, got, tt.want)
		}
	}
}

func TestVerifyDNS(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com")
	carolDNS := testKey(t, Ed25519, "carol@example.com")
	carol := testKey(t, Ed25519, "carol@example.com")
	dave := testKey(t, Ed25519, "dave@broken.example")
	erin := testKey(t, Ed25519, "erin@nowhere.example")
	srv := startDNS(t, map[string][][]string{
		"alice._crosstalk-key.example.com.": {{dnsValue(alice)}},
		"carol._crosstalk-key.example.com.": {{dnsValue(carolDNS)}},
	}, map[string]dnsmessage.RCode{
		"dave._crosstalk-key.broken.example.": dnsmessage.RCodeServerFailure,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := newStore(t)
	v := &Verifier{Store: store, DNS: NewDNSKeys(srv.Addr())}
	ann := &SignOptions{Announce: true}

	// A key published in DNS verifies, without any announcement, and is
	// pinned as dns.
	res := v.Verify(ctx, signed(t, alice, plainEnv, nil))
	wantStatus(t, "alice", res, StatusVerified)
	if res.Source != SourceDNS {
		t.Errorf("Source = %s, want dns", res.Source)
	}
	if e, ok, _ := store.Lookup("alice@example.com"); !ok || e.Source != SourceDNS {
		t.Errorf("entry = %+v, %v; want a dns pin", e, ok)
	}
	wantStatus(t, "alice again", v.Verify(ctx, signed(t, alice, plainEnv, nil)), StatusVerified)

	// A key that is not the one in DNS is rejected, announced or not.
	res = v.Verify(ctx, signed(t, carol, plainEnv, ann))
	wantStatus(t, "carol announced", res, StatusKeyChanged)
	if !res.Pinned.Equal(carolDNS.Public()) {
		t.Errorf("Pinned = %v, want the DNS key", res.Pinned)
	}
	wantStatus(t, "carol", v.Verify(ctx, signed(t, carol, plainEnv, nil)), StatusBadSignature)
	if _, ok, _ := store.Lookup("carol@example.com"); ok {
		t.Error("a key that DNS contradicts was pinned")
	}

	// DNS failing is not "no key": no first use.
	res = v.Verify(ctx, signed(t, dave, plainEnv, ann))
	wantStatus(t, "dave", res, StatusUnknownKey)

	// No record at all: first use from the announcement.
	wantStatus(t, "erin", v.Verify(ctx, signed(t, erin, plainEnv, ann)), StatusFirstUse)
}
