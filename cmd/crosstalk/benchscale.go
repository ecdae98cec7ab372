package main

import (
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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/signing"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// cmdBenchScale is `crosstalk bench scale`. It is not in the command
// table: `crosstalk bench` hands it the arguments when they name "scale"
// (see init).
var cmdBenchScale = &command{
	name:    "bench",
	args:    "scale [--clients N] [--duration D] [--sync always|default] [--groups shared|disjoint] [--json]",
	summary: "compare the relay's ingest on SQLite, one JetStream node and three relays on a 3-node cluster",
}

func runBenchScale(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, cmdBenchScale, `
Bench scale measures, in one run and on this machine, the relay's ingest
(--clients concurrent HTTP clients posting distinct signed envelopes to
POST /crosstalk/receive, as in crosstalk bench ingest) against:

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
docs/performance.md ("Relay scale-out") and docs/scaling.md ("Measured").`)
	clients := fs.Int("clients", 64, "concurrent HTTP `clients`")
	duration := fs.Duration("duration", 5*time.Second, "how long each of the three setups runs")
	syncMode := fs.String("sync", "always", "JetStream sync_interval: always (fsync every write) or default (every 2 minutes)")
	groups := fs.String("groups", "shared", "shared: every relay of (c) writes to the same 8 groups; disjoint: each to its own")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "scale" {
		return usagef("bench: want `crosstalk bench scale` (see `crosstalk bench scale --help`)")
	}
	if *clients < 3 {
		return usagef("bench scale: --clients must be at least 3 (one per relay of the cluster setup)")
	}
	if *duration < 100*time.Millisecond {
		return usagef("bench scale: --duration must be at least 100ms")
	}
	if *syncMode != "always" && *syncMode != "default" {
		return usagef("bench scale: --sync must be always or default, not %q", *syncMode)
	}
	if *groups != "shared" && *groups != "disjoint" {
		return usagef("bench scale: --groups must be shared or disjoint, not %q", *groups)
	}
	progress := e.stderr
	if *asJSON {
		progress = io.Discard
	}
	res, err := benchScale(ctx, *clients, *duration, *syncMode == "always", *groups == "disjoint", progress)
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

// scaleResult is the outcome of `crosstalk bench scale`; its JSON form is
// the --json output.
type scaleResult struct {
	Machine    benchMachine `json:"machine"`
	Clients    int          `json:"clients"`
	Duration   string       `json:"duration"`
	SyncAlways bool         `json:"nats_sync_always"`
	// Disjoint reports --groups disjoint: the relays of (c) wrote to
	// groups of their own instead of all to the same ones.
	Disjoint bool         `json:"disjoint_groups"`
	Setups   []scaleSetup `json:"setups"`
}

// scaleSetup is one setup's measurement.
type scaleSetup struct {
	benchPhase
	Key    string `json:"key"`    // sqlite, js-1, js-3x3
	Relays int    `json:"relays"` // relays the clients were spread over
	// MeanMs and MaxMs complete p50/p99: with a fixed number of clients,
	// envelopes/s = clients / mean latency.
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Ratio is PerSec over the SQLite setup's.
	Ratio float64 `json:"ratio_vs_sqlite"`
	// CPUms is the CPU time (user + system) of the whole process per
	// envelope: clients, relays and NATS servers together.
	CPUms float64 `json:"cpu_ms_per_envelope"`
	// Load is the process's CPU time over wall time while measured: how
	// many cores it kept busy.
	Load float64 `json:"cores_busy"`
	// PerBatch and Conflicts describe the JetStream Stores' writers:
	// records per atomic batch, and batches that lost the per-group
	// compare-and-set to another relay and were planned again.
	PerBatch  float64 `json:"records_per_batch,omitempty"`
	Conflicts int64   `json:"conflicts,omitempty"`
	// PerRelay is each relay's share, when there are several.
	PerRelay []scaleRelay `json:"per_relay,omitempty"`
}

// scaleRelay is one relay's share of a setup with several.
type scaleRelay struct {
	PerSec    float64 `json:"per_second"`
	P99ms     float64 `json:"p99_ms"`
	Conflicts int64   `json:"conflicts"`
}

// scaleRig is one running setup: its relays (and the NATS servers they
// use).
type scaleRig struct {
	key, name string
	relays    []*runningRelay
	nodes     []*server.Server
	perRelay  []*meter       // one per relay
	sources   []*scaleSource // the envelopes for relay i: sources[i%len]
	cpu       time.Duration
	wall      time.Duration
}

func (r *scaleRig) close() {
	for _, rr := range r.relays {
		rr.shutdown()
	}
	for _, n := range r.nodes {
		n.Shutdown()
		n.WaitForShutdown()
	}
}

// jsStats sums the relays' JetStream writer counters.
func (r *scaleRig) jsStats() (st jetstream.Stats, ok bool) {
	for _, rr := range r.relays {
		if s, is := rr.store.(*jetstream.Store); is {
			x := s.Stats()
			st.Batches += x.Batches
			st.Records += x.Records
			st.Conflicts += x.Conflicts
			st.Resends += x.Resends
			ok = true
		}
	}
	return st, ok
}

func benchScale(ctx context.Context, clients int, d time.Duration, syncAlways, disjoint bool, progress io.Writer) (*scaleResult, error) {
	tmp, err := os.MkdirTemp("", "crosstalk-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &scaleResult{Machine: machine(filepath.Dir(tmp)), Clients: clients, Duration: d.String(), SyncAlways: syncAlways, Disjoint: disjoint}
	if res.Machine.FsyncMillis, err = fsyncCost(filepath.Join(tmp, "fsync-probe")); err != nil {
		return nil, err
	}
	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		return nil, err
	}

	var rigs []*scaleRig
	defer func() {
		for _, r := range rigs {
			r.close()
		}
	}()
	fmt.Fprintln(progress, "bench scale: starting (a) 1 relay on SQLite")
	rr, err := startBenchRelay(ctx, filepath.Join(tmp, "sqlite"), key.Public())
	if err != nil {
		return nil, err
	}
	rigs = append(rigs, &scaleRig{key: "sqlite", name: "(a) 1 relay, SQLite", relays: []*runningRelay{rr}})

	fmt.Fprintln(progress, "bench scale: starting (b) 1 relay on a 1-node JetStream")
	one := &scaleRig{key: "js-1", name: "(b) 1 relay, JetStream 1 node"}
	rigs = append(rigs, one)
	if one.nodes, err = startBenchNATS(filepath.Join(tmp, "nats1"), 1, syncAlways); err != nil {
		return nil, err
	}
	rr, err = startScaleRelay(ctx, filepath.Join(tmp, "js1-relay"), key.Public(), one.nodes[0].ClientURL(), 1)
	if err != nil {
		return nil, err
	}
	one.relays = append(one.relays, rr)

	fmt.Fprintln(progress, "bench scale: starting (c) 3 relays on a 3-node JetStream cluster, R3")
	three := &scaleRig{key: "js-3x3", name: "(c) 3 relays, JetStream 3 nodes R3"}
	rigs = append(rigs, three)
	if three.nodes, err = startBenchNATS(filepath.Join(tmp, "nats3"), 3, syncAlways); err != nil {
		return nil, err
	}
	for i := range 3 {
		// Every relay lists every server, "its own" first.
		var urls []string
		for j := range three.nodes {
			urls = append(urls, three.nodes[(i+j)%3].ClientURL())
		}
		rr, err := startScaleRelay(ctx, filepath.Join(tmp, fmt.Sprintf("js3-relay%d", i)), key.Public(), strings.Join(urls, ","), 3)
		if err != nil {
			return nil, err
		}
		three.relays = append(three.relays, rr)
	}

	// Distinct envelopes: a stock signed now, more after the first round
	// at its pace; past the stock, clients sign as they go. With
	// --groups disjoint, each relay of (c) writes to its own groups.
	shared := &scaleSource{key: key, groups: []int{0, 1, 2, 3, 4, 5, 6, 7}}
	sources := []*scaleSource{shared}
	for _, r := range rigs {
		r.sources = []*scaleSource{shared}
	}
	if disjoint {
		three.sources = nil
		for i := range three.relays {
			src := &scaleSource{key: key}
			for g := i; g < 8; g += len(three.relays) {
				src.groups = append(src.groups, g)
			}
			three.sources = append(three.sources, src)
			sources = append(sources, src)
		}
	}
	fmt.Fprintln(progress, "bench scale: signing distinct envelopes")
	for _, src := range sources {
		if err := src.grow(8000 / len(sources)); err != nil {
			return nil, err
		}
	}

	hc := newBenchClient(clients)
	defer hc.CloseIdleConnections()
	slice := d / benchRounds
	for round := range benchRounds {
		for _, r := range rigs {
			fmt.Fprintf(progress, "bench scale: round %d/%d: %s, %d clients, %s\n", round+1, benchRounds, r.name, clients, slice)
			if err := r.drive(ctx, hc, clients, slice); err != nil {
				return nil, fmt.Errorf("bench scale: %s: %w", r.name, err)
			}
		}
		if round == 0 {
			for _, src := range sources {
				n, err := src.topUp(benchRounds - 1)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(progress, "bench scale: signed %d more envelopes\n", n)
			}
		}
	}

	for _, r := range rigs {
		m := r.merged()
		s := scaleSetup{benchPhase: m.phase(r.name), Key: r.key, Relays: len(r.relays)}
		s.MeanMs, s.MaxMs = meanMax(m.lats)
		if s.Count > 0 {
			s.CPUms = float64(r.cpu) / float64(time.Millisecond) / float64(s.Count)
		}
		if r.wall > 0 {
			s.Load = float64(r.cpu) / float64(r.wall)
		}
		if len(r.relays) > 1 {
			for i, pr := range r.perRelay {
				p99 := percentile(pr.lats, 0.99)
				s.PerRelay = append(s.PerRelay, scaleRelay{PerSec: pr.perSec(), P99ms: p99})
				if js, ok := r.relays[i].store.(*jetstream.Store); ok {
					s.PerRelay[i].Conflicts = js.Stats().Conflicts
				}
			}
		}
		if st, ok := r.jsStats(); ok {
			if st.Batches > 0 {
				s.PerBatch = float64(st.Records) / float64(st.Batches)
			}
			s.Conflicts = st.Conflicts
		}
		res.Setups = append(res.Setups, s)
	}
	if base := res.Setups[0].PerSec; base > 0 {
		for i := range res.Setups {
			res.Setups[i].Ratio = res.Setups[i].PerSec / base
		}
	}
	return res, nil
}

// drive runs one slice of load on the rig: the clients are spread evenly
// over its relays, each relay's share driven at the same time.
func (r *scaleRig) drive(ctx context.Context, hc *http.Client, clients int, slice time.Duration) error {
	n := len(r.relays)
	if r.perRelay == nil {
		for range n {
			r.perRelay = append(r.perRelay, &meter{})
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	cpu0, wall0 := processCPU(), time.Now()
	start := time.Now()
	for i, rr := range r.relays {
		share := clients / n
		if i < clients%n {
			share++
		}
		wg.Go(func() {
			labelled(ctx, r.key, func(ctx context.Context) {
				src := r.sources[i%len(r.sources)]
				errs[i] = drive(ctx, hc, rr.url+"/crosstalk/receive", share, start, slice, src.next, r.perRelay[i])
			})
		})
	}
	wg.Wait()
	// Only the measured part of the slice is counted: the CPU time of the
	// whole slice scaled to it is close enough, the load being steady.
	cpu, wall := processCPU()-cpu0, time.Since(wall0)
	measured := slice - slice/10
	r.cpu += time.Duration(float64(cpu) * float64(measured) / float64(wall))
	r.wall += measured
	return errors.Join(errs...)
}

// scaleSource hands out distinct signed envelopes into groups bench-<g>
// for g in groups: from a stock signed ahead, then signed as needed.
type scaleSource struct {
	key    *signing.PrivateKey
	groups []int
	mu     sync.RWMutex
	stock  [][]byte
	used   atomic.Int64
	fly    atomic.Int64 // numbers of envelopes signed on the fly, negative
}

func (s *scaleSource) make(i int) ([]byte, error) {
	e := envelope.New("BENCH", "READER", envelope.IntentRequest,
		fmt.Sprintf("Benchmark envelope %d.\nPlease review the attached change and answer with a short summary.", i))
	e.User = "bench"
	e.Context = fmt.Sprintf("bench-%d", s.groups[(i%len(s.groups)+len(s.groups))%len(s.groups)])
	return signing.SignEnvelope(e, s.key, nil)
}

// next returns an envelope not handed out before.
func (s *scaleSource) next() ([]byte, error) {
	i := s.used.Add(1) - 1
	s.mu.RLock()
	if i < int64(len(s.stock)) {
		b := s.stock[i]
		s.mu.RUnlock()
		return b, nil
	}
	s.mu.RUnlock()
	return s.make(int(s.fly.Add(-1)))
}

// grow signs n more envelopes for the stock, on every CPU.
func (s *scaleSource) grow(n int) error {
	s.mu.RLock()
	base := len(s.stock)
	s.mu.RUnlock()
	out := make([][]byte, n)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				b, err := s.make(base + i)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				out[i] = b
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	s.mu.Lock()
	s.stock = append(s.stock, out...)
	s.mu.Unlock()
	return nil
}

// topUp signs enough envelopes for rounds more rounds at the pace of
// those so far (with a fifth more), and returns how many it signed.
func (s *scaleSource) topUp(rounds int) (int, error) {
	s.mu.RLock()
	used, have := int(s.used.Load()), len(s.stock)
	s.mu.RUnlock()
	n := min(used*rounds*6/5, 300_000) - max(have-used, 0)
	if n <= 0 {
		return 0, nil
	}
	return n, s.grow(n)
}

// merged is the rig's measurement over all its relays: they ran side by
// side over the same windows, so counts and latencies add up and the
// measured time is one relay's.
func (r *scaleRig) merged() *meter {
	m := &meter{}
	for _, pr := range r.perRelay {
		m.count += pr.count
		m.errors += pr.errors
		m.lats = append(m.lats, pr.lats...)
	}
	if len(r.perRelay) > 0 {
		m.measured = r.perRelay[0].measured
	}
	return m
}

// meanMax returns the mean and the largest of lats in milliseconds.
func meanMax(lats []time.Duration) (float64, float64) {
	if len(lats) == 0 {
		return 0, 0
	}
	var sum, top time.Duration
	for _, l := range lats {
		sum += l
		top = max(top, l)
	}
	return float64(sum) / float64(len(lats)) / float64(time.Millisecond), float64(top) / float64(time.Millisecond)
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startBenchNATS starts n embedded nats-servers with JetStream on
// loopback, storing under dir, clustered when n > 1, and waits until
// JetStream answers.
func startBenchNATS(dir string, n int, syncAlways bool) ([]*server.Server, error) {
	var ports []int
	if n > 1 {
		var ls []net.Listener
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		}
		for _, l := range ls {
			l.Close()
		}
	}
	var nodes []*server.Server
	stopAll := func() {
		for _, s := range nodes {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("bench-n%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			NoLog:      true,
			NoSigs:     true,
			SyncAlways: syncAlways,
			MaxPayload: 8 << 20, // as docs/scaling.md's config
		}
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: "crosstalk-bench", Host: "127.0.0.1", Port: ports[i]}
			for _, p := range ports {
				opts.Routes = append(opts.Routes, server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
			}
		}
		s, err := server.NewServer(opts)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("nats-server: %w", err)
		}
		go s.Start()
		nodes = append(nodes, s)
		if !s.ReadyForConnections(10 * time.Second) {
			stopAll()
			return nil, fmt.Errorf("nats-server %s: not ready within 10 s", opts.ServerName)
		}
	}
	// A cluster's JetStream answers once it has a meta leader.
	for try := 0; ; try++ {
		if try == 400 {
			stopAll()
			return nil, errors.New("nats: JetStream not ready after 400 tries")
		}
		nc, err := nats.Connect(nodes[0].ClientURL())
		if err == nil {
			msg, err := nc.Request("$JS.API.INFO", nil, time.Second)
			nc.Close()
			if err == nil && !strings.Contains(string(msg.Data), `"error"`) {
				return nodes, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startScaleRelay starts a relay as startBenchRelay does, on the JetStream
// ledger at natsURLs with replicas.
func startScaleRelay(ctx context.Context, dataDir string, pub *signing.PublicKey, natsURLs string, replicas int) (*runningRelay, error) {
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	cfg.TrustFile = filepath.Join(dataDir, "known_keys") // never the user's own
	cfg.Listen = "127.0.0.1:0"
	cfg.Ledger, cfg.LedgerReplicas = natsURLs, replicas
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

func (r *scaleResult) print(w io.Writer) {
	syncing := "sync_interval: always"
	if !r.SyncAlways {
		syncing = "default sync_interval (2 min)"
	}
	groups := "the relays of (c) share the 8 groups"
	if r.Disjoint {
		groups = "each relay of (c) writes to its own groups"
	}
	fmt.Fprintf(w, "crosstalk bench scale: %d clients, %s per setup, NATS %s, %s\n", r.Clients, r.Duration, syncing, groups)
	fmt.Fprintf(w, "machine: %s, %d CPUs (GOMAXPROCS %d), %s %s\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.OS)
	fmt.Fprintf(w, "disk: write+fsync of 4 KiB in %s: %.3f ms (median)\n\n", r.Machine.TempDir, r.Machine.FsyncMillis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tenvelopes/s\tvs (a)\tp50 ms\tp99 ms\tmean ms\tmax ms\terrors\tCPU ms/env\tcores busy\trecords/batch\tconflicts\t")
	for _, s := range r.Setups {
		batch, conflicts := "-", "-"
		if s.PerBatch > 0 {
			batch, conflicts = fmt.Sprintf("%.1f", s.PerBatch), fmt.Sprint(s.Conflicts)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%d\t%.3f\t%.2f\t%s\t%s\t\n", s.Name, s.PerSec, s.Ratio, s.P50ms, s.P99ms, s.MeanMs, s.MaxMs, s.Errors, s.CPUms, s.Load, batch, conflicts)
	}
	tw.Flush()
	for _, s := range r.Setups {
		if len(s.PerRelay) > 0 {
			var parts []string
			for i, v := range s.PerRelay {
				parts = append(parts, fmt.Sprintf("relay %d %.0f/s p99 %.0f ms %d conflicts", i+1, v.PerSec, v.P99ms, v.Conflicts))
			}
			fmt.Fprintf(w, "%s per relay: %s\n", s.Key, strings.Join(parts, "; "))
		}
	}
}
