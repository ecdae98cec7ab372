//go:build unix

package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/conformance"
)

// TestTimeoutWithChildHoldingOutput: a parser run through a wrapper (a
// shell, npm, a script) whose own child outlives it and keeps standard
// output open. The timeout kills the wrapper; the case must then fail
// with "no answer within", not wait for the child to close the pipe (a
// child that hangs held Run for ever).
func TestTimeoutWithChildHoldingOutput(t *testing.T) {
	m, err := conformance.Parse([]byte(`{"version":1,"cases":[{"name":"a","input":"x","expect":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	t.Cleanup(func() {
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	done := make(chan []conformance.Result, 1)
	go func() {
		rs, err := conformance.Run(context.Background(), m, conformance.Options{
			Command: []string{"sh", "-c", `sleep 3600 & echo $! > "$0"; wait`, pidFile},
			Timeout: 200 * time.Millisecond,
		})
		if err != nil {
			t.Error(err)
		}
		done <- rs
	}()
	select {
	case rs := <-done:
		if len(rs) != 1 || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "no answer within") {
			t.Errorf("Run = %+v, want the case failed with no answer within the timeout", rs)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run still waits for the wrapper's child a minute after the case's timeout")
	}
}
