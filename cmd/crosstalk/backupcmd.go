package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// ledgerBackup is `crosstalk ledger backup DEST`: an online copy of the
// SQLite ledger spec (sqlite.Backup).
func ledgerBackup(ctx context.Context, e *env, spec string, pos []string) error {
	if len(pos) != 1 {
		return usagef("ledger backup: want the backup file to create, e.g. crosstalk ledger backup ledger-$(date +%%F).db")
	}
	if strings.HasPrefix(spec, "nats://") || strings.HasPrefix(spec, "tls://") {
		return withHint(errors.New("ledger backup: a JetStream ledger is backed up by NATS"),
			"use `nats stream backup` or `crosstalk ledger export` (docs/operations.md)")
	}
	info, err := sqlite.Backup(ctx, spec, pos[0])
	if errors.Is(err, sqlite.ErrBackupExists) {
		return withHint(err, "a backup never overwrites a file; name a new one")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %d events in %d groups, %d bytes\n", spec, info.Path, info.Events, info.Groups, info.Bytes)
	return nil
}
