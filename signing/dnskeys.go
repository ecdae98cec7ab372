package signing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Defaults of DNSKeys.
const (
	DefaultDNSTimeout     = 3 * time.Second
	DefaultDNSMaxTTL      = time.Hour
	DefaultDNSMinTTL      = 30 * time.Second
	DefaultDNSNegativeTTL = 5 * time.Minute
	DefaultDNSErrorTTL    = 30 * time.Second
	DefaultDNSMaxEntries  = 10000
)

// MaxDNSKeys is how many key records of one DNS name are used (the first
// ones in the answer): every key is a signature check for each envelope
// naming that key id, and a zone may publish a thousand in one answer.
const MaxDNSKeys = 8

// DNSKeys looks up the keys published in DNS for key ids (docs/signing.md
// §6) and caches the answers: keys for their records' TTL, "no key" for
// the negative TTL of the answer (RFC 2308: the SOA minimum), failures for
// ErrorTTL, each clamped to [MinTTL, MaxTTL], so a flood of envelopes
// naming one domain makes one query per TTL, and one naming many domains
// at most MaxEntries cached answers. Concurrent lookups of one key id share
// one query. Set the fields before first use; DNSKeys is safe for
// concurrent use.
type DNSKeys struct {
	// Server is the "host:port" of the DNS server to ask. Empty means the
	// servers of /etc/resolv.conf, tried in order; where that file cannot
	// be read, the system resolver (net.DefaultResolver), whose answers
	// carry no TTL and are cached for NegativeTTL.
	Server string
	// Timeout bounds one lookup of a key id, every name and server
	// included (DefaultDNSTimeout when zero).
	Timeout time.Duration
	// MinTTL and MaxTTL clamp every cache lifetime.
	MinTTL, MaxTTL time.Duration
	// NegativeTTL is how long "no key" is kept when the answer has no SOA.
	NegativeTTL time.Duration
	// ErrorTTL is how long a failed lookup is kept.
	ErrorTTL time.Duration
	// MaxEntries bounds the cache; when full, expired entries and then
	// the oldest go.
	MaxEntries int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	cache    map[string]*dnsEntry
	resolvMu sync.Mutex
	resolv   []string // servers from resolv.conf; nil: not read yet
	noResolv bool
}

type dnsEntry struct {
	ready   chan struct{} // closed when keys/err are set
	keys    []*PublicKey
	err     error
	expires time.Time
	added   time.Time
}

// NewDNSKeys returns a DNSKeys asking server ("host:port"; empty: the
// system's resolvers) with the default limits.
func NewDNSKeys(server string) *DNSKeys { return &DNSKeys{Server: server} }

func (d *DNSKeys) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func orDefault(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

// Lookup returns the keys DNS publishes for pkid, from the cache when it
// has a fresh answer. No key (no record, NXDOMAIN, a pkid with no domain)
// is an error wrapping ErrNoDNSKey; a failed lookup wraps ErrDNSLookup.
func (d *DNSKeys) Lookup(ctx context.Context, pkid string) ([]*PublicKey, error) {
	names := DNSNames(pkid)
	if names == nil {
		return nil, fmt.Errorf("%w for %q: it names no domain", ErrNoDNSKey, pkid)
	}
	d.mu.Lock()
	if d.cache == nil {
		d.cache = map[string]*dnsEntry{}
	}
	now := d.now()
	e, ok := d.cache[pkid]
	if ok {
		select {
		case <-e.ready:
			if now.Before(e.expires) {
				d.mu.Unlock()
				return e.keys, e.err
			}
			ok = false
		default: // a lookup is under way: wait for it
		}
	}
	if ok {
		d.mu.Unlock()
		select {
		case <-e.ready:
			return e.keys, e.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w for %q: %w", ErrDNSLookup, pkid, ctx.Err())
		}
	}
	e = &dnsEntry{ready: make(chan struct{}), added: now}
	d.evictLocked(now)
	d.cache[pkid] = e
	d.mu.Unlock()

	lctx, cancel := context.WithTimeout(ctx, orDefault(d.Timeout, DefaultDNSTimeout))
	keys, ttl, err := d.lookup(lctx, pkid, names)
	cancel()
	if ctx.Err() != nil && err != nil {
		// The caller gave up, not DNS: cache nothing.
		d.mu.Lock()
		e.err = fmt.Errorf("%w for %q: %w", ErrDNSLookup, pkid, ctx.Err())
		close(e.ready)
		if d.cache[pkid] == e {
			delete(d.cache, pkid)
		}
		d.mu.Unlock()
		return nil, e.err
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrNoDNSKey):
		if ttl == 0 {
			ttl = orDefault(d.NegativeTTL, DefaultDNSNegativeTTL)
		}
	default:
		ttl = orDefault(d.ErrorTTL, DefaultDNSErrorTTL)
	}
	ttl = min(max(ttl, orDefault(d.MinTTL, DefaultDNSMinTTL)), orDefault(d.MaxTTL, DefaultDNSMaxTTL))
	d.mu.Lock()
	e.keys, e.err, e.expires = keys, err, d.now().Add(ttl)
	close(e.ready)
	d.mu.Unlock()
	return keys, err
}

