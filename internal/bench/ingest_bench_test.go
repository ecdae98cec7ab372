package bench

import (
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/cputime"
	"github.com/crosstalk-go/crosstalk/internal/procs"
	"github.com/crosstalk-go/crosstalk/signing"
)

// BenchmarkPost posts distinct signed envelopes over HTTP from 64
// goroutines to (a) the ceiling handler and (b) the relay, as
// `crosstalk-bench ingest` does, one envelope per op. Its allocs/op and
// B/op (clients and server together) stay steady on a loaded machine, where
// rates do not, and so does cpu-µs/op, the process's CPU time per op
// (less so: contention for caches and cores costs CPU too):
// go test -run '^$' -bench Post -benchmem ./internal/bench
func BenchmarkPost(b *testing.B) {
	defer procs.ForRelay()() // as crosstalk relay sets it, for both alike
	key, err := signing.GenerateKey(signing.Ed25519, benchKeyID)
	if err != nil {
		b.Fatal(err)
	}
	ceiling, stop, err := startCeiling(key.Public())
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	rr, err := startRelay(b.Context(), filepath.Join(b.TempDir(), "relay"), key.Public(), "", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer shutdown(rr)
	for _, bb := range []struct{ name, url string }{{"ceiling", ceiling}, {"relay", rr.URL() + "/crosstalk/receive"}} {
		b.Run(bb.name, func(b *testing.B) {
			src := &source{key: key, groups: allGroups}
			if err := src.grow(b.N); err != nil {
				b.Fatal(err)
			}
			hc := newBenchClient(64)
			defer hc.CloseIdleConnections()
			var fails atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 clients however many Ps
			b.ReportAllocs()
			b.ResetTimer()
			cpu, st0 := cputime.Process(), sqliteStats(rr)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body, _ := src.next()
					if status, err := post(b.Context(), hc, bb.url, body); err != nil || status != http.StatusOK {
						fails.Add(1)
					}
				}
			})
			// CPU time per op (clients and server): steadier than ns/op
			// when other processes share the machine.
			b.ReportMetric(float64((cputime.Process()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			if st := sqliteStats(rr); bb.name == "relay" && st.Commits > st0.Commits {
				// What group commit did in this run.
				b.ReportMetric(float64(st.Ops-st0.Ops)/float64(st.Commits-st0.Commits), "appends/commit")
			}
			if n := fails.Load(); n > 0 {
				b.Fatalf("%d posts failed", n)
			}
		})
	}
}
