package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

var cmdToken = &command{
	name:    "token",
	args:    "new|list|revoke [--data DIR] [--principal NAME] [ID]",
	summary: "mint, list and revoke the relay's bearer tokens (for the browser extension)",
	run:     runToken,
}

// mintedTokens is the store of `crosstalk token new` in the relay's data
// dir, which the relay accepts alongside the config's tokens.
func (c *Config) mintedTokens() *tokens.Store {
	return tokens.Open(filepath.Join(c.DataDir, tokens.FileName))
}

func runToken(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Token mints bearer tokens for clients that do not read the relay's config,
such as the browser extension (README.md, "Browser extension"). They are
kept in the relay's data dir (`+tokens.FileName+`, 0600; only their SHA-256),
and a running relay accepts or stops accepting them at once.

  new [--principal NAME]   mint a token and print it (shown once). The
                           default principal, "`+api.LocalUser+`", has the local
                           user's powers on a relay without configured tokens
                           (send as any agent, read any queue); another NAME
                           acts as that agent only.
  list [--json]            the tokens: id, principal, created
  revoke ID                delete a token (its id, or a unique prefix)

Exit status: 0 on success, 1 on failure, 2 for usage errors.`)
	cfgPath := fs.String("config", "", "the relay's TOML config `file` (for data_dir)")
	dataDir := fs.String("data", "", "the relay's data `dir`; overrides data_dir")
	principal := fs.String("principal", api.LocalUser, "new: the token's principal (an agent id, or "+api.LocalUser+")")
	asJSON := fs.Bool("json", false, "list: print JSON Lines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("token: want a subcommand: new, list or revoke")
	}
	cfg, err := LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	store := cfg.mintedTokens()
	sub, rest := pos[0], pos[1:]
	switch {
	case sub == "new" && len(rest) == 0:
		secret, t, err := store.New(*principal)
		if errors.Is(err, tokens.ErrPrincipal) {
			return usagef("token new: --principal: %v", err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, secret)
		fmt.Fprintf(e.stderr, "minted token %s for principal %q in %s: paste it into the extension's options; it is not shown again\n", t.ID, t.Principal, store.Path())
		return nil
	case sub == "list" && len(rest) == 0:
		list, err := store.List()
		if err != nil {
			return err
		}
		enc := json.NewEncoder(e.stdout)
		for _, t := range list {
			if *asJSON {
				if err := enc.Encode(map[string]any{"id": t.ID, "principal": t.Principal, "created": t.Created}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(e.stdout, "%s  %-20s  %s\n", t.ID, visible(t.Principal), t.Created.Format(time.RFC3339))
		}
		if len(list) == 0 && !*asJSON {
			fmt.Fprintf(e.stderr, "crosstalk: no tokens in %s (mint one with crosstalk token new)\n", store.Path())
		}
		return nil
	case sub == "revoke" && len(rest) == 1:
		t, err := store.Revoke(rest[0])
		if errors.Is(err, tokens.ErrNotFound) {
			return withHint(err, "crosstalk token list shows the ids")
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "revoked token %s of %q\n", t.ID, t.Principal)
		return nil
	}
	return usagef("token: usage: crosstalk token new [--principal NAME] | list [--json] | revoke ID")
}
