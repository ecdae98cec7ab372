package signing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// DNSNames returns the TXT names to query for pkid, in order (docs/design.md §4.3):
// for `name@domain`, `name._crosstalk-key.domain.` then
// `_crosstalk-key.domain.`; for a bare domain, `_crosstalk-key.domain.`.
// A name part that is not a DNS label is skipped. It returns nil when pkid
// has no domain (then DNS has nothing to say about it).
func DNSNames(pkid string) []string {
	name, domain, hasAt := strings.Cut(pkid, "@")
	if !hasAt {
		name, domain = "", pkid
	}
	domain = strings.TrimSuffix(domain, ".")
	if !isDomain(domain) {
		return nil
	}
	var out []string
	if hasAt && isLabel(name) {
		out = append(out, name+"._crosstalk-key."+domain+".")
	}
	return append(out, "_crosstalk-key."+domain+".")
}

// ParseDNSRecord parses a TXT value `ed25519:pk=<base64>` (or
// `secp256r1:pk=…`; more `;`-separated parameters are ignored) as the key of
// pkid. Errors wrap ErrKeyFile, ErrUnsupportedAlg or ErrKeyID.
func ParseDNSRecord(pkid, txt string) (*PublicKey, error) {
	tag, params, ok := strings.Cut(strings.TrimSpace(txt), ":")
	if !ok {
		return nil, fmt.Errorf("%w: DNS record %q: want alg:pk=base64", ErrKeyFile, short(txt))
	}
	alg, err := ParseAlg(tag)
	if err != nil {
		return nil, err
	}
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "pk") {
			raw, err := decodeB64(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%w: DNS record: %v", ErrKeyFile, err)
			}
			return publicFromRaw(alg, pkid, raw)
		}
	}
	return nil, fmt.Errorf("%w: DNS record %q has no pk=", ErrKeyFile, short(txt))
}

// LookupDNSKeys returns the keys DNS publishes for pkid, using r (nil
// means net.DefaultResolver). It queries the names of DNSNames in order and
// returns the keys of the first name that has any crosstalk key record
// (at most MaxDNSKeys); TXT records of other shapes are ignored. No record anywhere (or a pkid
// with no domain) is ErrNoDNSKey; a failed lookup (timeout, SERVFAIL) is
// returned as it is, so the caller can tell "no key" from "don't know".
func LookupDNSKeys(ctx context.Context, r *net.Resolver, pkid string) ([]*PublicKey, error) {
	if r == nil {
		r = net.DefaultResolver
	}
	names := DNSNames(pkid)
	for _, name := range names {
		txts, err := r.LookupTXT(ctx, name)
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("signing: DNS lookup of %s: %w", name, err)
		}
		if keys := parseDNSRecords(pkid, txts); len(keys) > 0 {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("%w for %q", ErrNoDNSKey, pkid)
}

// parseDNSRecords returns the keys of the crosstalk key records among
// txts, at most MaxDNSKeys; other records are ignored.
func parseDNSRecords(pkid string, txts []string) []*PublicKey {
	var keys []*PublicKey
	for _, t := range txts {
		if k, err := ParseDNSRecord(pkid, t); err == nil {
			keys = append(keys, k)
			if len(keys) == MaxDNSKeys {
				break
			}
		}
	}
	return keys
}

func isLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isDomain(s string) bool {
	if len(s) > 240 || !strings.Contains(s, ".") {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}
