package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

var cmdLedger = &command{
	name:    "ledger",
	args:    "export|import|backup [--ledger PATH|nats://HOST:PORT,…] [--stream NAME] [FILE]",
	summary: "export a ledger as JSON Lines, import such an export (migration), back up a SQLite ledger online",
	run:     runLedger,
}

func runLedger(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Ledger export writes every event of a ledger as JSON Lines (one CCCS event per
line, in group and seq order) to FILE or standard output. Ledger import reads
such lines from FILE or standard input and stores them with their ids, times
and seqs; events already present unchanged are skipped, so an import can be
repeated or resumed.

The ledger is a SQLite file (default: ledger.db in the data directory) or,
with a nats:// URL (several separated by commas), a NATS JetStream ledger.
Moving a relay from SQLite to JetStream (docs/scaling.md):

  crosstalk ledger export > ledger.jsonl
  crosstalk ledger import --ledger nats://n1:4222,nats://n2:4222 --replicas 3 ledger.jsonl

Stop the relay, or accept that events appended during the export are not in
it (each group is exported up to its last seq when the export began).

Ledger backup FILE copies a SQLite ledger into the new file FILE while the
relay runs: a consistent snapshot holding every event recorded before the
backup began, checked, fsynced, never a partial file. Restore by stopping the
relay and putting the copy in place of ledger.db (docs/operations.md).`)
	cfgPath := fs.String("config", "", "TOML config `file`, for the data directory")
	dataDir := fs.String("data", "", "data `dir`; overrides data_dir")
	spec := fs.String("ledger", "", "SQLite `file` or nats:// URL(s); default DATA/ledger.db")
	stream := fs.String("stream", jetstream.DefaultStream, "JetStream stream `name`")
	replicas := fs.Int("replicas", 1, "JetStream replicas when the stream is created")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if _, err := parseFlags(fs, args); err != nil {
			return err
		}
		return usagef("ledger: want export, import or backup (see `crosstalk ledger --help`)")
	}
	verb := args[0]
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if verb != "export" && verb != "import" && verb != "backup" {
		return usagef("ledger: unknown action %q, want export, import or backup", verb)
	}
	if len(pos) > 1 {
		return usagef("ledger %s: unexpected argument %q", verb, pos[1])
	}
	if *spec == "" {
		cfg, err := LoadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if *dataDir != "" {
			cfg.DataDir = *dataDir
		}
		*spec = filepath.Join(cfg.DataDir, "ledger.db")
	}
	if verb == "backup" {
		return ledgerBackup(ctx, e, *spec, pos)
	}
	s, err := server.OpenLedger(ctx, server.LedgerOptions{Spec: *spec, Stream: *stream, Replicas: *replicas, MustExist: verb != "import"})
	if errors.Is(err, os.ErrNotExist) {
		return withHint(err, "name the ledger with --ledger, or the data directory with --data")
	}
	if err != nil {
		return err
	}
	defer s.Close()

	if verb == "export" {
		w := e.stdout
		if len(pos) == 1 {
			f, err := os.Create(pos[0])
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		if err := ledger.Export(ctx, s, w); err != nil {
			return err
		}
		if f, ok := w.(*os.File); ok && w != e.stdout {
			return f.Sync()
		}
		return nil
	}
	var r io.Reader = e.stdin
	if len(pos) == 1 {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	n, err := ledger.Import(ctx, s, r)
	fmt.Fprintf(e.stderr, "crosstalk: %d events imported or already present\n", n)
	return err
}
