//go:build unix

package clipboard_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/xvfbtest"
	"github.com/crosstalk-go/crosstalk/transports/clipboard"
)

// TestHungOwner: the application that owns the clipboard hangs (here an
// xclip owner stopped with SIGSTOP), so it never answers a request for the
// text, and xclip and xsel wait for it forever. Read gives up with an
// error that says so instead of hanging — Receive, `clip watch` and the
// relay's clipboard watch hung with it — and Receive goes on polling.
func TestHungOwner(t *testing.T) {
	xvfbtest.Start(t)
	xvfbtest.Need(t, "xsel")
	owner := exec.Command("xclip", "-selection", "clipboard", "-i", "-quiet") // -quiet: stays in the foreground
	owner.Stdin = strings.NewReader("[[A→B v1]]\n")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		owner.Process.Signal(syscall.SIGCONT)
		owner.Process.Kill()
		owner.Wait()
	})
	xvfbtest.WaitOwned(t)
	if err := owner.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	clipboard.SetReadTimeout(t, 200*time.Millisecond)
	for _, tool := range []string{"xclip", "xsel"} {
		t.Run(tool, func(t *testing.T) {
			c := clipboard.New(&clipboard.Options{Tool: tool})
			done := make(chan error, 1)
			go func() {
				_, err := c.Read(context.Background())
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || errors.Is(err, clipboard.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
					t.Errorf("Read = %v, want an error saying the clipboard did not answer", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Read still waits for the hung owner after 30s")
			}
		})
	}
}
