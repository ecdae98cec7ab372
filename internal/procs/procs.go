// Package procs sets how the relay's Go runtime runs: how many Ps
// (runtime.GOMAXPROCS) and how often the garbage collector runs, unless
// the GOMAXPROCS and GOGC environment variables say otherwise.
//
// Ps: one more than the runtime chooses. The relay's SQLite writer and
// syncer block in fdatasync (and pwrite): a goroutine in a blocking
// system call keeps its P until the runtime's monitor takes it back, and
// on a machine of few cores that leaves a core idle while requests wait
// for it. With one P more, the other goroutines keep every core busy
// meanwhile, and more requests reach each group commit (docs/performance.md
// "Session 5: one P more than the cores").
//
// The collector: the relay's live heap is small (a few MiB) and every
// envelope allocates ~10 KiB, so at the default GOGC=100 it collected
// a dozen times a second under load, each time stopping the world twice.
// ForRelay lets the heap grow by at least GCHeadroom between
// collections, and by the default 100 % once the live heap is larger
// than that (docs/performance.md "Session 16"). A memory limit
// (GOMEMLIMIT) still makes it collect earlier.
//
// The package changes nothing else; only commands call it, never a
// library.
package procs

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// GCHeadroom is the least the heap may grow by between two collections
// under ForRelay.
const GCHeadroom = 64 << 20

// gcEvery is how often ForRelay's collector policy reads the live heap.
const gcEvery = 250 * time.Millisecond

// ForRelay sets GOMAXPROCS to one more than its current value, unless
// the GOMAXPROCS environment variable is set (the operator's choice
// stands), and the collector's GOGC so that the heap grows by at least
// GCHeadroom between collections, unless GOGC is set; it returns a
// function that restores both.
func ForRelay() (restore func()) {
	restoreProcs, restoreGC := func() {}, func() {}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		prev := runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(prev + 1)
		restoreProcs = func() { runtime.GOMAXPROCS(prev) }
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		restoreGC = headroomGC(GCHeadroom, gcEvery)
	}
	return func() {
		restoreGC()
		restoreProcs()
	}
}

// headroomGC sets GOGC every period from the live heap, to the percent
// that lets the heap grow by headroom (at least 100), and returns a
// function that stops doing so and restores the previous GOGC.
func headroomGC(headroom uint64, period time.Duration) (restore func()) {
	prev := debug.SetGCPercent(100)
	debug.SetGCPercent(prev)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		set := -1
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			p := 100 // a runtime without the metric: the default
			if v := sample[0].Value; v.Kind() == metrics.KindUint64 {
				p = gcPercent(v.Uint64(), headroom)
			}
			if p != set {
				debug.SetGCPercent(p)
				set = p
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		debug.SetGCPercent(prev)
	}
}

// gcPercent returns the GOGC that lets a heap of live bytes grow by
// headroom before the next collection: at least 100, at most 100×
// headroom/1 MiB (a live heap under 1 MiB counts as 1 MiB), rounded up
// to a multiple of 25 so that small changes of the live heap do not
// change it every time.
func gcPercent(live, headroom uint64) int {
	live = max(live, 1<<20)
	p := int((headroom*100 + live - 1) / live)
	p = (p + 24) / 25 * 25
	return max(p, 100)
}
