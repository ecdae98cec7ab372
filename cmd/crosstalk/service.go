package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/crosstalk-go/crosstalk/signing"
)

// checkConfig is `crosstalk relay --check-config`: cfg has passed
// Validate; it also reads what starting would read — the signing keys, the
// mail password file, the trust store — without opening the ledger, a
// listener or a connection, and prints what the relay would run with.
func checkConfig(e *env, cfg Config, path string) error {
	var errs []error
	if _, err := cfg.signingKeys(); err != nil {
		errs = append(errs, err)
	}
	if m := cfg.Mail; m != nil && m.PasswordFile != "" {
		if _, err := os.ReadFile(m.PasswordFile); err != nil {
			errs = append(errs, fmt.Errorf("mail.password_file: %w", err))
		}
	}
	if _, err := signing.NewTrustStore(cfg.trustFile()).Entries(); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("trust store %s: %w", cfg.trustFile(), err))
	}
	if err := errors.Join(errs...); err != nil {
		return withHint(err, "fix the config file or the files it names; docs/configuration.md lists every field")
	}
	tokens, _ := cfg.tokens()
	where := cfg.Ledger
	if where == "sqlite" {
		where = filepath.Join(cfg.DataDir, "ledger.db")
	}
	if path == "" {
		path = "(defaults)"
	}
	fmt.Fprintf(e.stdout, "config %s: ok\n", path)
	fmt.Fprintf(e.stdout, "listen %s, ledger %s, trust store %s\n", cfg.Listen, where, cfg.trustFile())
	fmt.Fprintf(e.stdout, "%d agents, %d tokens, shutdown within %s\n", len(cfg.Agents), len(tokens), time.Duration(cfg.ShutdownTimeout))
	return nil
}
