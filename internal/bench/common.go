package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
	"github.com/crosstalk-go/crosstalk/signing"
)

// meter accumulates one measurement over its slices.
type meter struct {
	mu       sync.Mutex
	count    int64
	errors   int64
	lats     []time.Duration
	measured time.Duration // the slices' time after warm-up
	seq      int64         // appendSingly's record counter
	// cpu is the process's CPU time during the slices, warm-up included,
	// and done the requests completed in them: CPU per envelope, clients
	// and servers together, steadier than a rate on a shared machine.
	cpu  time.Duration
	done int64
	// host is the machine's CPU ticks during the slices.
	host cputime.Ticks
	// streamed is the deliveries the load process's streams have read
	// (IngestOptions.Streams), as of the last slice.
	streamed int64
}

func (m *meter) perSec() float64 {
	if m.measured <= 0 {
		return 0
	}
	return float64(m.count) / m.measured.Seconds()
}

// hostDuring reads the machine's CPU ticks now, and returns a function
// that adds those since to m.host.
func (m *meter) hostDuring() func() {
	h0 := cputime.Host()
	return func() {
		if h0.All == 0 {
			return
		}
		h := cputime.Host().Sub(h0)
		m.mu.Lock()
		m.host = m.host.Add(h)
		m.mu.Unlock()
	}
}

func (m *meter) phase(name string) Phase {
	p := Phase{
		Name: name, Count: m.count, Errors: m.errors, PerSec: m.perSec(),
		P50ms: percentile(m.lats, 0.50), P99ms: percentile(m.lats, 0.99),
	}
	if m.done > 0 {
		p.CPUMicros = float64(m.cpu.Microseconds()) / float64(m.done)
	}
	if h := m.host; h.All > 0 {
		p.HostBusyPct = 100 * float64(h.All-h.Idle-h.Steal) / float64(h.All)
		p.HostStealPct = 100 * float64(h.Steal) / float64(h.All)
	}
	return p
}

// labelled runs fn with the profiler label phase=name, which every
// goroutine it starts inherits: `go tool pprof -tagfocus phase=relay`
// shows one measurement alone.
func labelled(ctx context.Context, name string, fn func(ctx context.Context)) {
	pprof.Do(ctx, pprof.Labels("phase", name), fn)
}

