package signing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/crosstalk-go/crosstalk/internal/dnstest"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

func TestDNSKeysCache(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com")
	srv := dnstest.Start(t, map[string][][]string{"alice._crosstalk-key.example.com.": {{dnsValue(alice)}}})
	srv.SetTTL(600, 120)
	srv.SetRCode("_crosstalk-key.broken.example.", dnsmessage.RCodeServerFailure)
	srv.SetRCode("x._crosstalk-key.broken.example.", dnsmessage.RCodeServerFailure)
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := &DNSKeys{Server: srv.Addr(), Now: clock.Now}
	ctx := context.Background()
	queries := func() int { return len(srv.Queries()) }

	keys, err := d.Lookup(ctx, "alice@example.com")
	if err != nil || len(keys) != 1 || !keys[0].Equal(alice.Public()) {
		t.Fatalf("Lookup(alice) = %v, %v", keys, err)
	}
	n := queries()
	clock.Add(599 * time.Second)
	if _, err := d.Lookup(ctx, "alice@example.com"); err != nil || queries() != n {
		t.Errorf("within the TTL: %v, %d queries, want %d (cached)", err, queries(), n)
	}
	clock.Add(2 * time.Second)
	if _, err := d.Lookup(ctx, "alice@example.com"); err != nil || queries() != n+1 {
		t.Errorf("after the TTL: %v, %d queries, want %d", err, queries(), n+1)
	}

	// No record: cached for the SOA's negative TTL (120 s).
	if _, err := d.Lookup(ctx, "bob@example.org"); !errors.Is(err, ErrNoDNSKey) {
		t.Fatalf("Lookup(bob) = %v, want ErrNoDNSKey", err)
	}
	n = queries()
	clock.Add(119 * time.Second)
	if _, err := d.Lookup(ctx, "bob@example.org"); !errors.Is(err, ErrNoDNSKey) || queries() != n {
		t.Errorf("negative answer within its TTL: %v, %d queries, want %d", err, queries(), n)
	}
	// A key published since is seen once the negative TTL ran out.
	bob := testKey(t, Ed25519, "bob@example.org")
	srv.Set("_crosstalk-key.example.org.", [][]string{{dnsValue(bob)}})
	clock.Add(2 * time.Second)
	if keys, err := d.Lookup(ctx, "bob@example.org"); err != nil || !keys[0].Equal(bob.Public()) {
		t.Errorf("after the negative TTL: %v, %v", keys, err)
	}

	// A failure is ErrDNSLookup, not "no key", and is cached briefly.
	if _, err := d.Lookup(ctx, "x@broken.example"); !errors.Is(err, ErrDNSLookup) || errors.Is(err, ErrNoDNSKey) {
		t.Fatalf("Lookup(SERVFAIL) = %v, want ErrDNSLookup", err)
	}
	n = queries()
	clock.Add(DefaultDNSErrorTTL - time.Second)
	d.Lookup(ctx, "x@broken.example")
	if queries() != n {
		t.Errorf("a failure was not cached: %d queries, want %d", queries(), n)
	}
	clock.Add(2 * time.Second)
	d.Lookup(ctx, "x@broken.example")
	if queries() == n {
		t.Error("a failure was cached past ErrorTTL")
	}

	// A key id without a domain never reaches DNS.
	n = queries()
	if _, err := d.Lookup(ctx, "alice-2025"); !errors.Is(err, ErrNoDNSKey) || queries() != n {
		t.Errorf("Lookup(no domain) = %v, %d queries", err, queries()-n)
	}
}

func TestDNSKeysTTLClamped(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com")
	srv := dnstest.Start(t, map[string][][]string{"alice._crosstalk-key.example.com.": {{dnsValue(alice)}}})
	srv.SetTTL(0, 0) // a TTL of 0 would mean a query per envelope
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := &DNSKeys{Server: srv.Addr(), Now: clock.Now, MinTTL: 10 * time.Second, MaxTTL: time.Minute}
	ctx := context.Background()
	d.Lookup(ctx, "alice@example.com")
	d.Lookup(ctx, "alice@example.com")
	if n := len(srv.Queries()); n != 1 {
		t.Errorf("TTL 0: %d queries, want 1 (MinTTL)", n)
	}
	srv.SetTTL(86400, 0)
	clock.Add(11 * time.Second)
	d.Lookup(ctx, "alice@example.com")
	clock.Add(61 * time.Second)
	d.Lookup(ctx, "alice@example.com")
	if n := len(srv.Queries()); n != 3 {
		t.Errorf("TTL one day: %d queries, want 3 (MaxTTL one minute)", n)
	}
}