// evictLocked makes room for one entry.
func (d *DNSKeys) evictLocked(now time.Time) {
	limit := d.MaxEntries
	if limit <= 0 {
		limit = DefaultDNSMaxEntries
	}
	if len(d.cache) < limit {
		return
	}
	var oldest string
	var oldestAt time.Time
	for k, e := range d.cache {
		select {
		case <-e.ready:
			if !now.Before(e.expires) {
				delete(d.cache, k)
				continue
			}
		default:
			continue // in flight
		}
		if oldest == "" || e.added.Before(oldestAt) {
			oldest, oldestAt = k, e.added
		}
	}
	if len(d.cache) >= limit && oldest != "" {
		delete(d.cache, oldest)
	}
}

// lookup queries the names in order; the first with a key record wins.
// It returns the keys and the smallest TTL among their records, or
// ErrNoDNSKey with the negative TTL of the answers (0: unknown).
func (d *DNSKeys) lookup(ctx context.Context, pkid string, names []string) ([]*PublicKey, time.Duration, error) {
	servers := d.servers()
	if servers == nil {
		keys, err := LookupDNSKeys(ctx, nil, pkid)
		if err != nil && !errors.Is(err, ErrNoDNSKey) {
			err = fmt.Errorf("%w: %w", ErrDNSLookup, err)
		}
		return keys, 0, err
	}
	var negTTL time.Duration
	for _, name := range names {
		txts, ttl, err := exchangeTXT(ctx, servers, name)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %s: %w", ErrDNSLookup, name, err)
		}
		keys := parseDNSRecords(pkid, txts)
		if len(keys) > 0 {
			return keys, ttl, nil
		}
		if negTTL == 0 || ttl < negTTL {
			negTTL = ttl
		}
	}
	return nil, negTTL, fmt.Errorf("%w for %q", ErrNoDNSKey, pkid)
}

// servers returns the servers to ask, or nil for the system resolver.
func (d *DNSKeys) servers() []string {
	if d.Server != "" {
		return []string{d.Server}
	}
	d.resolvMu.Lock()
	defer d.resolvMu.Unlock()
	if d.resolv == nil && !d.noResolv {
		conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(conf.Servers) == 0 {
			d.noResolv = true
			return nil
		}
		for _, s := range conf.Servers {
			d.resolv = append(d.resolv, net.JoinHostPort(s, conf.Port))
		}
	}
	return d.resolv
}

// exchangeTXT asks the servers in turn for the TXT records of name and
// returns each record's strings joined, with the smallest TTL of the
// records — or, for NXDOMAIN and an empty answer, no records and the
// negative TTL of the SOA in the authority section (0 when none).
func exchangeTXT(ctx context.Context, servers []string, name string) ([]string, time.Duration, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.RecursionDesired = true
	m.SetEdns0(4096, false)
	var lastErr error
	for _, server := range servers {
		r, err := exchange(ctx, server, m)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		switch r.Rcode {
		case dns.RcodeSuccess, dns.RcodeNameError:
		default:
			lastErr = fmt.Errorf("%s from %s", dns.RcodeToString[r.Rcode], server)
			continue
		}
		var txts []string
		var ttl uint32
		for _, rr := range r.Answer {
			if t, ok := rr.(*dns.TXT); ok && strings.EqualFold(t.Hdr.Name, name) {
				txts = append(txts, strings.Join(t.Txt, ""))
				if len(txts) == 1 || t.Hdr.Ttl < ttl {
					ttl = t.Hdr.Ttl
				}
			}
		}
		if len(txts) == 0 {
			for _, rr := range r.Ns {
				if soa, ok := rr.(*dns.SOA); ok {
					ttl = min(soa.Hdr.Ttl, soa.Minttl)
				}
			}
		}
		return txts, time.Duration(ttl) * time.Second, nil
	}
	return nil, 0, lastErr
}

// exchange sends m over UDP, and again over TCP when the answer was
// truncated.
func exchange(ctx context.Context, server string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", UDPSize: 4096}
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, server)
	}
	return r, err
}
