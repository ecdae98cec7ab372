package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
)

// BenchmarkProjectionWritePath is the write path's projection work per
// envelope of the ingest benchmark's traffic (REQUESTs from BENCH to
// READER, each starting its thread, in four groups), as the relay does
// it under load: each append queues the facts of its event (factsOf,
// projQueue.add), and one sync (syncQueuedLocked) applies a batch of
// them to a file projection DB. The events are appended to a memory
// ledger, and their data made by Relay.record, outside the measured
// time. It reports the process's CPU time and the allocations per
// envelope: "facts" for the appends' share, "sync" for the sync's.
func BenchmarkProjectionWritePath(b *testing.B) {
	const batch = 256 // a 50 ms sync's under load (projEvery)
	ctx := context.Background()
	db, err := projection.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st := memory.New(nil)
	defer st.Close()
	r := New(st, &Options{Projection: db})
	if err := r.SyncProjection(ctx); err != nil {
		b.Fatal(err)
	}
	r.projEvery = time.Hour // the benchmark runs the syncs
	r.projAt.Store(int64(time.Since(projEpoch)))
	n := 0
	res := make([]ledger.Result, batch)
	data := make([]*EventData, batch)
	next := func() {
		recs := make([]ledger.Record, batch)
		for i := range recs {
			n++
			env := envelope.New("BENCH", "READER", envelope.IntentRequest,
				fmt.Sprintf("Benchmark envelope %d.\nPlease review the attached change and answer with a short summary.", n))
			env.User, env.Context = "bench", fmt.Sprintf("bench-%d", n%4)
			recs[i], data[i] = r.record(ctx, Intake{Transport: "http", Source: "bench"},
				&Outcome{Envelope: env, Actor: "BENCH", Verification: Verification{Status: StatusVerified}})
		}
		got, err := st.Append(ctx, recs) // the ledger alone: not projected
		if err != nil {
			b.Fatal(err)
		}
		copy(res, got)
	}
	sync := func() {
		r.projMu.Lock()
		err := r.syncQueuedLocked(ctx, int64(time.Since(projEpoch)))
		r.projMu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	for range 16384 / batch { // a DB that already holds some history
		next()
		for i := range res {
			r.projectAppended(ctx, res[i:i+1], data[i:i+1])
		}
		sync()
	}
	var ms runtime.MemStats
	var factsCPU, syncCPU time.Duration
	var factsAllocs, syncAllocs uint64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		next()
		runtime.ReadMemStats(&ms)
		m0, c0 := ms.Mallocs, cputime.Process()
		b.StartTimer()
		for i := range res {
			r.projectAppended(ctx, res[i:i+1], data[i:i+1])
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		m1, c1 := ms.Mallocs, cputime.Process()
		b.StartTimer()
		sync()
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		factsCPU += c1 - c0
		syncCPU += cputime.Process() - c1
		factsAllocs += m1 - m0
		syncAllocs += ms.Mallocs - m1
		b.StartTimer()
	}
	if pos, _, err := db.HighWater(ctx); err != nil || pos != int64(n) {
		b.Fatalf("HighWater = %d, %v; want %d: the syncs did not apply every append", pos, err, n)
	}
	events := float64(b.N * batch)
	b.ReportMetric(float64(factsCPU.Nanoseconds())/events, "facts-cpu-ns/event")
	b.ReportMetric(float64(syncCPU.Nanoseconds())/events, "sync-cpu-ns/event")
	b.ReportMetric(float64(factsAllocs)/events, "facts-allocs/event")
	b.ReportMetric(float64(syncAllocs)/events, "sync-allocs/event")
}
