package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent writes from several goroutines while reading
// (run under -race) and checks that nothing written is lost.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Errorf("Buffer holds %d writes, want 800", n)
	}
}
