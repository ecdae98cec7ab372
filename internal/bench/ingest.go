package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Goals of docs/performance.md ("Relay ingest").
const (
	goalCeilingRatio = 0.5
	goalFsyncRatio   = 3
	goalRawRatio     = 1.5 // issue 19: group commit clearly beats one fsync per envelope
	goalP99          = 25 * time.Millisecond
)

// benchKeyID is the key id the benchmark signs with.
const benchKeyID = "bench@crosstalk.invalid"

// IngestResult is the outcome of Ingest (`crosstalk-bench ingest --runs 1`);
// its JSON form is that command's --json output, and each run's in an
// IngestSeries.
type IngestResult struct {
	Machine  Machine `json:"machine"`
	Clients  int     `json:"clients"`
	Duration string  `json:"duration"`
	// Memory is IngestOptions.Memory: the relay of (b) kept its ledger in
	// memory, with nothing durable.
	Memory bool `json:"memory_ledger,omitempty"`
	// ClientsInProcess is true when the clients of (a) and (b) ran in the
	// servers' process (IngestOptions.LoadCommand empty).
	ClientsInProcess bool `json:"clients_in_process,omitempty"`
	// Streams is IngestOptions.Streams; StreamDeliveries the deliveries
	// they read in all, and RelayEvents the envelopes the relay took in
	// all (warm-ups included): a stream that keeps up reads all of them.
	Streams          int   `json:"streams,omitempty"`
	StreamDeliveries int64 `json:"stream_deliveries,omitempty"`
	RelayEvents      int64 `json:"relay_events,omitempty"`
	Ceiling          Phase `json:"ceiling"`
	Relay            Phase `json:"relay"`
	Single           Phase `json:"single_fsync"`
	// Raw is the disk's own rate: one record-sized write appended to a
	// file and fsynced at a time, no database.
	Raw Phase `json:"raw_append_fsync"`
	// RelayCommits and RelayPerCommit describe the relay's group commit:
	// write transactions (fsyncs) during the run, and write operations per
	// transaction.
	RelayCommits   int64   `json:"relay_commits"`
	RelayPerCommit float64 `json:"relay_ops_per_commit"`
	CeilingRatio   float64 `json:"relay_over_ceiling"`
	FsyncRatio     float64 `json:"relay_over_single_fsync"`
	RawRatio       float64 `json:"relay_over_raw_fsync"`
	Goals          struct {
		CeilingRatio float64 `json:"relay_over_ceiling"`
		FsyncRatio   float64 `json:"relay_over_single_fsync"`
		RawRatio     float64 `json:"relay_over_raw_fsync"`
		P99Millis    float64 `json:"relay_p99_ms"`
	} `json:"goals"`
}

// Machine describes where the figures come from.
type Machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	TempDir    string `json:"temp_dir"` // where the ledgers were
	// FsyncMillis is the median time to write 4 KiB to a file in TempDir
	// and fsync it: what one durable commit costs at the least.
	FsyncMillis float64 `json:"fsync_ms"`
}

