package main

import (
	"os"
	"strings"
	"testing"
)

// FuzzConfig checks the relay's config file, which people edit by hand:
// decoding (LoadConfig's decodeConfig) and Validate never panic, a load error names the file, and
// every line of a validation error starts with the field at fault.
// Seeded from the TOML examples of docs/configuration.md.
func FuzzConfig(f *testing.F) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for _, block := range strings.Split(string(doc), "```toml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		f.Add([]byte(block))
		seeds++
	}
	if seeds == 0 {
		f.Fatal("no ```toml blocks in docs/configuration.md")
	}
	for _, s := range []string{
		"listen = \"0.0.0.0:1\"\nclaim_ttl = \"-1s\"\nlog_level = \"loud\"\nledger_replicas = 9\n",
		"[[agents]]\nid = \"a\"\nnames = [\"A\", \"A\"]\ntransport = \"mail\"\n[[agents]]\nid = \"a\"\n",
		"[mail]\nimap_security = \"ssl\"\n[[tokens]]\ntoken = \"short\"\n",
		"[groups]\n\"\" = \"x\"\n",
	} {
		f.Add([]byte(s))
	}
	// Fields a validation error may name (the TOML keys of Config).
	fields := []string{"listen", "data_dir", "ledger", "ledger_replicas", "rate_limit", "claim_ttl",
		"agents", "tokens[", "mail", "log_level", "folder", "clipboard", "groups", "hosts", "name", "admins", "trust_file"}
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "relay.toml"
		c, err := decodeConfig(path, data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config "+path+": ") {
				t.Fatalf("LoadConfig(%q) = %v, want an error naming the file", data, err)
			}
			return
		}
		for i := range c.Tokens {
			if c.Tokens[i].TokenFile != "" {
				return // reading files the input names (/dev/zero) is not this test's business
			}
		}
		err = c.Validate()
		if err == nil {
			return
		}
		for _, l := range strings.Split(err.Error(), "\n") {
			ok := false
			for _, fld := range fields {
				ok = ok || strings.HasPrefix(l, fld)
			}
			if !ok {
				t.Fatalf("Validate(%q): error line %q names no field", data, l)
			}
		}
	})
}
