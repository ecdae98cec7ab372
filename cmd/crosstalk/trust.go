package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/signing"
)

// newTrust returns the relay's signature verifier over the trust store of
// cfg, and a signer for the agents whose private keys the config names
// (signing_key), used by POST /v1/send.
func newTrust(cfg Config, log *slog.Logger) (gateway.Verifier, gateway.Signer, error) {
	v := &signing.Verifier{Store: signing.NewTrustStore(cfg.trustFile()), Logger: log.With("component", "trust")}
	if cfg.DNSServer != DNSServerNone {
		v.DNS = signing.NewDNSKeys(cfg.DNSServer)
	}
	verifier := gateway.NewTrustVerifier(v)
	keys := keySigner{}
	for _, a := range cfg.Agents {
		if a.SigningKey == "" {
			continue
		}
		k, err := signing.LoadPrivateKey(a.SigningKey, "")
		if err != nil {
			return nil, nil, fmt.Errorf("agents %q: signing_key: %w", a.ID, err)
		}
		keys[strings.ToLower(a.ID)] = k
	}
	return verifier, keys, nil
}

// keySigner signs for the agents whose keys the relay holds.
type keySigner map[string]*signing.PrivateKey

// Sign implements gateway.Signer.
func (s keySigner) Sign(ctx context.Context, principal string, text []byte) ([]byte, bool, error) {
	k, ok := s[strings.ToLower(principal)]
	if !ok {
		return nil, false, nil
	}
	out, err := signing.Sign(text, k, &signing.SignOptions{Announce: true})
	return out, err == nil, err
}