// Phase is one measurement.
type Phase struct {
	Name   string  `json:"name"`
	Count  int64   `json:"count"`  // envelopes (appends) completed in the measured window
	Errors int64   `json:"errors"` // requests that failed or got another status than 200
	PerSec float64 `json:"per_second"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	// CPUMicros is the process's CPU time per completed request, clients
	// and server together (HTTP phases only).
	CPUMicros float64 `json:"cpu_us_per_envelope,omitempty"`
	// HostBusyPct and HostStealPct are the machine's CPU time during the
	// slices (Linux only), in percent of all its CPUs' time: spent running
	// anything (this process or another), and stolen by the hypervisor (a
	// virtual CPU wanted to run and could not). Near 100 % busy, a rate is
	// set by CPU per envelope; steal lowers it unevenly. On a virtual
	// machine whose disk the hypervisor serves from the same CPUs, the
	// raw fsync loop shows what the disk's I/O alone steals
	// (docs/performance.md "Session 9").
	// Both are absent from the JSON where they were not measured (not
	// Linux); where host_busy_pct is present and host_steal_pct absent,
	// the steal was zero.
	HostBusyPct  float64 `json:"host_busy_pct,omitempty"`
	HostStealPct float64 `json:"host_steal_pct,omitempty"`
}

// benchRounds is how many slices each measurement is cut into. The slices
// of the four measurements take turns (a, b, c, d, a, b, c, d, …), so that
// whatever else runs on a shared machine weighs on all four alike.
const benchRounds = 4

// IngestOptions configure Ingest.
type IngestOptions struct {
	// Clients is the number of concurrent HTTP clients (at least 1).
	Clients int
	// Duration is how long each of the four measurements runs in total.
	Duration time.Duration
	// Progress receives a line per round; nil discards them.
	Progress io.Writer
	// Memory runs (b) with the relay's ledger and projections in memory:
	// nothing is written to disk or fsynced, so its ratio to the ceiling
	// is what the relay's work other than durability allows on this
	// machine, the bound of the durable relay's (docs/performance.md,
	// "Session 10"). The goals' verdicts are not about such a relay.
	Memory bool
	// LoadCommand, when set, runs the clients of (a) and (b) in a process
	// of their own: the command (with its arguments) must serve ServeLoad
	// on its stdin and stdout. Empty runs them in this process, beside
	// the servers, sharing their Go scheduler. The CPU per envelope then
	// counts both processes.
	LoadCommand []string
	// Streams opens that many streams of the addressee's deliveries over
	// every group on the relay of (b) before its first slice, read for
	// the whole run (by the load process when there is one), as that many
	// harnesses following one agent would: every envelope is then also
	// decided and sent Streams times. At most MaxStreams.
	Streams int
}

// Ingest measures, in one run and on this machine, (a) the ceiling: a bare
// net/http handler that only reads, parses and verifies; (b) the relay as
// server.Open starts it, with a SQLite ledger in a temporary directory;
// (c) a single writer appending to SQLite with one fsync per append; (d)
// record-sized appends to a plain file, one fsync each. See
// docs/performance.md ("Relay ingest").
func Ingest(ctx context.Context, o IngestOptions) (*IngestResult, error) {
	clients, d, progress := o.Clients, o.Duration, o.Progress
	if clients < 1 {
		return nil, errors.New("bench: want at least 1 client")
	}
	if o.Streams < 0 || o.Streams > MaxStreams {
		return nil, fmt.Errorf("bench: want 0 to %d streams", MaxStreams)
	}
	if progress == nil {
		progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "crosstalk-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &IngestResult{Machine: machine(filepath.Dir(tmp)), Clients: clients, Duration: d.String(), Memory: o.Memory, Streams: o.Streams}
	if res.Machine.FsyncMillis, err = fsyncCost(filepath.Join(tmp, "fsync-probe")); err != nil {
		return nil, err
	}
	res.Goals.CeilingRatio, res.Goals.FsyncRatio, res.Goals.RawRatio = goalCeilingRatio, goalFsyncRatio, goalRawRatio
	res.Goals.P99Millis = float64(goalP99) / float64(time.Millisecond)

	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		return nil, err
	}
	// The servers start under their measurement's profiler label, so
	// that their goroutines carry it.
	var (
		ceilingURL string
		stop       func()
	)
	labelled(ctx, "ceiling", func(context.Context) { ceilingURL, stop, err = startCeiling(key.Public()) })
	if err != nil {
		return nil, err
	}
	defer stop()
	var (
		load     *loadProc
		fromPool func() ([]byte, error) // the ceiling's envelopes, clients in this process
	)
	if len(o.LoadCommand) > 0 {
		if load, err = startLoad(ctx, o.LoadCommand, key); err != nil {
			return nil, err
		}
		defer load.close()
	} else if fromPool, err = reusedPool(key); err != nil {
		return nil, err
	}
	res.ClientsInProcess = load == nil
	if err := benchRun(ctx, res, tmp, key, clients, d, ceilingURL, fromPool, load, progress); err != nil {
		return nil, err
	}
	if res.Ceiling.PerSec > 0 {
		res.CeilingRatio = res.Relay.PerSec / res.Ceiling.PerSec
	}
	if res.Raw.PerSec > 0 {
		res.RawRatio = res.Relay.PerSec / res.Raw.PerSec
	}
	if res.Single.PerSec > 0 {
		res.FsyncRatio = res.Relay.PerSec / res.Single.PerSec
	}
	return res, nil
}

// reusedPool signs 4096 envelopes and returns a function that hands
// them out in turn: the ceiling keeps nothing, so reusing them is fine.
func reusedPool(key *signing.PrivateKey) (func() ([]byte, error), error) {
	pool := &source{key: key, groups: allGroups}
	if err := pool.grow(4096); err != nil {
		return nil, err
	}
	var next atomic.Int64
	return func() ([]byte, error) { return pool.stock[int(next.Add(1)-1)%len(pool.stock)], nil }, nil
}

// benchRun takes the measurements in turns once the ceiling server runs.
func benchRun(ctx context.Context, res *IngestResult, tmp string, key *signing.PrivateKey,
	clients int, d time.Duration, ceilingURL string, fromPool func() ([]byte, error), load *loadProc, progress io.Writer) error {
	slice := d / benchRounds
	ceiling, relay, single, raw := &meter{}, &meter{}, &meter{}, &meter{}
	ceilingClient := newBenchClient(clients)
	defer ceilingClient.CloseIdleConnections()
	relayClient := newBenchClient(clients)
	defer relayClient.CloseIdleConnections()

	driveCeiling := func() (err error) {
		labelled(ctx, "ceiling", func(ctx context.Context) {
			if load != nil {
				err = load.drive(ceilingURL, clients, slice, false, ceiling)
				return
			}
			err = drive(ctx, ceilingClient, ceilingURL, clients, time.Now(), slice, fromPool, ceiling)
		})
		return err
	}
	fmt.Fprintf(progress, "bench: round 1/%d: (a) ceiling, %d clients, %s\n", benchRounds, clients, slice)
	if err := driveCeiling(); err != nil {
		return err
	}
	// Distinct envelopes for the relay's next slice, signed before it
	// starts: first enough for a slice at the ceiling's rate, then, before
	// every other slice, a fifth more than the relay took per slice so
	// far. Envelopes signed during a slice would charge the relay, and
	// not the ceiling (which reuses its stock), with signing's CPU time;
	// if the relay is faster still, clients sign the rest as they go.
	fresh := &source{key: key, groups: allGroups}
	ensure := func(n int) error {
		n = min(n, 300_000)
		if load != nil {
			_, err := load.call(loadReq{Op: "ensure", N: n})
			return err
		}
		_, err := fresh.ensure(n)
		return err
	}
	n := int(ceiling.perSec() * slice.Seconds() * 1.2)
	fmt.Fprintf(progress, "bench: signing %d distinct envelopes for the relay\n", n)
	if err := ensure(n); err != nil {
		return err
	}
	ledgerSpec, relayName := "", "relay: HTTP + verify + SQLite"
	if res.Memory {
		ledgerSpec, relayName = memoryLedger, "relay: HTTP + verify, ledger in memory"
	}
	var (
		rr     *server.Server
		store  *sqlite.Store
		err    error
		sample []ledger.Event
	)
	labelled(ctx, "relay", func(ctx context.Context) {
		rr, err = startRelay(ctx, filepath.Join(tmp, "relay"), key.Public(), ledgerSpec, 0)
	})
	if err != nil {
		return err
	}
	defer func() {
		if rr != nil {
			shutdown(rr)
		}
	}()
	var streamed atomic.Int64 // the streams' deliveries, when they run in this process
	if res.Streams > 0 {
		fmt.Fprintf(progress, "bench: opening %d streams of %s's deliveries on the relay\n", res.Streams, streamAgent)
		if load != nil {
			_, err = load.call(loadReq{Op: "streams", URL: rr.URL(), N: res.Streams})
		} else {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			labelled(sctx, "streams", func(ctx context.Context) { err = openStreams(ctx, rr.URL(), res.Streams, &streamed) })
		}
		if err != nil {
			return err
		}
	}
	labelled(ctx, "single", func(ctx context.Context) { store, err = sqlite.Open(ctx, filepath.Join(tmp, "single.db"), nil) })
	if err != nil {
		return err
	}
	defer store.Close()

	var stats sqlite.Stats
	for round := range benchRounds {
		if round > 0 {
			fmt.Fprintf(progress, "bench: round %d/%d: (a) ceiling\n", round+1, benchRounds)
			if err := driveCeiling(); err != nil {
				return err
			}
		}
		fmt.Fprintf(progress, "bench: round %d/%d: (b) relay\n", round+1, benchRounds)
		before := sqliteStats(rr)
		labelled(ctx, "relay", func(ctx context.Context) {
			if load != nil {
				err = load.drive(rr.URL()+"/crosstalk/receive", clients, slice, true, relay)
				return
			}
			err = drive(ctx, relayClient, rr.URL()+"/crosstalk/receive", clients, time.Now(), slice, fresh.next, relay)
		})
		if err != nil {
			return err
		}
		if round < benchRounds-1 {
			if err := ensure(int(relay.done) / (round + 1) * 6 / 5); err != nil {
				return err
			}
		}
		after := sqliteStats(rr)
		stats.Commits += after.Commits - before.Commits
		stats.Ops += after.Ops - before.Ops
		if sample == nil {
			if sample, err = rr.Store().Range(ctx, "bench-0", 0, nil, 256); err != nil {
				return err
			}
			if len(sample) == 0 {
				return errors.New("bench: the relay stored no events")
			}
		}
		fmt.Fprintf(progress, "bench: round %d/%d: (c) single writer\n", round+1, benchRounds)
		labelled(ctx, "single", func(ctx context.Context) { err = appendSingly(ctx, store, slice, sample, single) })
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "bench: round %d/%d: (d) raw append+fsync\n", round+1, benchRounds)
		if err := appendRaw(filepath.Join(tmp, "raw.log"), slice, len(sample[0].Data), raw); err != nil {
			return err
		}
	}
	err = shutdown(rr)
	rr = nil
	if err != nil {
		return err
	}
	res.Ceiling = ceiling.phase("ceiling: parse + verify")
	res.Relay = relay.phase(relayName)
	res.Single = single.phase("single writer, fsync per append")
	res.Raw = raw.phase("raw file append + fsync")
	res.RelayEvents = relay.done
	if res.StreamDeliveries = relay.streamed; load == nil {
		res.StreamDeliveries = streamed.Load()
	}
	res.RelayCommits = stats.Commits
	if stats.Commits > 0 {
		res.RelayPerCommit = float64(stats.Ops) / float64(stats.Commits)
	}
	return store.Close()
}

// startCeiling serves, on a loopback port, a handler that only reads,
// parses and verifies, and returns its URL and a function that stops it.
func startCeiling(pub *signing.PublicKey) (string, func(), error) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, gateway.MaxIntake+1))
		if err != nil || len(body) > gateway.MaxIntake {
			http.Error(w, "bad body", http.StatusRequestEntityTooLarge)
			return
		}
		env, err := envelope.NewReader(bytes.NewReader(body)).Next()
		if err != nil {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		if res := signing.Verify(env, pub); res.Status != signing.StatusVerified {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/crosstalk/receive", func() { srv.Close() }, nil
}

// appendSingly appends the sample's records one at a time for d, each its
// own transaction and fsync, and adds those that end after the warm-up to m.
func appendSingly(ctx context.Context, st *sqlite.Store, d time.Duration, sample []ledger.Event, m *meter) error {
	defer m.hostDuring()()
	start := time.Now()
	warm, end := start.Add(d/10), start.Add(d)
	for time.Now().Before(end) {
		m.seq++
		ev := sample[int(m.seq)%len(sample)]
		rec := ledger.Record{Kind: ev.Kind, GroupID: ev.GroupID, By: ev.By, Data: ev.Data, DedupeKey: fmt.Sprintf("single-%d", m.seq)}
		t0 := time.Now()
		if _, err := st.Append(ctx, []ledger.Record{rec}); err != nil {
			return err
		}
		if t1 := time.Now(); !t0.Before(warm) && !t1.After(end) {
			m.count++
			m.lats = append(m.lats, t1.Sub(t0))
		}
	}
	m.measured += d - d/10
	return nil
}

// appendRaw appends size-byte records to the file at path for d, each
// followed by an fsync, and adds those that end after the warm-up to m:
// the rate of a disk that makes every record durable on its own.
func appendRaw(path string, d time.Duration, size int, m *meter) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := bytes.Repeat([]byte{'x'}, max(size, 1))
	rec[len(rec)-1] = '\n'
	defer m.hostDuring()()
	start := time.Now()
	warm, end := start.Add(d/10), start.Add(d)
	for time.Now().Before(end) {
		t0 := time.Now()
		if _, err := f.Write(rec); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if t1 := time.Now(); !t0.Before(warm) && !t1.After(end) {
			m.count++
			m.lats = append(m.lats, t1.Sub(t0))
		}
	}
	m.measured += d - d/10
	return f.Close()
}

// Print writes r as a table, with a verdict per goal; a goal over a
// disk's rate that lies above the ceiling's rate is marked out of reach
// on this machine.
func (r *IngestResult) Print(w io.Writer) {
	fmt.Fprintf(w, "crosstalk-bench ingest: %d clients %s, %s per measurement\n", r.Clients, r.clientsWhere(), r.Duration)
	fmt.Fprintf(w, "machine: %s, %d CPUs (GOMAXPROCS %d), %s %s\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.OS)
	fmt.Fprintf(w, "disk: write+fsync of 4 KiB in %s: %.3f ms (median)\n\n", r.Machine.TempDir, r.Machine.FsyncMillis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tenvelopes/s\tp50 ms\tp99 ms\terrors\tCPU µs/envelope\thost busy %\thost steal %\t")
	for _, p := range []Phase{r.Ceiling, r.Relay, r.Single, r.Raw} {
		cpu, busy, steal := "-", "-", "-"
		if p.CPUMicros > 0 {
			cpu = fmt.Sprintf("%.0f", p.CPUMicros)
		}
		if p.HostBusyPct > 0 {
			busy, steal = fmt.Sprintf("%.0f", p.HostBusyPct), fmt.Sprintf("%.1f", p.HostStealPct)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%d\t%s\t%s\t%s\t\n", p.Name, p.PerSec, p.P50ms, p.P99ms, p.Errors, cpu, busy, steal)
	}
	tw.Flush()
	if r.Streams > 0 {
		fmt.Fprintf(w, "\nstreams: %d open on the relay, %d deliveries read: %.1f%% of the %d envelopes it took, per stream\n",
			r.Streams, r.StreamDeliveries, 100*float64(r.StreamDeliveries)/float64(r.Streams)/float64(max(r.RelayEvents, 1)), r.RelayEvents)
	}
	if !r.Memory {
		fmt.Fprintf(w, "\nrelay group commit: %d commits, %.1f appends per commit\n", r.RelayCommits, r.RelayPerCommit)
	} else {
		fmt.Fprintln(w)
	}
	r.printVerdicts(w)
}

// clientsWhere says where the clients ran.
func (r *IngestResult) clientsWhere() string {
	if r.ClientsInProcess {
		return "in the servers' process"
	}
	return "in a load process of their own"
}

// printVerdicts writes the ratios and p99 of r against the goals.
func (r *IngestResult) printVerdicts(w io.Writer) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	if r.Memory {
		fmt.Fprintln(w, "(the relay's ledger was in memory, nothing durable: these are the bounds of the durable relay on this machine, not verdicts on it)")
	}
	fmt.Fprintf(w, "relay / ceiling       %.2f  (goal ≥ %.1f: %s)\n", r.CeilingRatio, r.Goals.CeilingRatio, verdict(r.CeilingRatio >= r.Goals.CeilingRatio))
	// A goal over a disk's rate can lie above the ceiling itself (a fast
	// disk, a slow CPU): no relay, which does the ceiling's work and more,
	// can meet it there; say so beside the verdict.
	overDisk := func(ratio, goal float64, disk Phase) string {
		v := verdict(ratio >= goal)
		if need := goal * disk.PerSec; ratio < goal && need > r.Ceiling.PerSec {
			v += fmt.Sprintf(", out of reach on this machine: %.0f/s needed, above the ceiling's %.0f/s", need, r.Ceiling.PerSec)
		}
		return v
	}
	fmt.Fprintf(w, "relay / single fsync  %.2f  (goal ≥ %.0f: %s)\n", r.FsyncRatio, r.Goals.FsyncRatio, overDisk(r.FsyncRatio, r.Goals.FsyncRatio, r.Single))
	fmt.Fprintf(w, "relay / raw fsync     %.2f  (goal ≥ %.1f: %s)\n", r.RawRatio, r.Goals.RawRatio, overDisk(r.RawRatio, r.Goals.RawRatio, r.Raw))
	fmt.Fprintf(w, "relay p99             %.2f ms  (goal ≤ %.0f ms: %s)\n", r.Relay.P99ms, r.Goals.P99Millis, verdict(r.Relay.P99ms <= r.Goals.P99Millis))
}

// IngestSeries is Ingest run several times in a row, each run whole with
// its own baselines (`crosstalk-bench ingest --runs N`), and the medians
// over the runs that docs/performance.md judges the goals on.
type IngestSeries struct {
	Runs []*IngestResult `json:"runs"`
	// Median holds, in each figure, the median of that figure over the
	// runs (each ratio is the median of the runs' ratios, not a ratio of
	// medians), with the goals and their verdicts as one run has them.
	Median *IngestResult `json:"median"`
}

// IngestRuns runs Ingest n times in a row with o and returns every run
// and the medians.
func IngestRuns(ctx context.Context, o IngestOptions, n int) (*IngestSeries, error) {
	if n < 1 {
		return nil, errors.New("bench: want at least 1 run")
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	s := &IngestSeries{}
	for i := range n {
		fmt.Fprintf(progress, "bench: run %d/%d\n", i+1, n)
		r, err := Ingest(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("run %d of %d: %w", i+1, n, err)
		}
		s.Runs = append(s.Runs, r)
	}
	s.Median = medianResult(s.Runs)
	return s, nil
}

// medianResult returns a result whose every figure is the median of the
// runs' (the upper middle of an even count), but for the errors, summed
// over the runs, and whose machine, clients, duration and ledger are the
// first run's.
func medianResult(runs []*IngestResult) *IngestResult {
	first := runs[0]
	m := &IngestResult{Machine: first.Machine, Clients: first.Clients, Duration: first.Duration, Memory: first.Memory, ClientsInProcess: first.ClientsInProcess, Goals: first.Goals}
	med := func(f func(r *IngestResult) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	phase := func(f func(r *IngestResult) *Phase) Phase {
		p := Phase{Name: f(first).Name}
		p.Count = int64(med(func(r *IngestResult) float64 { return float64(f(r).Count) }))
		for _, r := range runs {
			p.Errors += f(r).Errors // any is worth seeing: summed, not a median
		}
		p.PerSec = med(func(r *IngestResult) float64 { return f(r).PerSec })
		p.P50ms = med(func(r *IngestResult) float64 { return f(r).P50ms })
		p.P99ms = med(func(r *IngestResult) float64 { return f(r).P99ms })
		p.CPUMicros = med(func(r *IngestResult) float64 { return f(r).CPUMicros })
		p.HostBusyPct = med(func(r *IngestResult) float64 { return f(r).HostBusyPct })
		p.HostStealPct = med(func(r *IngestResult) float64 { return f(r).HostStealPct })
		return p
	}
	m.Machine.FsyncMillis = med(func(r *IngestResult) float64 { return r.Machine.FsyncMillis })
	m.Ceiling = phase(func(r *IngestResult) *Phase { return &r.Ceiling })
	m.Relay = phase(func(r *IngestResult) *Phase { return &r.Relay })
	m.Single = phase(func(r *IngestResult) *Phase { return &r.Single })
	m.Raw = phase(func(r *IngestResult) *Phase { return &r.Raw })
	m.RelayCommits = int64(med(func(r *IngestResult) float64 { return float64(r.RelayCommits) }))
	m.RelayPerCommit = med(func(r *IngestResult) float64 { return r.RelayPerCommit })
	m.CeilingRatio = med(func(r *IngestResult) float64 { return r.CeilingRatio })
	m.FsyncRatio = med(func(r *IngestResult) float64 { return r.FsyncRatio })
	m.RawRatio = med(func(r *IngestResult) float64 { return r.RawRatio })
	return m
}

// Print writes a row per run and one of the medians (errors summed), then
// the verdicts on the medians.
func (s *IngestSeries) Print(w io.Writer) {
	m := s.Median
	fmt.Fprintf(w, "crosstalk-bench ingest: %d runs in a row, %d clients %s, %s per measurement in each\n", len(s.Runs), m.Clients, m.clientsWhere(), m.Duration)
	fmt.Fprintf(w, "machine: %s, %d CPUs (GOMAXPROCS %d), %s %s; ledgers in %s\n\n", m.Machine.CPU, m.Machine.NumCPU, m.Machine.GOMAXPROCS, m.Machine.Go, m.Machine.OS, m.Machine.TempDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tfsync ms\tceiling /s\trelay /s\traw /s\trelay/ceiling\trelay/raw\trelay p50 ms\trelay p99 ms\tceiling p99 ms\tCPU µs ceiling\tCPU µs relay\tsteal % ceiling\tsteal % relay\tsteal % raw\terrors\t")
	steal := func(p Phase) string {
		if p.HostBusyPct == 0 {
			return "-" // not measured
		}
		return fmt.Sprintf("%.1f", p.HostStealPct)
	}
	row := func(name string, r *IngestResult) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%s\t%s\t%s\t%d\t\n", name,
			r.Machine.FsyncMillis, r.Ceiling.PerSec, r.Relay.PerSec, r.Raw.PerSec, r.CeilingRatio, r.RawRatio,
			r.Relay.P50ms, r.Relay.P99ms, r.Ceiling.P99ms, r.Ceiling.CPUMicros, r.Relay.CPUMicros,
			steal(r.Ceiling), steal(r.Relay), steal(r.Raw), r.Ceiling.Errors+r.Relay.Errors+r.Single.Errors+r.Raw.Errors)
	}
	for i, r := range s.Runs {
		row(fmt.Sprint(i+1), r)
	}
	row("median", m)
	tw.Flush()
	fmt.Fprintf(w, "\nmedians of %d runs:\n", len(s.Runs))
	m.printVerdicts(w)
}
