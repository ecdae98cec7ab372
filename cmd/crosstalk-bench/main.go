// Command crosstalk-bench measures the relay's ingest on this machine:
//
//	crosstalk-bench ingest [--clients N] [--duration D] [--runs N] [--memory] [--clients-in-process] [--streams N] [--json] [--cpuprofile FILE]
//	crosstalk-bench scale  [--clients N] [--duration D] [--sync always|default] [--groups shared|disjoint] [--json]
//	crosstalk-bench history [--sizes 10000,100000] [--ledgers sqlite,jetstream] [--runs N] [--json]
//	crosstalk-bench import [--events N] [--file FILE] [--again] [--json] [--cpuprofile FILE]
//
// It is a separate binary so that the crosstalk binary does not carry the
// embedded NATS servers scale needs. docs/performance.md explains the
// figures and records them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/bench"
	"github.com/crosstalk-go/crosstalk/internal/procs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `crosstalk-bench — measure the relay's ingest on this machine

usage: crosstalk-bench ingest|scale|history|import [flags]

  ingest  the relay against its ceilings (docs/performance.md, "Relay ingest")
  scale   SQLite against JetStream, one node and a 3-node cluster
          (docs/performance.md, "Relay scale-out"; docs/scaling.md)
  history the relay's reads on ledgers of growing history, and ledger
          import (docs/performance.md, "History")
  import  crosstalk ledger import of a million events into SQLite
          (docs/performance.md, "Ledger import")

Run ` + "`crosstalk-bench ingest --help`" + ` for a command's flags.
`

const ingestDoc = `
Ingest measures, in one run and on this machine:

  (a) the ceiling: a bare net/http handler on loopback that only reads the
      body, parses the envelope and verifies its Ed25519 signature;
  (b) the relay: the real relay (as crosstalk relay starts it: HTTP API,
      signature verification against the trust store, SQLite ledger with
      group commit, fsync on every commit) in a temporary data dir, with
      --clients concurrent HTTP clients posting distinct signed envelopes;
  (c) a single writer appending one event at a time to SQLite, one fsync
      per append;
  (d) the disk alone: one event-sized write appended to a file and
      fsynced at a time.

The clients of (a) and (b) run in a process of their own (this program,
started again as a load process), as real callers do; the CPU time per
envelope counts both processes. --clients-in-process runs them in this
process instead, beside the servers, where they share the servers' Go
scheduler (how the figures before session 13 were taken; docs/performance.md,
"Clients in their own process").

Each runs for --duration in total, cut into 4 slices that take turns
(a, b, c, d, a, b, c, d, …) so that other load on a shared machine weighs
on all alike; the first tenth of every slice is warm-up and not counted. It
prints envelopes per second, p50/p99 latency, CPU time per envelope for
(a) and (b), the machine's busy and steal time during each (Linux), and
the ratios relay/ceiling (goal ≥ 0.5), relay/single-fsync (goal ≥ 3) and
relay/raw-fsync (goal ≥ 1.5).

--runs N (3 by default) makes N such runs in a row, each whole with its
own baselines, prints a row per run and their medians, and judges the goals
on the medians, as docs/performance.md does; --runs 1 prints the one run's
full table. With --json and more than one run the output is
{"runs": [...], "median": {...}}, each element shaped as one run's.

--memory runs (b) with the relay's ledger and projections in memory:
nothing is written to disk or fsynced. Its ratios are then not verdicts
on the relay but their bounds on this machine: what the relay's work
other than durability (HTTP, verification, the event, the projections,
the receipt) leaves of the ceiling's rate.

--streams N keeps N streams of the addressee's deliveries over every group
(GET /v1/agents/reader/stream) open on the relay of (b) for the whole run,
read by the load process, as N harnesses following that agent would: a
relay's tenth month, with its agents connected. Every envelope is then
also decided, encoded and sent N times; the report says what share of the
relay's envelopes each stream read.