// machine describes this machine.
func machine(tmp string) Machine {
	m := Machine{
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
	cpu0 := cputime.Process()
	defer m.hostDuring()()
	for range clients {
		wg.Go(func() {
			var (
				mine              []time.Duration
				count, fails, all int64
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
				if err == nil && status == http.StatusOK {
					all++
				}
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
			m.done += all
			m.errors += fails
			m.lats = append(m.lats, mine...)
			m.mu.Unlock()
		})
	}
	wg.Wait()
	m.mu.Lock()
	m.cpu += cputime.Process() - cpu0
	m.mu.Unlock()
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

// MaxStreams bounds IngestOptions.Streams: the relay's default
// max_streams.
const MaxStreams = 256

// streamAgent is the agent whose deliveries the bench's streams follow:
// every envelope the clients post is addressed to it.
const streamAgent = "reader"

// openStreams opens n streams of streamAgent's deliveries over every group
// (GET /v1/agents/reader/stream) on the relay at base, as n harnesses
// following the agent would, and reads them until ctx ends, adding one to
// got for every delivery. It returns once every stream has answered 200
// and sent its first line, or with the first failure.
func openStreams(ctx context.Context, base string, n int, got *atomic.Int64) error {
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: n}}
	ready := make(chan error, n)
	for range n {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/agents/"+streamAgent+"/stream", nil)
			if err != nil {
				ready <- err
				return
			}
			res, err := hc.Do(req)
			if err != nil {
				ready <- fmt.Errorf("bench: opening a stream: %w", err)
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				ready <- fmt.Errorf("bench: opening a stream: %s", res.Status)
				return
			}
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
			if !sc.Scan() {
				ready <- fmt.Errorf("bench: a stream ended before its first line: %v", sc.Err())
				return
			}
			ready <- nil
			for sc.Scan() {
				if bytes.Equal(sc.Bytes(), []byte("event: delivery")) {
					got.Add(1)
				}
			}
		}()
	}
	for range n {
		if err := <-ready; err != nil {
			return err
		}
	}
	return nil
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

// startRelay starts a relay with server.Open as `crosstalk relay` does:
// on a SQLite ledger in dataDir, on the JetStream ledger at natsURLs
// with replicas, or in memory when natsURLs is memoryLedger; with the
// bench key pinned in its own trust store (never the user's) and owned by
// agent bench, and no rate limit (the bench measures the relay, not its
// limiter).
func startRelay(ctx context.Context, dataDir string, pub *signing.PublicKey, natsURLs string, replicas int) (*server.Server, error) {
	o := &server.Options{
		DataDir: dataDir, Ledger: natsURLs, LedgerReplicas: replicas,
		RateLimit: 1e9, RateBurst: 1_000_000_000,
		// The bench's streams (ingest --streams) are all one anonymous
		// principal's.
		StreamLimit: MaxStreams, MaxStreams: MaxStreams,
		Agents: []gateway.Agent{{ID: "bench", Names: []string{"BENCH"}, Keys: []string{benchKeyID}}, {ID: "reader", Names: []string{"READER"}}},
		Folder: &server.FolderOptions{}, // on, as by default in crosstalk relay
	}
	// Its log as crosstalk relay formats it (text, level info: a line per
	// envelope), written nowhere instead of to stderr.
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if err := signing.NewTrustStore(filepath.Join(dataDir, "known_keys")).Add(pub); err != nil {
		return nil, err
	}
	if natsURLs == memoryLedger {
		// Nothing on disk: the ledger and the projections in memory.
		o.Ledger, o.Store = "", memory.New(nil)
	}
	return server.Open(ctx, o)
}

// memoryLedger, as startRelay's natsURLs, gives the relay an in-memory
// ledger (crosstalk-bench ingest --memory).
const memoryLedger = "memory"

// shutdown stops a relay the bench started.
func shutdown(s *server.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// sqliteStats returns the SQLite writer's counters of the relay (zero for
// other ledgers).
func sqliteStats(s *server.Server) sqlite.Stats {
	if st, ok := s.Store().(*sqlite.Store); ok {
		return st.Stats()
	}
	return sqlite.Stats{}
}

// source hands out distinct signed envelopes: REQUESTs from BENCH to
// READER into the groups bench-<g> for g in groups, each with fresh ids,
// signed by key. They come from a stock signed ahead, then are signed as
// needed.
type source struct {
	key    *signing.PrivateKey
	groups []int
	mu     sync.RWMutex
	stock  [][]byte
	used   atomic.Int64
	fly    atomic.Int64 // numbers of envelopes signed on the fly, negative
}

func (s *source) make(i int) ([]byte, error) {
	e := envelope.New("BENCH", "READER", envelope.IntentRequest,
		fmt.Sprintf("Benchmark envelope %d.\nPlease review the attached change and answer with a short summary.", i))
	e.User = "bench"
	e.Context = fmt.Sprintf("bench-%d", s.groups[(i%len(s.groups)+len(s.groups))%len(s.groups)])
	return signing.SignEnvelope(e, s.key, nil)
}

// next returns an envelope not handed out before.
func (s *source) next() ([]byte, error) {
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
func (s *source) grow(n int) error {
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
func (s *source) topUp(rounds int) (int, error) {
	s.mu.RLock()
	used, have := int(s.used.Load()), len(s.stock)
	s.mu.RUnlock()
	n := min(used*rounds*6/5, 300_000) - max(have-used, 0)
	if n <= 0 {
		return 0, nil
	}
	return n, s.grow(n)
}

// ensure signs envelopes until at least n are in stock and not yet handed
// out, and returns how many it signed. Once next has signed some on the
// fly, the stock's places up to the count handed out are never handed
// out; ensure fills them too.
func (s *source) ensure(n int) (int, error) {
	s.mu.RLock()
	unused := len(s.stock) - int(s.used.Load())
	s.mu.RUnlock()
	if more := n - unused; more > 0 {
		return more, s.grow(more)
	}
	return 0, nil
}

// allGroups are the eight groups the envelopes go to.
var allGroups = []int{0, 1, 2, 3, 4, 5, 6, 7}
