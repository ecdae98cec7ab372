// Package xvfbtest starts a private X server for tests of the clipboard
// transport and the commands that use it (issue 5: "tested for real: the
// test starts its own Xvfb on a free display and uses xclip, under plain
// go test too"). It is a test helper: only _test.go files import it.
package xvfbtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hint is what to install when the tools are missing.
const Hint = "install them with `apt-get install xvfb xauth xclip xsel` (or run scripts/deps.sh)"

// Need skips the test — or fails it when the environment has CI=true, where
// the real-clipboard tests must run — if a program is not on PATH.
func Need(t testing.TB, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			msg := c + " is not installed: the clipboard tests need a real X server; " + Hint
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// Start starts Xvfb on a free display (-displayfd) with its own
// authorization cookie in a temp dir, and points DISPLAY and XAUTHORITY at
// it (and empties WAYLAND_DISPLAY) for the rest of the test; the server is
// stopped when the test ends, and the xclip/xsel processes that own
// selections exit with it. It needs Xvfb, xauth and xclip (see Need).
// Tests that call it cannot be parallel (t.Setenv).
func Start(t *testing.T) {
	t.Helper()
	Need(t, "Xvfb", "xauth", "xclip")
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
	// -displayfd alone takes the lowest free display, :0, where other
	// programs on a shared machine also start servers (and may remove
	// its socket); a random high display is less crowded. A taken one
	// makes Xvfb exit, and the next number is tried.
	var display string
	for attempt := 0; display == "" && attempt < 8; attempt++ {
		display = startServer(t, auth, fmt.Sprint(200+mrand.IntN(800)))
	}
	if display == "" {
		t.Fatal("Xvfb did not start on any of 8 displays")
	}
	if out, err := exec.Command("xauth", "-q", "-f", auth, "add", ":"+display, "MIT-MAGIC-COOKIE-1", hexCookie).CombinedOutput(); err != nil {
		t.Fatalf("xauth: %v: %s", err, out)
	}
	t.Setenv("DISPLAY", ":"+display)
	t.Setenv("XAUTHORITY", auth)
	t.Setenv("WAYLAND_DISPLAY", "")
}

// Put copies text to the clipboard with xclip, as another program would.
// The error includes what xclip printed.
func Put(t testing.TB, text []byte) error {
	t.Helper()
	// No output pipes: the forked selection owner would hold them open
	// and Run would wait for it. xclip's stderr goes to a file instead.
	errf, err := os.CreateTemp(t.TempDir(), "xclip-stderr")
	if err != nil {
		return err
	}
	defer errf.Close()
	cmd := exec.Command("xclip", "-selection", "clipboard", "-i")
	cmd.Stdin = strings.NewReader(string(text))
	cmd.Stderr = errf
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(errf.Name())
		return fmt.Errorf("xclip -i: %w: %s", err, strings.TrimSpace(string(msg)))
	}
	// xclip -i returns before its forked child has taken the selection
	// (its request to the server is sent after the parent exits): wait
	// until the clipboard holds the text, as the caller expects.
	var got []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = Get(t); string(got) == string(text) {
			return nil
		}
	}
	return fmt.Errorf("xclip -i: the clipboard holds %.100q 5s later, not the text", got)
}

// WaitOwned waits until a program owns the clipboard (it offers its
// TARGETS), without reading the text: for a test that copied with xclip
// itself, whose forked child takes the selection just after xclip -i
// returns.
func WaitOwned(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if exec.Command("xclip", "-selection", "clipboard", "-o", "-t", "TARGETS").Run() == nil {
			return
		}
	}
	t.Fatal("no program owns the clipboard 5s after xclip -i returned")
}

// Get reads the clipboard with xclip, as another program would; nil when
// it is empty or cannot be read.
func Get(t testing.TB) []byte {
	t.Helper()
	out, err := exec.Command("xclip", "-selection", "clipboard", "-o").Output()
	if err != nil {
		return nil
	}
	return out
}

// startServer starts Xvfb on display n and returns the display it reports
// ready, or "" when it exited (the display was taken).
func startServer(t *testing.T, auth, n string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// -noreset: by default the server resets when its last client
	// disconnects, and a client connecting during the reset fails with
	// "Can't open display" — which a test polling the clipboard with
	// short-lived xclip processes hits now and then (CI did, once).
	cmd := exec.Command("Xvfb", ":"+n, "-noreset", "-displayfd", "3", "-auth", auth, "-screen", "0", "640x480x24", "-nolisten", "tcp", "-nolisten", "local")
	cmd.ExtraFiles = []*os.File{w} // fd 3
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatalf("starting Xvfb: %v", err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		lines <- strings.TrimSpace(l)
	}()
	var display string
	select {
	case display = <-lines:
	case <-time.After(10 * time.Second):
	}
	if display == "" {
		cmd.Process.Kill()
		<-done
		t.Logf("Xvfb :%s did not start: %s", n, strings.TrimSpace(stderr.String()))
		return ""
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return display
}
