// Package procs sets how many Ps (runtime.GOMAXPROCS) the relay runs
// with: one more than the runtime chooses, unless the GOMAXPROCS
// environment variable says otherwise.
//
// The relay's SQLite writer and syncer block in fdatasync (and pwrite):
// a goroutine in a blocking system call keeps its P until the runtime's
// monitor takes it back, and on a machine of few cores that leaves a core
// idle while requests wait for it. With one P more, the other goroutines
// keep every core busy meanwhile, and more requests reach each group
// commit (docs/performance.md "Session 5: one P more than the cores").
// The package changes nothing else; only commands call it, never a
// library.
package procs

import (
	"os"
	"runtime"
)

// ForRelay sets GOMAXPROCS to one more than its current value, unless
// the GOMAXPROCS environment variable is set (the operator's choice
// stands), and returns a function that restores the previous value.
func ForRelay() (restore func()) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev + 1)
	return func() { runtime.GOMAXPROCS(prev) }
}
