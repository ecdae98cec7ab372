package procs

import (
	"os"
	"runtime"
	"testing"
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
