package procs

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestForRelay(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Run("one more", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "") // registers the restore of the variable
		if err := os.Unsetenv("GOMAXPROCS"); err != nil {
			t.Fatal(err)
		}
		restore := ForRelay()
		if got := runtime.GOMAXPROCS(0); got != prev+1 {
			t.Errorf("GOMAXPROCS after ForRelay = %d, want %d", got, prev+1)
		}
		restore()
		if got := runtime.GOMAXPROCS(0); got != prev {
			t.Errorf("GOMAXPROCS after restore = %d, want %d", got, prev)
		}
	})
	t.Run("the environment stands", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "1")
		restore := ForRelay()
		defer restore()
		if got := runtime.GOMAXPROCS(0); got != prev {
			t.Errorf("GOMAXPROCS with the variable set = %d, want it unchanged (%d)", got, prev)
		}
	})
}

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 6400},        // counts as 1 MiB
		{mib / 2, 6400},  // too
		{6 * mib, 1075},  // 6 MiB + 64 MiB: 1066.7 %, rounded up to 25
		{32 * mib, 200},  // twice
		{64 * mib, 100},  // the default from here on
		{640 * mib, 100}, // never below it
		{65 * mib, 100},  // 98.5 % → the default
		{63 * mib, 125},  // 101.6 % → 125
	} {
		if got := gcPercent(tc.live, GCHeadroom); got != tc.want {
			t.Errorf("gcPercent(live %d MiB) = %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}

// TestHeadroomGC: the policy raises GOGC for this test binary's small
// heap, and restore puts back what was set before; with GOGC in the
// environment, ForRelay leaves the collector alone.
func TestHeadroomGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	restore := headroomGC(GCHeadroom, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	got := debug.SetGCPercent(100)
	restore()
	if got <= 100 {
		t.Errorf("GOGC under the policy = %d, want more than 100 for a heap this small", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Errorf("GOGC after restore = %d, want 100 (as before)", now)
	}
	t.Setenv("GOGC", "100")
	debug.SetGCPercent(100)
	defer ForRelay()()
	time.Sleep(20 * time.Millisecond)
	if now := debug.SetGCPercent(100); now != 100 {
		t.Errorf("GOGC under ForRelay with GOGC set = %d, want 100", now)
	}
}
