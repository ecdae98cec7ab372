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
	args:    "ingest [--clients N] [--duration D] [--json] [--cpuprofile FILE]",
	summary: "measure the relay's ingest throughput against its ceilings",
}

func init() { cmdBench.run = runBench }

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

Each runs for --duration (the first tenth is warm-up, not counted). It
prints envelopes per second, p50/p99 latency of (a) and (b), and the
ratios relay/ceiling (goal ≥ 0.5) and relay/single-fsync (goal ≥ 3).
Nothing is kept: the temporary directory is removed at the end.
See docs/performance.md.`)
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

	fmt.Fprintf(progress, "bench: (a) ceiling: parse + verify only, %d clients, %s\n", clients, d)
	pool := make([][]byte, 4096) // the ceiling keeps nothing: reusing envelopes is fine
	if err := gen.fill(pool, 0); err != nil {
		return nil, err
	}
	var next atomic.Int64
	labelled(ctx, "ceiling", func(ctx context.Context) {
		res.Ceiling, err = benchCeiling(ctx, key.Public(), clients, d, func() ([]byte, error) {
			return pool[int(next.Add(1)-1)%len(pool)], nil
		})
	})
	if err != nil {
		return nil, err
	}

	// Enough distinct envelopes for the relay at the ceiling's rate; if
	// the relay is faster still, clients sign the rest as they go.
	n := min(int(res.Ceiling.PerSec*d.Seconds()*1.1), 200_000)
	fmt.Fprintf(progress, "bench: signing %d distinct envelopes for the relay\n", n)
	fresh := make([][]byte, n)
	if err := gen.fill(fresh, 1_000_000); err != nil {
		return nil, err
	}
	next.Store(0)
	onTheFly := atomic.Int64{}
	onTheFly.Store(2_000_000)
	source := func() ([]byte, error) {
		if i := next.Add(1) - 1; i < int64(len(fresh)) {
			return fresh[i], nil
		}
		return gen.make(int(onTheFly.Add(1)))
	}
	fmt.Fprintf(progress, "bench: (b) relay: HTTP API, trust store, SQLite ledger, %d clients, %s\n", clients, d)
	var stats sqlite.Stats
	var sample []ledger.Event
	labelled(ctx, "relay", func(ctx context.Context) {
		res.Relay, stats, sample, err = benchRelay(ctx, filepath.Join(tmp, "relay"), key.Public(), clients, d, source)
	})
	if err != nil {
		return nil, err
	}
	fresh = nil
	res.RelayCommits = stats.Commits
	if stats.Commits > 0 {
		res.RelayPerCommit = float64(stats.Ops) / float64(stats.Commits)
	}

	fmt.Fprintf(progress, "bench: (c) single writer, one fsync per append, %s\n", d)
	labelled(ctx, "single", func(ctx context.Context) {
		res.Single, err = benchSingle(ctx, filepath.Join(tmp, "single.db"), d, sample)
	})
	if err != nil {
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

// drive runs clients goroutines that POST bodies from next to url for d
// and measures the requests that end after the warm-up (the first tenth).
func drive(ctx context.Context, name, url string, clients int, d time.Duration, next func() ([]byte, error)) (benchPhase, error) {
	tr := &http.Transport{
		MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	start := time.Now()
	warm, end := start.Add(d/10), start.Add(d)
	ctx, cancel := context.WithDeadline(ctx, end.Add(time.Minute))
	defer cancel()
	var (
		wg       sync.WaitGroup
		count    atomic.Int64
		errCount atomic.Int64
		mu       sync.Mutex
		lats     []time.Duration
		firstErr error
	)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				body, err := next()
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				t0 := time.Now()
				status, err := post(ctx, hc, url, body)
				t1 := time.Now()
				if t0.Before(warm) || t1.After(end) {
					continue
				}
				if err != nil || status != http.StatusOK {
					errCount.Add(1)
					continue
				}
				count.Add(1)
				mine = append(mine, t1.Sub(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return benchPhase{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchPhase{}, err
	}
	p := benchPhase{Name: name, Count: count.Load(), Errors: errCount.Load()}
	p.PerSec = float64(p.Count) / (d - d/10).Seconds()
	p.P50ms, p.P99ms = percentile(lats, 0.50), percentile(lats, 0.99)
	return p, nil
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

// benchCeiling serves a handler that only reads, parses and verifies, and
// drives it.
func benchCeiling(ctx context.Context, pub *signing.PublicKey, clients int, d time.Duration, next func() ([]byte, error)) (benchPhase, error) {
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
		return benchPhase{}, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	return drive(ctx, "ceiling: parse + verify", "http://"+ln.Addr().String()+"/crosstalk/receive", clients, d, next)
}

// benchRelay starts the relay as `crosstalk relay` does, with the bench
// key pinned in its trust store and owned by agent bench, drives it, and
// returns the writer's statistics and a sample of the events it stored.
func benchRelay(ctx context.Context, dataDir string, pub *signing.PublicKey, clients int, d time.Duration, next func() ([]byte, error)) (benchPhase, sqlite.Stats, []ledger.Event, error) {
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.RateLimit, cfg.RateBurst = 1e9, 1_000_000_000 // measure the relay, not its limiter
	cfg.LogLevel = "error"
	cfg.Agents = []AgentConfig{{ID: "bench", Names: []string{"BENCH"}, Keys: []string{benchKeyID}}, {ID: "reader", Names: []string{"READER"}}}
	if err := cfg.Validate(); err != nil {
		return benchPhase{}, sqlite.Stats{}, nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return benchPhase{}, sqlite.Stats{}, nil, err
	}
	if err := signing.NewTrustStore(cfg.trustFile()).Add(pub); err != nil {
		return benchPhase{}, sqlite.Stats{}, nil, err
	}
	log := slog.New(slog.DiscardHandler)
	rr, err := startRelay(ctx, cfg, log)
	if err != nil {
		return benchPhase{}, sqlite.Stats{}, nil, err
	}
	before := rr.store.Stats()
	p, err := drive(ctx, "relay: HTTP + verify + SQLite", rr.url+"/crosstalk/receive", clients, d, next)
	after := rr.store.Stats()
	stats := sqlite.Stats{Commits: after.Commits - before.Commits, Ops: after.Ops - before.Ops, Events: after.Events - before.Events}
	var sample []ledger.Event
	if err == nil {
		sample, err = rr.store.Range(ctx, "bench-0", 0, nil, 256)
		if err == nil && len(sample) == 0 {
			err = errors.New("bench: the relay stored no events")
		}
	}
	if serr := rr.shutdown(); err == nil {
		err = serr
	}
	return p, stats, sample, err
}

// benchSingle appends the sample's records one at a time, each its own
// transaction and fsync, for d.
func benchSingle(ctx context.Context, path string, d time.Duration, sample []ledger.Event) (benchPhase, error) {
	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return benchPhase{}, err
	}
	defer st.Close()
	start := time.Now()
	warm, end := start.Add(d/10), start.Add(d)
	var lats []time.Duration
	for i := 0; time.Now().Before(end); i++ {
		ev := sample[i%len(sample)]
		rec := ledger.Record{Kind: ev.Kind, GroupID: ev.GroupID, By: ev.By, Data: ev.Data, DedupeKey: fmt.Sprintf("single-%d", i)}
		t0 := time.Now()
		if _, err := st.Append(ctx, []ledger.Record{rec}); err != nil {
			return benchPhase{}, err
		}
		if t1 := time.Now(); !t0.Before(warm) && !t1.After(end) {
			lats = append(lats, t1.Sub(t0))
		}
	}
	p := benchPhase{Name: "single writer, fsync per append", Count: int64(len(lats))}
	p.PerSec = float64(p.Count) / (d - d/10).Seconds()
	p.P50ms, p.P99ms = percentile(lats, 0.50), percentile(lats, 0.99)
	return p, st.Close()
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
