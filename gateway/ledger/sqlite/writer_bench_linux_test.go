package sqlite

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// threadCPU is the CPU time (user and system) of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriterTurn runs the writer goroutine's work for appends on the
// benchmark's own goroutine, locked to its thread: transactions of 18
// one-record appends (the relay's group commit under 64 clients) in eight
// groups, ~1 KiB of data each, each transaction committed and fsynced
// (finish). thread-cpu-µs/op is that thread's CPU time per append: the
// writer's and the syncer's work without the callers', the hand-offs
// between goroutines, or other processes' load, which the process's
// CPU time of BenchmarkAppendRelay includes. (The garbage collector's
// background work runs on other threads and is left out.)
func BenchmarkWriterTurn(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	const perTx = 18
	n := (b.N + perTx - 1) / perTx * perTx
	pad := strings.Repeat("x", 860)
	recs := make([]ledger.Record, n)
	for i := range recs {
		id := envelope.NewID()
		r, err := ledger.Record{
			Kind: "chat.message", GroupID: fmt.Sprintf("bench-%d", i%8), By: "BENCH", Compact: true,
			Data:      fmt.Appendf(nil, `{"text":"Benchmark envelope %d.","x_crosstalk":{"raw":%q,"message":%q}}`, i, pad, id),
			DedupeKey: "msg:" + id,
		}.Normalized()
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = r
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU(b)
	for i := 0; i < n; i += perTx {
		bt := s.begin()
		for j := range perTx {
			o := appendOps.Get().(*op) // as appendOne
			o.ctx, o.rec = ctx, recs[i+j]
			bt.run(o)
		}
		c, ok := bt.commit()
		if !ok {
			b.Fatal(bt.err)
		}
		s.finish(c)
		for _, o := range c.batch {
			if err := <-o.done; err != nil {
				b.Fatal(err)
			}
			*o = op{done: o.done}
			appendOps.Put(o)
		}
	}
	b.ReportMetric(float64((threadCPU(b)-cpu0).Microseconds())/float64(n), "thread-cpu-µs/op")
}
