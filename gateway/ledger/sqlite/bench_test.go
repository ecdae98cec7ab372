package sqlite_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
)

// benchClients is the number of concurrent clients of
// BenchmarkAppendGroupCommit, the relay's design load (docs/design.md §6).
const benchClients = 64

func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatalf("Open() error = %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchRecord(i int64) ledger.Record {
	return ledger.Record{
		Kind: "chat.message", GroupID: fmt.Sprintf("g%d", i%4), By: "claude",
		Data:      []byte(`{"text":"Please review the release checklist today.","to":["@foreman"],"priority":"attention"}`),
		DedupeKey: fmt.Sprintf("bench-%d", i),
	}
}

// cpuTime is the CPU time the process has used: the writer's work is on
// other goroutines than the benchmark's, and on a shared machine CPU per
// append is steadier than time per append.
func cpuTime() time.Duration { return cputime.Process() }

func reportCommits(b *testing.B, s *sqlite.Store, cpu0 time.Duration) {
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	st := s.Stats()
	b.ReportMetric(float64(st.Commits)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(st.Ops)/float64(max(st.Commits, 1)), "ops/commit")
}

// BenchmarkAppendSingle appends one record at a time from one client: each
// append is its own transaction and its own fsync.
func BenchmarkAppendSingle(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	var i int64
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := s.Append(ctx, []ledger.Record{benchRecord(i)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportCommits(b, s, cpu0)
}

// BenchmarkAppendGroupCommit appends one record per call from 64
// concurrent clients; the writer commits whatever is queued in one
// transaction, so clients share fsyncs. Compare ns/op with
// BenchmarkAppendSingle.
func BenchmarkAppendGroupCommit(b *testing.B) {
	s := benchStore(b)
	b.ResetTimer()
	appendConcurrently(b, s, func(i int64) []ledger.Record { return []ledger.Record{benchRecord(i)} })
}

// appendConcurrently appends rec(0) … rec(b.N-1) from benchClients
// goroutines, then stops the timer and reports the commits and CPU.
func appendConcurrently(b *testing.B, s *sqlite.Store, rec func(i int64) []ledger.Record) {
	ctx := b.Context()
	var next atomic.Int64
	n := int64(b.N)
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if _, err := s.Append(ctx, rec(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportCommits(b, s, cpu0)
}

// BenchmarkAppendRelay appends as the relay's intake does under 64 HTTP
// clients: one record per call from 64 goroutines, eight groups, ~1 KiB
// of compact event data, a "msg:" dedupe key per envelope, and
// transactions capped at 18 operations, the relay's group commit at
// that load (Options.MaxBatch). The records are made before the timer
// starts, so cpu-µs/op and allocs/op are the store's (Append and its
// writer and syncer goroutines) and the benchmark's goroutines.
func BenchmarkAppendRelay(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), &sqlite.Options{MaxBatch: 18})
	if err != nil {
		b.Fatalf("Open() error = %v", err)
	}
	b.Cleanup(func() { s.Close() })
	pad := strings.Repeat("x", 860)
	recs := make([]ledger.Record, b.N)
	for i := range recs {
		id := envelope.NewID()
		recs[i] = ledger.Record{
			Kind: "chat.message", GroupID: fmt.Sprintf("bench-%d", i%8), By: "BENCH", Compact: true,
			Data:      fmt.Appendf(nil, `{"text":"Benchmark envelope %d.","x_crosstalk":{"raw":%q,"message":%q}}`, i, pad, id),
			DedupeKey: "msg:" + id,
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	appendConcurrently(b, s, func(i int64) []ledger.Record { return recs[i : i+1] })
}
