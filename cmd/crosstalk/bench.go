package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/signing"
)

var cmdBench = &command{
	name:    "bench",
	args:    "ingest|scale [flags] (crosstalk bench ingest --help, crosstalk bench scale --help)",
	summary: "measure the relay's ingest (bench ingest) and its scale-out on JetStream (bench scale)",
}

func init() {
	cmdBench.run = func(ctx context.Context, e *env, args []string) error {
		if slices.Contains(args, "scale") && !slices.Contains(args, "ingest") {
			return runBenchScale(ctx, e, args)
		}
		return runBench(ctx, e, args)
	}
}

// Goals of docs/performance.md ("Relay ingest").
const (
	goalCeilingRatio = 0.5
	goalFsyncRatio   = 3
	goalP99          = 25 * time.Millisecond
)

// benchKeyID is the key id the benchmark signs with.
const benchKeyID = "bench@crosstalk.invalid"

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, cmdBench, `
Bench ingest measures, in one run and on this machine:

  (a) the ceiling: a bare net/http handler on loopback that only reads the
      body, parses the envelope and verifies its Ed25519 signature;
  (b) the relay: the real relay (as crosstalk relay starts it: HTTP API,
      signature verification against the trust store, SQLite ledger with
      group commit, fsync on every commit) in a temporary data dir, with
      --clients concurrent HTTP clients posting distinct signed envelopes;
  (c) a single writer appending one event at a time to SQLite, one fsync
      per append.

Each runs for --duration in total, cut into 4 slices that take turns
(a, b, c, a, b, c, …) so that other load on a shared machine weighs on all
three alike; the first tenth of every slice is warm-up and not counted. It
prints envelopes per second, p50/p99 latency, and the ratios relay/ceiling
(goal ≥ 0.5) and relay/single-fsync (goal ≥ 3). With --cpuprofile, every
sample carries the label phase=ceiling, relay or single
(go tool pprof -tagfocus phase=relay). Nothing is kept: the temporary
directory is removed at the end. See docs/performance.md.`)
	clients := fs.Int("clients", 64, "concurrent HTTP `clients`")
	duration := fs.Duration("duration", 8*time.Second, "how long each of the three measurements runs")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "ingest" {
		return usagef("bench: want `crosstalk bench ingest` (see `crosstalk bench --help`)")
	}
	if *clients < 1 {
		return usagef("bench: --clients must be at least 1")
	}
	if *duration < 100*time.Millisecond {
		return usagef("bench: --duration must be at least 100ms")
	}
	progress := e.stderr
	if *asJSON {
		progress = io.Discard
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := benchIngest(ctx, *clients, *duration, progress)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(e.stdout)
	return nil
}

// benchResult is the outcome of `crosstalk bench ingest`; its JSON form is
// the --json output.
type benchResult struct {
	Machine  benchMachine `json:"machine"`
	Clients  int          `json:"clients"`
	Duration string       `json:"duration"`
	Ceiling  benchPhase   `json:"ceiling"`
	Relay    benchPhase   `json:"relay"`
	Single   benchPhase   `json:"single_fsync"`
	// RelayCommits and RelayPerCommit describe the relay's group commit:
	// write transactions (fsyncs) during the run, and write operations per
	// transaction.
	RelayCommits   int64   `json:"relay_commits"`
	RelayPerCommit float64 `json:"relay_ops_per_commit"`
	CeilingRatio   float64 `json:"relay_over_ceiling"`
	FsyncRatio     float64 `json:"relay_over_single_fsync"`
	Goals          struct {
		CeilingRatio float64 `json:"relay_over_ceiling"`
		FsyncRatio   float64 `json:"relay_over_single_fsync"`
		P99Millis    float64 `json:"relay_p99_ms"`
	} `json:"goals"`
}

