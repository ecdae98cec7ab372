package clipboard_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needTools skips the test (or fails it under CI=true) when a program the
// real-clipboard tests need is missing.
func needTools(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			msg := c + " is not installed: the clipboard tests need a real X server; install them with `apt-get install xvfb xauth xclip xsel` (or run scripts/deps.sh)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// startX starts a private Xvfb on a free display, with its own
// authorization cookie, and points DISPLAY and XAUTHORITY at it for the
// rest of the test. The xclip/xsel processes that own selections exit when
// it stops.
func startX(t *testing.T) {
	t.Helper()
	needTools(t, "Xvfb", "xauth", "xclip")
	dir := t.TempDir()
	auth := filepath.Join(dir, "Xauthority")
	cookie := make([]byte, 16)
	rand.Read(cookie)
	hexCookie := hex.EncodeToString(cookie)
	// The server loads every cookie in its -auth file whatever display
	// the entry names; the client's entry is added once the display
	// number is known.
	if out, err := exec.Command("xauth", "-q", "-f", auth, "add", ":0", "MIT-MAGIC-COOKIE-1", hexCookie).CombinedOutput(); err != nil {
		t.Fatalf("xauth: %v: %s", err, out)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-auth", auth, "-screen", "0", "640x480x24", "-nolisten", "tcp", "-nolisten", "local")
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), "XAUTHORITY="+auth)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatalf("starting Xvfb: %v", err)
	}
	w.Close()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		lines <- l
	}()
	var display string
	select {
	case l := <-lines:
		display = strings.TrimSpace(l)
	case <-time.After(10 * time.Second):
		t.Fatalf("Xvfb did not report a display within 10s: %s", stderr.String())
	}
	if display == "" {
		t.Fatalf("Xvfb exited without a display: %s", stderr.String())
	}
	if out, err := exec.Command("xauth", "-q", "-f", auth, "add", ":"+display, "MIT-MAGIC-COOKIE-1", hexCookie).CombinedOutput(); err != nil {
		t.Fatalf("xauth: %v: %s", err, out)
	}
	t.Setenv("DISPLAY", ":"+display)
	t.Setenv("XAUTHORITY", auth)
	t.Setenv("WAYLAND_DISPLAY", "")
}

// xclipPut copies text to the clipboard as another program would.
func xclipPut(t *testing.T, text []byte) error {
	t.Helper()
	cmd := exec.Command("xclip", "-selection", "clipboard", "-i")
	cmd.Stdin = strings.NewReader(string(text))
	return cmd.Run() // no output pipes: the forked owner keeps none open
}

// xclipGet reads the clipboard as another program would.
func xclipGet(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("xclip", "-selection", "clipboard", "-o").Output()
	if err != nil {
		return nil
	}
	return out
}