func TestDNSKeysTimeout(t *testing.T) {
	srv := dnstest.Start(t, nil)
	srv.Hang(true)
	d := &DNSKeys{Server: srv.Addr(), Timeout: 100 * time.Millisecond}
	_, err := d.Lookup(context.Background(), "alice@example.com")
	if !errors.Is(err, ErrDNSLookup) {
		t.Errorf("Lookup against a silent server = %v, want ErrDNSLookup", err)
	}
	// The caller's own cancellation is not cached as a DNS failure.
	srv.Hang(false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d2 := &DNSKeys{Server: srv.Addr()}
	if _, err := d2.Lookup(ctx, "alice@example.com"); !errors.Is(err, ErrDNSLookup) {
		t.Errorf("cancelled Lookup = %v", err)
	}
	if _, err := d2.Lookup(context.Background(), "alice@example.com"); !errors.Is(err, ErrNoDNSKey) {
		t.Errorf("Lookup after a cancelled one = %v, want a fresh answer (ErrNoDNSKey)", err)
	}
}

func TestDNSKeysConcurrentShareOneQuery(t *testing.T) {
	alice := testKey(t, Ed25519, "alice@example.com")
	srv := dnstest.Start(t, map[string][][]string{"alice._crosstalk-key.example.com.": {{dnsValue(alice)}}})
	d := NewDNSKeys(srv.Addr())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.Lookup(context.Background(), "alice@example.com"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(srv.Queries()); n != 1 {
		t.Errorf("16 concurrent lookups made %d queries, want 1", n)
	}
}

func TestDNSKeysBounded(t *testing.T) {
	srv := dnstest.Start(t, nil)
	d := &DNSKeys{Server: srv.Addr(), MaxEntries: 8}
	for i := range 50 {
		d.Lookup(context.Background(), fmt.Sprintf("a@d%d.example", i))
	}
	d.mu.Lock()
	n := len(d.cache)
	d.mu.Unlock()
	if n > 8 {
		t.Errorf("cache holds %d entries, want at most 8", n)
	}
}

// TestVerifyPinWinsOverDNS: a pin always wins; DNS only tells a replaced
// key (key-changed) from a forgery (bad-signature).
func TestVerifyPinWinsOverDNS(t *testing.T) {
	pinnedKey := testKey(t, Ed25519, "alice@example.com")
	dnsKey := testKey(t, Ed25519, "alice@example.com")
	other := testKey(t, Ed25519, "alice@example.com")
	srv := dnstest.Start(t, map[string][][]string{"alice._crosstalk-key.example.com.": {{dnsValue(dnsKey)}}})
	store := newStore(t)
	if err := store.Add(pinnedKey.Public()); err != nil {
		t.Fatal(err)
	}
	v := &Verifier{Store: store, DNS: NewDNSKeys(srv.Addr())}
	ctx := context.Background()

	res := v.Verify(ctx, signed(t, pinnedKey, plainEnv, nil))
	wantStatus(t, "pinned key", res, StatusVerified)
	if res.Source != SourceManual {
		t.Errorf("Source = %s, want manual (the pin)", res.Source)
	}
	res = v.Verify(ctx, signed(t, dnsKey, plainEnv, nil))
	wantStatus(t, "DNS key, not announced", res, StatusKeyChanged)
	if !res.Pinned.Equal(pinnedKey.Public()) || !res.Key.Equal(dnsKey.Public()) || res.Source != SourceDNS || !errors.Is(res.Err, ErrKeyChanged) {
		t.Errorf("key-changed result %+v", res)
	}
	wantStatus(t, "neither", v.Verify(ctx, signed(t, other, plainEnv, nil)), StatusBadSignature)
	if e, _, _ := store.Lookup("alice@example.com"); !e.Key.Equal(pinnedKey.Public()) {
		t.Error("DNS replaced a pin")
	}
}

// TestDNSKeysBoundedPerName: a zone that publishes hundreds of key
// records for one name (a 64 KiB TCP answer holds ~1 000) would make
// every envelope naming it cost a signature check per record; at most
// MaxDNSKeys are taken, by both lookups.
func TestDNSKeysBoundedPerName(t *testing.T) {
	var recs [][]string
	for i := 0; i < MaxDNSKeys+4; i++ {
		recs = append(recs, []string{dnsValue(testKey(t, Ed25519, "x@many.example"))})
	}
	srv := startDNS(t, map[string][][]string{"_crosstalk-key.many.example.": recs}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := NewDNSKeys(srv.Addr()).Lookup(ctx, "x@many.example")
	if err != nil || len(keys) != MaxDNSKeys {
		t.Errorf("DNSKeys.Lookup = %d keys, %v; want %d", len(keys), err, MaxDNSKeys)
	}
	keys, err = LookupDNSKeys(ctx, srv.Resolver(), "x@many.example")
	if err != nil || len(keys) != MaxDNSKeys {
		t.Errorf("LookupDNSKeys = %d keys, %v; want %d", len(keys), err, MaxDNSKeys)
	}
}
