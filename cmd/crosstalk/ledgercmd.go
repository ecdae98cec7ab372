package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

var cmdLedger = &command{
	name:    "ledger",
	args:    "export|import|backup|reindex [--ledger PATH|nats://HOST:PORT,…] [--stream NAME] [FILE]",
	summary: "export a ledger as JSON Lines, import such an export (migration), back up a SQLite ledger online, rebuild its projections",
	run:     runLedger,
}

func runLedger(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Ledger export writes every event of a ledger as JSON Lines (one CCCS event per
line, in group and seq order) to FILE or standard output; FILE (mode 0600) is
replaced only by a whole export, never left half written. Ledger import reads
such lines from FILE or standard input and stores them with their ids, times
and seqs; events already present unchanged are skipped, so an import can be
repeated or resumed. A failed import into a SQLite ledger that did not exist
leaves no ledger behind.

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
relay and putting the copy in place of ledger.db (docs/operations.md).

Ledger reindex rebuilds the relay's projections of the ledger (who takes part
in which thread, acks, replies, discharges, claims, group and actor counts;
docs/scaling.md "Projections") from the whole ledger, with the address book of
the config. The relay maintains them as it appends and catches them up on
start; reindex after changing the agents' names or roles, or to check them
(--check compares what is stored with a rebuild and fails on a difference).`)
	cfgPath := fs.String("config", "", "TOML config `file`, for the data directory")
	dataDir := fs.String("data", "", "data `dir`; overrides data_dir")
	spec := fs.String("ledger", "", "SQLite `file` or nats:// URL(s); default DATA/ledger.db")
	stream := fs.String("stream", jetstream.DefaultStream, "JetStream stream `name`")
	replicas := fs.Int("replicas", 1, "JetStream replicas when the stream is created")
	check := fs.Bool("check", false, "reindex: compare the stored projections with a rebuild instead of replacing them")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if _, err := parseFlags(fs, args); err != nil {
			return err
		}
		return usagef("ledger: want export, import, backup or reindex (see `crosstalk ledger --help`)")
	}
	verb := args[0]
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if verb != "export" && verb != "import" && verb != "backup" && verb != "reindex" {
		return usagef("ledger: unknown action %q, want export, import, backup or reindex", verb)
	}
	if len(pos) > 1 {
		return usagef("ledger %s: unexpected argument %q", verb, pos[1])
	}
	if verb == "reindex" {
		if len(pos) > 0 {
			return usagef("ledger reindex: unexpected argument %q", pos[0])
		}
		return ledgerReindex(ctx, e, *cfgPath, *dataDir, *spec, *stream, *check)
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
	// The input first: a mistyped name must not create an empty ledger.
	var r io.Reader = e.stdin
	if verb == "import" && len(pos) == 1 {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return fmt.Errorf("ledger import: %s is a directory, not an export", pos[0])
		}
		r = f
	}
	var created []string // what opening a new SQLite ledger creates, for an import that fails
	if verb == "import" && !server.IsJetStream(*spec) {
		created = newPaths(*spec)
	}
	s, err := server.OpenLedger(ctx, server.LedgerOptions{Spec: *spec, Stream: *stream, Replicas: *replicas, MustExist: verb != "import"})
	if errors.Is(err, os.ErrNotExist) {
		return withHint(err, "name the ledger with --ledger, or the data directory with --data")
	}
	if err != nil {
		removeCreated(created)
		return err
	}
	defer s.Close()

	if verb == "export" {
		if len(pos) == 1 {
			return exportFile(ctx, s, pos[0])
		}
		return ledger.Export(ctx, s, e.stdout)
	}
	n, err := ledger.Import(ctx, s, skipBOM(r))
	if err != nil && len(created) > 0 {
		// A ledger this import created holds only part of the export:
		// nothing of it may remain. An existing one keeps what was
		// imported (an import can be repeated or resumed).
		s.Close()
		removeCreated(created)
		fmt.Fprintf(e.stderr, "crosstalk: import failed; removed the new ledger %s\n", *spec)
		return err
	}
	fmt.Fprintf(e.stderr, "crosstalk: %d events imported or already present\n", n)
	return err
}

// newPaths returns what opening the SQLite ledger at spec would create:
// the file with those of its journal, WAL and shared-memory files that
// are not there (an orphaned WAL is not the import's to remove), and the
// missing directories above it, deepest first. Nothing when spec exists.
func newPaths(spec string) []string {
	if _, err := os.Lstat(spec); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	paths := []string{spec}
	for _, p := range []string{spec + "-journal", spec + "-wal", spec + "-shm"} {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			paths = append(paths, p)
		}
	}
	for dir := filepath.Dir(spec); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) || dir == filepath.Dir(dir) {
			break
		}
		paths = append(paths, dir)
	}
	return paths
}

// removeCreated removes paths (from newPaths), in order; a directory
// something else was put in meanwhile stays.
func removeCreated(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// skipBOM returns r without the UTF-8 byte order mark an editor may have
// put at its start (an export saved again on Windows), which would make
// line 1 no JSON.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\ufeff" {
		br.Discard(3)
	}
	return br
}

// exportFile writes the export of s to the file name, replacing it only
// once the export is whole: it goes to a temporary file beside name (mode
// 0600, as it holds every envelope), fsynced, then renamed. An export that
// fails or is interrupted leaves no partial file an import would take for
// a whole one.
func exportFile(ctx context.Context, s ledger.Store, name string) error {
	// A directory would fail only at the rename, after the whole export
	// was written beside it, with "file exists".
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		return fmt.Errorf("ledger export: %s is a directory; name the export file in it", name)
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".partial-*")
	if err != nil {
		return fmt.Errorf("ledger export: %w", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := ledger.Export(ctx, s, f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("ledger export: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ledger export: %w", err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return fmt.Errorf("ledger export: %w", err)
	}
	done = true
	if d, err := os.Open(filepath.Dir(name)); err == nil {
		d.Sync() // the rename; not every platform syncs a directory
		d.Close()
	}
	return nil
}

// ledgerReindex rebuilds the projections of the ledger the config (or
// spec) names, in their file, with the config's address book; with check
// it rebuilds them in memory instead and compares.
func ledgerReindex(ctx context.Context, e *env, cfgPath, dataDir, spec, stream string, check bool) error {
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		return err
	}
	if dataDir != "" {
		cfg.DataDir = dataDir
	}
	if spec != "" {
		cfg.Ledger = spec
	}
	cfg.LedgerStream = stream
	opts, err := cfg.serverOptions(newLogger(e, "warn"))
	if err != nil {
		return err
	}
	if !server.IsJetStream(opts.LedgerSpec()) {
		if _, err := os.Stat(opts.LedgerSpec()); err != nil {
			return withHint(fmt.Errorf("ledger: %w", err), "name the ledger with --ledger, or the data directory with --data")
		}
	}
	core, err := server.OpenCore(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if core != nil {
			core.Close()
		}
	}()
	start := time.Now()
	if !check {
		err := core.Relay.Reindex(ctx)
		if errors.Is(err, projection.ErrDamaged) {
			// Damage SQLite met only when emptying the file: start it
			// again instead (deleting it is always safe, docs/scaling.md).
			path := server.ProjectionPath(opts.LedgerSpec(), opts.LedgerStream, opts.DataDir)
			core.Close()
			if err := projection.Remove(path); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "crosstalk: the projections file %s was damaged; removed it\n", path)
			if core, err = server.OpenCore(ctx, opts); err != nil {
				return err
			}
			err = core.Relay.Reindex(ctx)
		}
		if err != nil {
			return err
		}
		pos, _, err := core.Relay.ProjectionHighWater(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "crosstalk: projections rebuilt up to log position %d in %s\n", pos, time.Since(start).Round(time.Millisecond))
		return nil
	}
	diff, err := core.Relay.CheckProjection(ctx)
	if err != nil {
		return err
	}
	if len(diff) > 0 {
		for _, d := range diff[:min(len(diff), 20)] {
			fmt.Fprintln(e.stdout, d)
		}
		return fmt.Errorf("ledger reindex --check: %d rows differ from a rebuild; run `crosstalk ledger reindex`", len(diff))
	}
	fmt.Fprintf(e.stderr, "crosstalk: projections match a rebuild (%s)\n", time.Since(start).Round(time.Millisecond))
	return nil
}