Every measurement runs with GOMAXPROCS as crosstalk relay sets it (one
more than the runtime's choice, unless the GOMAXPROCS environment variable
is set; the load process keeps the runtime's choice). With --cpuprofile,
every sample of this process carries the label phase=ceiling, relay or
single (go tool pprof -tagfocus phase=relay); the load process's clients
write theirs to FILE.load, labelled alike (or are in FILE with
--clients-in-process). Nothing is kept: the
temporary directory is removed at the end. See docs/performance.md.`

const scaleDoc = `
Scale measures, in one run and on this machine, the relay's ingest
(--clients concurrent HTTP clients posting distinct signed envelopes to
POST /crosstalk/receive, as in crosstalk-bench ingest) against:

  (a) sqlite:  1 relay on its SQLite ledger (the default);
  (b) js-1:    1 relay on a single-node JetStream ledger;
  (c) js-3x3:  3 relays on one R3 JetStream ledger held by a 3-node NATS
               cluster, the clients spread evenly over the relays.

The envelopes go to 8 groups. With --groups shared (the default) every relay
of (c) writes to all 8, so the relays race for each group's next seq; with
--groups disjoint each relay writes to groups of its own.

The NATS servers are embedded in this process, on loopback, with their
JetStream stores in a temporary directory; --sync always (the default, as in
docs/scaling.md's production config) makes them fsync every write. The
relays run in this process too, each with its own HTTP server, trust store
and NATS connection. Each setup runs for --duration in total, cut into 4
slices that take turns (a, b, c, a, b, c, …) so that other load on a shared
machine weighs on all three alike; the first tenth of every slice is warm-up.
It prints envelopes per second, p50/p99 latency, the CPU time the whole
process spent per envelope, and the ratios against (a). Nothing is kept. See
docs/performance.md ("Relay scale-out") and docs/scaling.md ("Measured").`

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "ingest":
		err = runIngest(ctx, args[1:], stdout, stderr)
	case "scale":
		err = runScale(ctx, args[1:], stdout, stderr)
	case "history":
		err = runHistory(ctx, args[1:], stdout, stderr)
	case "import":
		err = runImport(ctx, args[1:], stdout, stderr)
	case loadWorker:
		// ingest --cpuprofile FILE runs it with FILE.load: the clients'
		// profile, labelled phase=ceiling or relay like the servers'.
		var stop func()
		if stop, err = startProfile(strings.Join(args[1:], "")); err == nil {
			err = bench.ServeLoad(ctx, os.Stdin, stdout)
			stop()
		}
	default:
		err = usagef("unknown command %q, want ingest, scale, history or import", args[0])
	}
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "crosstalk-bench: error: %s\n", ue.msg)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "crosstalk-bench: error: %s\n", err)
		return exitFailure
	}
}

// loadWorker is the hidden command that ingest runs its clients in
// (bench.ServeLoad): a process of their own, as real callers are.
const loadWorker = "load-worker"

// newFlags returns the flag set of a command: --help prints doc and the
// flags to stdout, a mistake is one error line.
func newFlags(name, synopsis, doc string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: crosstalk-bench %s %s\n\n%s\n\nflags:\n", name, synopsis, strings.TrimSpace(doc))
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args; positional arguments are mistakes. Only --help
// prints the usage (the flag package would print it on every error).
func parse(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return usagef("%s: %v (see `crosstalk-bench %s --help`)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ingest", "[--clients N] [--duration D] [--runs N] [--memory] [--clients-in-process] [--streams N] [--json] [--cpuprofile FILE]", ingestDoc, stdout)
	clients := fs.Int("clients", 64, "concurrent HTTP `clients`")
	duration := fs.Duration("duration", 8*time.Second, "how long each of the four measurements runs, in each run")
	runs := fs.Int("runs", 3, "how many whole `runs` to make in a row; with more than one, the goals are judged on their medians")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	memory := fs.Bool("memory", false, "keep the relay's ledger in memory: nothing durable, the bound of the durable relay's ratios")
	inProcess := fs.Bool("clients-in-process", false, "run the clients in this process, beside the servers (as before session 13), not in a load process of their own")
	streams := fs.Int("streams", 0, "keep `N` streams of the addressee's deliveries open on the relay, as N harnesses following it would")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *clients < 1 {
		return usagef("ingest: --clients must be at least 1")
	}
	if *duration < 100*time.Millisecond {
		return usagef("ingest: --duration must be at least 100ms")
	}
	if *runs < 1 {
		return usagef("ingest: --runs must be at least 1")
	}
	if *streams < 0 || *streams > bench.MaxStreams {
		return usagef("ingest: --streams must be 0 to %d", bench.MaxStreams)
	}
	stop, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	// GOMAXPROCS as crosstalk relay sets it, for every measurement alike.
	defer procs.ForRelay()()
	o := bench.IngestOptions{Clients: *clients, Duration: *duration, Progress: stderr, Memory: *memory, Streams: *streams}
	if !*inProcess {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("ingest: finding this program to run the load process: %w", err)
		}
		o.LoadCommand = []string{self, loadWorker}
		if *cpuProfile != "" {
			o.LoadCommand = append(o.LoadCommand, *cpuProfile+".load")
		}
	}
	if *asJSON {
		o.Progress = nil
	}
	if *runs == 1 {
		res, err := bench.Ingest(ctx, o)
		return report(stdout, res, err, *asJSON)
	}
	series, err := bench.IngestRuns(ctx, o, *runs)
	return report(stdout, series, err, *asJSON)
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("scale", "[--clients N] [--duration D] [--sync always|default] [--groups shared|disjoint] [--json]", scaleDoc, stdout)
	clients := fs.Int("clients", 64, "concurrent HTTP `clients`")
	duration := fs.Duration("duration", 5*time.Second, "how long each of the three setups runs")
	syncMode := fs.String("sync", "always", "JetStream sync_interval: always (fsync every write) or default (every 2 minutes)")
	groups := fs.String("groups", "shared", "shared: every relay of (c) writes to the same 8 groups; disjoint: each to its own")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *clients < 3 {
		return usagef("scale: --clients must be at least 3 (one per relay of the cluster setup)")
	}
	if *duration < 100*time.Millisecond {
		return usagef("scale: --duration must be at least 100ms")
	}
	if *syncMode != "always" && *syncMode != "default" {
		return usagef("scale: --sync must be always or default, not %q", *syncMode)
	}
	if *groups != "shared" && *groups != "disjoint" {
		return usagef("scale: --groups must be shared or disjoint, not %q", *groups)
	}
	defer procs.ForRelay()() // as crosstalk relay sets it, for every setup alike
	o := bench.ScaleOptions{Clients: *clients, Duration: *duration, SyncAlways: *syncMode == "always", Disjoint: *groups == "disjoint", Progress: stderr}
	if *asJSON {
		o.Progress = nil
	}
	res, err := bench.Scale(ctx, o)
	return report(stdout, res, err, *asJSON)
}

// report prints a bench's result: as indented JSON with --json, else as
// its table.
func report[R interface{ Print(io.Writer) }](stdout io.Writer, res R, err error, asJSON bool) error {
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, res)
	}
	res.Print(stdout)
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

const historyDoc = `
History builds ledgers of each of --sizes events on each of --ledgers (sqlite;
jetstream, a one-node JetStream in the process) with a realistic mix: half the
events in the group "big", the rest in seven others; requests that must be
answered, broadcasts, replies, acks and dispositions between six agents that
are not in the address book. It imports each as crosstalk ledger import does
(timed: events per second, generation of the JSON Lines included), starts the
relay on it (timed: building its projections), appends 1000 events, restarts
it (timed: catching the projections up from their checkpoint) and times, over
HTTP, each read of issue 13: the web inbox (/, a group's newest and a middle
page, a thread, the Agents page, an agent's page), the paged API reads
(events, deliveries, agents). For each read it prints the p50 of --runs runs,
the bytes of the answer and the ratio to the first size of the same ledger,
then the process's RSS (the relay runs in it) after the reads. Use --sizes
10000,1000000 for the issue's comparison. Nothing is kept. See
docs/performance.md ("History").`

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("history", "[--sizes 10000,100000] [--ledgers sqlite,jetstream] [--runs N] [--json]", historyDoc, stdout)
	sizes := fs.String("sizes", "10000,100000", "comma-separated ledger `sizes` in events, smallest first")
	ledgers := fs.String("ledgers", "sqlite", "comma-separated ledger `backends`: sqlite, jetstream")
	runs := fs.Int("runs", 15, "timed runs of each read per size")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 || n > 10_000_000 {
			return usagef("history: --sizes wants numbers from 100 to 10000000, not %q", f)
		}
		ns = append(ns, n)
	}
	if *runs < 1 {
		return usagef("history: --runs must be at least 1")
	}
	var ls []string
	for _, l := range strings.Split(*ledgers, ",") {
		switch l = strings.TrimSpace(l); l {
		case "sqlite", "jetstream":
			ls = append(ls, l)
		default:
			return usagef("history: --ledgers wants sqlite or jetstream, not %q", l)
		}
	}
	o := bench.HistoryOptions{Sizes: ns, Ledgers: ls, Runs: *runs, Progress: stderr}
	if *asJSON {
		o.Progress = nil
	}
	res, err := bench.History(ctx, o)
	return report(stdout, res, err, *asJSON)
}

const importDoc = `
Import times crosstalk ledger import of a JSON Lines export into a new
SQLite ledger in a temporary directory: the ledger opened as the command
opens it, fed by the same import code, closed (everything durable) before
the clock stops. The export holds --events events of the realistic mix of
crosstalk-bench history (half in the group "big", the rest in seven others;
messages, acks and dispositions between six agents), generated before the
clock starts. With --again it then imports the same file a second time,
when every event is already present and skipped (a resumed import). It
prints events per second (goal: ≥ 100000 into a new ledger, for 1000000
events).
With --file, the export is read from FILE, or generated into FILE and kept
when FILE does not exist, so that the command itself can be timed on it:

  crosstalk-bench import --file /tmp/1m.jsonl
  time crosstalk ledger import --ledger /tmp/new.db /tmp/1m.jsonl

See docs/performance.md ("Ledger import").`

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", "[--events N] [--file FILE] [--again] [--json] [--cpuprofile FILE]", importDoc, stdout)
	events := fs.Int("events", 1_000_000, "events in the generated export")
	file := fs.String("file", "", "JSON Lines export `file` to import; generated and kept when it does not exist")
	again := fs.Bool("again", false, "also time importing the same file again (every event present)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *events < 1 || *events > 10_000_000 {
		return usagef("import: --events wants a number from 1 to 10000000, not %d", *events)
	}
	stop, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	o := bench.ImportOptions{Events: *events, File: *file, Again: *again, Progress: stderr}
	if *asJSON {
		o.Progress = nil
	}
	res, err := bench.Import(ctx, o)
	return report(stdout, res, err, *asJSON)
}

// startProfile starts a CPU profile into the file at path ("": none) and
// returns the function that stops it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
