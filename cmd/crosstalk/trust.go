package main

import (
	"fmt"

	"github.com/crosstalk-go/crosstalk/signing"
)

// signingKeys loads the private keys the config names (agents'
// signing_key), by agent id: the relay signs those agents' POST /v1/send
// envelopes with them.
func (c *Config) signingKeys() (map[string]*signing.PrivateKey, error) {
	keys := map[string]*signing.PrivateKey{}
	for _, a := range c.Agents {
		if a.SigningKey == "" {
			continue
		}
		k, err := signing.LoadPrivateKey(a.SigningKey, "")
		if err != nil {
			return nil, fmt.Errorf("agents %q: signing_key: %w", a.ID, err)
		}
		keys[a.ID] = k
	}
	return keys, nil
}
