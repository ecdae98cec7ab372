package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
	"github.com/crosstalk-go/crosstalk/signing"
)

// ScaleResult is the outcome of Scale (`crosstalk-bench scale`); its JSON form is
// the --json output.
type ScaleResult struct {
	Machine    Machine `json:"machine"`
	Clients    int     `json:"clients"`
	Duration   string  `json:"duration"`
	SyncAlways bool    `json:"nats_sync_always"`
	// Disjoint reports --groups disjoint: the relays of (c) wrote to
	// groups of their own instead of all to the same ones.
	Disjoint bool         `json:"disjoint_groups"`
	Setups   []ScaleSetup `json:"setups"`
}

// ScaleSetup is one setup's measurement.
type ScaleSetup struct {
	Phase
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
	PerRelay []ScaleRelay `json:"per_relay,omitempty"`
}

// ScaleRelay is one relay's share of a setup with several.
type ScaleRelay struct {
	PerSec    float64 `json:"per_second"`
	P99ms     float64 `json:"p99_ms"`
	Conflicts int64   `json:"conflicts"`
}

// scaleRig is one running setup: its relays (and the NATS servers they
// use).
type scaleRig struct {
	key, name string
	relays    []*server.Server
	nodes     []*natstest.Node
	perRelay  []*meter  // one per relay
	sources   []*source // the envelopes for relay i: sources[i%len]
	cpu       time.Duration
	wall      time.Duration
}

func (r *scaleRig) close() {
	for _, rr := range r.relays {
		shutdown(rr)
	}
	natstest.StopAll(r.nodes)
}

// jsStats sums the relays' JetStream writer counters.
func (r *scaleRig) jsStats() (st jetstream.Stats, ok bool) {
	for _, rr := range r.relays {
		if s, is := rr.Store().(*jetstream.Store); is {
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

// ScaleOptions configure Scale.
type ScaleOptions struct {
	// Clients is the number of concurrent HTTP clients (at least 3, one
	// per relay of the cluster setup).
	Clients int
	// Duration is how long each of the three setups runs in total.
	Duration time.Duration
	// SyncAlways makes the NATS servers fsync every write (sync_interval:
	// always, as docs/scaling.md's production configuration).
	SyncAlways bool
	// Disjoint makes each relay of the cluster setup write to groups of
	// its own instead of all to the same eight.
	Disjoint bool
	// Progress receives a line per round; nil discards them.
	Progress io.Writer
}

// Scale compares, in one run and on this machine, the relay's ingest on
// (a) SQLite, (b) a single-node JetStream and (c) three relays on an R3
// ledger held by a 3-node NATS cluster, all embedded in this process. See
// docs/performance.md ("Relay scale-out") and docs/scaling.md.
func Scale(ctx context.Context, o ScaleOptions) (*ScaleResult, error) {
	clients, d, syncAlways, disjoint, progress := o.Clients, o.Duration, o.SyncAlways, o.Disjoint, o.Progress
	if clients < 3 {
		return nil, errors.New("bench scale: want at least 3 clients, one per relay of the cluster setup")
	}
	if progress == nil {
		progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "crosstalk-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &ScaleResult{Machine: machine(filepath.Dir(tmp)), Clients: clients, Duration: d.String(), SyncAlways: syncAlways, Disjoint: disjoint}
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
	rr, err := startRelay(ctx, filepath.Join(tmp, "sqlite"), key.Public(), "", 0)
	if err != nil {
		return nil, err
	}
	rigs = append(rigs, &scaleRig{key: "sqlite", name: "(a) 1 relay, SQLite", relays: []*server.Server{rr}})

	fmt.Fprintln(progress, "bench scale: starting (b) 1 relay on a 1-node JetStream")
	one := &scaleRig{key: "js-1", name: "(b) 1 relay, JetStream 1 node"}
	rigs = append(rigs, one)
	if one.nodes, err = natstest.Start(filepath.Join(tmp, "nats1"), 1, syncAlways); err != nil {
		return nil, err
	}
	rr, err = startRelay(ctx, filepath.Join(tmp, "js1-relay"), key.Public(), one.nodes[0].URL, 1)
	if err != nil {
		return nil, err
	}
	one.relays = append(one.relays, rr)

	fmt.Fprintln(progress, "bench scale: starting (c) 3 relays on a 3-node JetStream cluster, R3")
	three := &scaleRig{key: "js-3x3", name: "(c) 3 relays, JetStream 3 nodes R3"}
	rigs = append(rigs, three)
	if three.nodes, err = natstest.Start(filepath.Join(tmp, "nats3"), 3, syncAlways); err != nil {
		return nil, err
	}
	for i := range 3 {
		// Every relay lists every server, "its own" first.
		var urls []string
		for j := range three.nodes {
			urls = append(urls, three.nodes[(i+j)%3].URL)
		}
		rr, err := startRelay(ctx, filepath.Join(tmp, fmt.Sprintf("js3-relay%d", i)), key.Public(), strings.Join(urls, ","), 3)
		if err != nil {
			return nil, err
		}
		three.relays = append(three.relays, rr)
	}

	// Distinct envelopes: a stock signed now, more after the first round
	// at its pace; past the stock, clients sign as they go. With
	// --groups disjoint, each relay of (c) writes to its own groups.
	shared := &source{key: key, groups: allGroups}
	sources := []*source{shared}
	for _, r := range rigs {
		r.sources = []*source{shared}
	}
	if disjoint {
		three.sources = nil
		for i := range three.relays {
			src := &source{key: key}
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
		s := ScaleSetup{Phase: m.phase(r.name), Key: r.key, Relays: len(r.relays)}
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
				s.PerRelay = append(s.PerRelay, ScaleRelay{PerSec: pr.perSec(), P99ms: p99})
				if js, ok := r.relays[i].Store().(*jetstream.Store); ok {
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
	cpu0, wall0 := cputime.Process(), time.Now()
	start := time.Now()
	for i, rr := range r.relays {
		share := clients / n
		if i < clients%n {
			share++
		}
		wg.Go(func() {
			labelled(ctx, r.key, func(ctx context.Context) {
				src := r.sources[i%len(r.sources)]
				errs[i] = drive(ctx, hc, rr.URL()+"/crosstalk/receive", share, start, slice, src.next, r.perRelay[i])
			})
		})
	}
	wg.Wait()
	// Only the measured part of the slice is counted: the CPU time of the
	// whole slice scaled to it is close enough, the load being steady.
	cpu, wall := cputime.Process()-cpu0, time.Since(wall0)
	measured := slice - slice/10
	r.cpu += time.Duration(float64(cpu) * float64(measured) / float64(wall))
	r.wall += measured
	return errors.Join(errs...)
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

func (r *ScaleResult) Print(w io.Writer) {
	syncing := "sync_interval: always"
	if !r.SyncAlways {
		syncing = "default sync_interval (2 min)"
	}
	groups := "the relays of (c) share the 8 groups"
	if r.Disjoint {
		groups = "each relay of (c) writes to its own groups"
	}
	fmt.Fprintf(w, "crosstalk-bench scale: %d clients, %s per setup, NATS %s, %s\n", r.Clients, r.Duration, syncing, groups)
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