// benchMachine describes where the figures come from.
type benchMachine struct {
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

// benchPhase is one measurement.
type benchPhase struct {
	Name   string  `json:"name"`
	Count  int64   `json:"count"`  // envelopes (appends) completed in the measured window
	Errors int64   `json:"errors"` // requests that failed or got another status than 200
	PerSec float64 `json:"per_second"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
}

// benchRounds is how many slices each measurement is cut into. The slices
// of the three measurements take turns (a, b, c, a, b, c, …), so that
// whatever else runs on a shared machine weighs on all three alike.
const benchRounds = 4

func benchIngest(ctx context.Context, clients int, d time.Duration, progress io.Writer) (*benchResult, error) {
	tmp, err := os.MkdirTemp("", "crosstalk-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &benchResult{Machine: machine(filepath.Dir(tmp)), Clients: clients, Duration: d.String()}
	if res.Machine.FsyncMillis, err = fsyncCost(filepath.Join(tmp, "fsync-probe")); err != nil {
		return nil, err
	}
	res.Goals.CeilingRatio, res.Goals.FsyncRatio = goalCeilingRatio, goalFsyncRatio
	res.Goals.P99Millis = float64(goalP99) / float64(time.Millisecond)

	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		return nil, err
	}
	gen := &envelopeSource{key: key}
	pool := make([][]byte, 4096) // the ceiling keeps nothing: reusing envelopes is fine
	if err := gen.fill(pool, 0); err != nil {
		return nil, err
	}
	var next atomic.Int64
	fromPool := func() ([]byte, error) { return pool[int(next.Add(1)-1)%len(pool)], nil }

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
	if err := benchRun(ctx, res, tmp, key, gen, clients, d, ceilingURL, fromPool, progress); err != nil {
		return nil, err
	}
	if res.Ceiling.PerSec > 0 {
		res.CeilingRatio = res.Relay.PerSec / res.Ceiling.PerSec
	}
	if res.Single.PerSec > 0 {
		res.FsyncRatio = res.Relay.PerSec / res.Single.PerSec
	}
	return res, nil
}

// benchRun takes the measurements in turns once the ceiling server runs.
func benchRun(ctx context.Context, res *benchResult, tmp string, key *signing.PrivateKey, gen *envelopeSource,
	clients int, d time.Duration, ceilingURL string, fromPool func() ([]byte, error), progress io.Writer) error {
	slice := d / benchRounds
	ceiling, relay, single := &meter{}, &meter{}, &meter{}
	ceilingClient := newBenchClient(clients)
	defer ceilingClient.CloseIdleConnections()
	relayClient := newBenchClient(clients)
	defer relayClient.CloseIdleConnections()

	driveCeiling := func() (err error) {
		labelled(ctx, "ceiling", func(ctx context.Context) {
			err = drive(ctx, ceilingClient, ceilingURL, clients, time.Now(), slice, fromPool, ceiling)
		})
		return err
	}
	fmt.Fprintf(progress, "bench: round 1/%d: (a) ceiling, %d clients, %s\n", benchRounds, clients, slice)
	if err := driveCeiling(); err != nil {
		return err
	}
	// Enough distinct envelopes for the relay at the ceiling's rate; if
	// the relay is faster still, clients sign the rest as they go.
	n := min(int(ceiling.perSec()*d.Seconds()*1.1), 200_000)
	fmt.Fprintf(progress, "bench: signing %d distinct envelopes for the relay\n", n)
	fresh := make([][]byte, n)
	if err := gen.fill(fresh, 1_000_000); err != nil {
		return err
	}
	var fly atomic.Int64
	fly.Store(2_000_000)
	var used atomic.Int64
	source := func() ([]byte, error) {
		if i := used.Add(1) - 1; i < int64(len(fresh)) {
			return fresh[i], nil
		}
		return gen.make(int(fly.Add(1)))
	}

	var (
		rr     *runningRelay
		store  *sqlite.Store
		err    error
		sample []ledger.Event
	)
	labelled(ctx, "relay", func(ctx context.Context) { rr, err = startBenchRelay(ctx, filepath.Join(tmp, "relay"), key.Public()) })
	if err != nil {
		return err
	}
	defer func() {
		if rr != nil {
			rr.shutdown()
		}
	}()
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
		before := rr.sqliteStats()
		labelled(ctx, "relay", func(ctx context.Context) {
			err = drive(ctx, relayClient, rr.url+"/crosstalk/receive", clients, time.Now(), slice, source, relay)
		})
		if err != nil {
			return err
		}
		after := rr.sqliteStats()
		stats.Commits += after.Commits - before.Commits
		stats.Ops += after.Ops - before.Ops
		if sample == nil {
			if sample, err = rr.store.Range(ctx, "bench-0", 0, nil, 256); err != nil {
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
	}
	err = rr.shutdown()
	rr = nil
	if err != nil {
		return err
	}
	res.Ceiling = ceiling.phase("ceiling: parse + verify")
	res.Relay = relay.phase("relay: HTTP + verify + SQLite")
	res.Single = single.phase("single writer, fsync per append")
	res.RelayCommits = stats.Commits
	if stats.Commits > 0 {
		res.RelayPerCommit = float64(stats.Ops) / float64(stats.Commits)
	}
	return store.Close()
}

// meter accumulates one measurement over its slices.
type meter struct {
	mu       sync.Mutex
	count    int64
	errors   int64
	lats     []time.Duration
	measured time.Duration // the slices' time after warm-up
	seq      int64         // appendSingly's record counter
}

func (m *meter) perSec() float64 {
	if m.measured <= 0 {
		return 0
	}
	return float64(m.count) / m.measured.Seconds()
}

func (m *meter) phase(name string) benchPhase {
	return benchPhase{
		Name: name, Count: m.count, Errors: m.errors, PerSec: m.perSec(),
		P50ms: percentile(m.lats, 0.50), P99ms: percentile(m.lats, 0.99),
	}
}

// labelled runs fn with the profiler label phase=name, which every
// goroutine it starts inherits: `go tool pprof -tagfocus phase=relay`
// shows one measurement alone.
func labelled(ctx context.Context, name string, fn func(ctx context.Context)) {
	pprof.Do(ctx, pprof.Labels("phase", name), fn)
}

// machine describes this machine.
func machine(tmp string) benchMachine {
	m := benchMachine{
		CPU: "unknown", NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, TempDir: tmp,
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// fsyncCost returns the median of 100 write+fsync rounds of 4 KiB to a
// new file at path, in milliseconds.
func fsyncCost(path string) (float64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	lats := make([]time.Duration, 100)
	for i := range lats {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		lats[i] = time.Since(t0)
	}
	return percentile(lats, 0.5), f.Close()
}

// envelopeSource makes distinct signed envelopes: REQUESTs from BENCH to
// READER in eight contexts, each with fresh ids, signed by key.
type envelopeSource struct {
	key *signing.PrivateKey
}

func (g *envelopeSource) make(i int) ([]byte, error) {
	e := envelope.New("BENCH", "READER", envelope.IntentRequest,
		fmt.Sprintf("Benchmark envelope %d.\nPlease review the attached change and answer with a short summary.", i))
	e.User = "bench"
	e.Context = fmt.Sprintf("bench-%d", i%8)
	return signing.SignEnvelope(e, g.key, nil)
}

// fill signs len(out) envelopes numbered from base, on every CPU.
func (g *envelopeSource) fill(out [][]byte, base int) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(out); i += workers {
				b, err := g.make(base + i)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				out[i] = b
			}
		})
	}
	wg.Wait()
	return first
}

// newBenchClient returns an HTTP client that keeps a connection per
// client open, as a load of long-lived agents would.
func newBenchClient(clients int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2,
			DisableCompression: true, IdleConnTimeout: time.Minute,
		},
		Timeout: time.Minute,
	}
}

// drive runs clients goroutines that POST bodies from next to url from
// start for d, and adds to m the requests that start after the warm-up (the
// first tenth): each one's latency, and its envelope if it ended within the
// window (the rate counts what ends in the window). A request that starts in
// the window and ends after it still has its latency counted, so a stall
// longer than a slice cannot drop the slowest requests out of p99.
func drive(ctx context.Context, hc *http.Client, url string, clients int, start time.Time, d time.Duration, next func() ([]byte, error), m *meter) error {
	warm, end := start.Add(d/10), start.Add(d)
	ctx, cancel := context.WithDeadline(ctx, end.Add(time.Minute))
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range clients {
		wg.Go(func() {
			var (
				mine         []time.Duration
				count, fails int64
			)
			for time.Now().Before(end) && ctx.Err() == nil {
				body, err := next()
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					break
				}
				t0 := time.Now()
				status, err := post(ctx, hc, url, body)
				t1 := time.Now()
				if t0.Before(warm) {
					continue
				}
				if err != nil || status != http.StatusOK {
					fails++
					continue
				}
				mine = append(mine, t1.Sub(t0))
				if !t1.After(end) {
					count++
				}
			}
			m.mu.Lock()
			m.count += count
			m.errors += fails
			m.lats = append(m.lats, mine...)
			m.mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	m.measured += d - d/10
	m.mu.Unlock()
	return nil
}

func post(ctx context.Context, hc *http.Client, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, err
}

// percentile returns the q-quantile of lats in milliseconds (sorting lats).
func percentile(lats []time.Duration, q float64) float64 {
	if len(lats) == 0 {
		return 0
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	i := min(int(q*float64(len(lats))), len(lats)-1)
	return float64(lats[i]) / float64(time.Millisecond)
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

// startBenchRelay starts the relay as `crosstalk relay` does, with the
// bench key pinned in its trust store and owned by agent bench.
func startBenchRelay(ctx context.Context, dataDir string, pub *signing.PublicKey) (*runningRelay, error) {
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	cfg.TrustFile = filepath.Join(dataDir, "known_keys") // never the user's own
	cfg.Listen = "127.0.0.1:0"
	cfg.RateLimit, cfg.RateBurst = 1e9, 1_000_000_000 // measure the relay, not its limiter
	cfg.LogLevel = "error"
	cfg.Agents = []AgentConfig{{ID: "bench", Names: []string{"BENCH"}, Keys: []string{benchKeyID}}, {ID: "reader", Names: []string{"READER"}}}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if err := signing.NewTrustStore(cfg.trustFile()).Add(pub); err != nil {
		return nil, err
	}
	return startRelay(ctx, cfg, slog.New(slog.DiscardHandler))
}

// appendSingly appends the sample's records one at a time for d, each its
// own transaction and fsync, and adds those that end after the warm-up to m.
func appendSingly(ctx context.Context, st *sqlite.Store, d time.Duration, sample []ledger.Event, m *meter) error {
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

func (r *benchResult) print(w io.Writer) {
	fmt.Fprintf(w, "crosstalk bench ingest: %d clients, %s per measurement\n", r.Clients, r.Duration)
	fmt.Fprintf(w, "machine: %s, %d CPUs (GOMAXPROCS %d), %s %s\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.OS)
	fmt.Fprintf(w, "disk: write+fsync of 4 KiB in %s: %.3f ms (median)\n\n", r.Machine.TempDir, r.Machine.FsyncMillis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tenvelopes/s\tp50 ms\tp99 ms\terrors\t")
	for _, p := range []benchPhase{r.Ceiling, r.Relay, r.Single} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%d\t\n", p.Name, p.PerSec, p.P50ms, p.P99ms, p.Errors)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrelay group commit: %d commits, %.1f appends per commit\n", r.RelayCommits, r.RelayPerCommit)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "relay / ceiling       %.2f  (goal ≥ %.1f: %s)\n", r.CeilingRatio, r.Goals.CeilingRatio, verdict(r.CeilingRatio >= r.Goals.CeilingRatio))
	fmt.Fprintf(w, "relay / single fsync  %.2f  (goal ≥ %.0f: %s)\n", r.FsyncRatio, r.Goals.FsyncRatio, verdict(r.FsyncRatio >= r.Goals.FsyncRatio))
	fmt.Fprintf(w, "relay p99             %.2f ms  (goal ≤ %.0f ms: %s)\n", r.Relay.P99ms, r.Goals.P99Millis, verdict(r.Relay.P99ms <= r.Goals.P99Millis))
}
