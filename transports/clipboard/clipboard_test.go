package clipboard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
	"github.com/crosstalk-go/crosstalk/internal/xvfbtest"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/clipboard"
	"github.com/crosstalk-go/crosstalk/transports/transporttest"
)

const interval = 40 * time.Millisecond

func TestMaxSizeIsMaxIntake(t *testing.T) {
	if clipboard.MaxSize != gateway.MaxIntake {
		t.Errorf("MaxSize = %d, want gateway.MaxIntake %d", clipboard.MaxSize, gateway.MaxIntake)
	}
}

func TestConformance(t *testing.T) {
	xvfbtest.Start(t)
	stateFile := filepath.Join(t.TempDir(), "clipboard.state")
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) (transports.Receiver, transports.Sender) {
			c := clipboard.New(&clipboard.Options{Interval: interval, StateFile: stateFile})
			return c, c
		},
		Put: func(ctx context.Context, t *testing.T, text []byte) error { return xvfbtest.Put(t, text) },
		// What Send places is never received by the same Receiver (nor
		// by any sharing its state), so it is checked by reading the
		// clipboard.
		Fetch: func(ctx context.Context, t *testing.T) [][]byte {
			if b := xvfbtest.Get(t); len(b) > 0 {
				return [][]byte{b}
			}
			return nil
		},
		Ordered: true,
		Serial:  true,
		Settle:  300 * time.Millisecond,
	})
}

func envText(t *testing.T, body string) []byte {
	t.Helper()
	e := envelope.New("ALICE", "BOB", envelope.IntentRequest, body)
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorder is a Handler that records what it got; it fails while fail > 0.
type recorder struct {
	mu   sync.Mutex
	got  [][]byte
	fail int
	ch   chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 100)} }

func (r *recorder) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.Transport != "clipboard" || in.Source != "clipboard" || in.CanReply {
		return nil, fmt.Errorf("Inbound = {%q %q %v}, want clipboard, clipboard, false", in.Transport, in.Source, in.CanReply)
	}
	if r.fail > 0 {
		r.fail--
		return nil, errors.New("not recorded")
	}
	r.got = append(r.got, in.Data)
	r.ch <- struct{}{}
	return nil, nil
}

func (r *recorder) texts() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.got...)
}

func (r *recorder) wait(t *testing.T, n int, d time.Duration) [][]byte {
	t.Helper()
	deadline := time.After(d)
	for {
		if got := r.texts(); len(got) >= n {
			return got
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("handler got %d texts within %s, want %d", len(r.texts()), d, n)
		}
	}
}

// start runs c.Receive until the test ends; stop cancels it and returns
// what Receive returned.
func start(t *testing.T, c *clipboard.Clipboard, h transports.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Receive(ctx, h) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(5 * time.Second):
				result = errors.New("Receive did not return within 5s of cancel")
			}
		})
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Receive = %v, want nil after cancel", err)
		}
	})
	return stop
}

func TestOwnWritesNotReingested(t *testing.T) {
	xvfbtest.Start(t)
	state := filepath.Join(t.TempDir(), "state")
	c := clipboard.New(&clipboard.Options{Interval: interval, StateFile: state})
	rec := newRecorder()
	start(t, c, rec.handle)
	time.Sleep(3 * interval)

	own := envText(t, "placed by Send")
	if err := c.Send(context.Background(), "BOB", "id-1", own); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if got := waitClipboard(t, func(b []byte) bool { return bytes.Equal(b, own) }); !bytes.Equal(got, own) {
		t.Fatalf("clipboard after Send = %q, want the text", got)
	}
	// Another process (clip copy) sharing the state file, fenced.
	other := clipboard.New(&clipboard.Options{StateFile: state, Fence: true})
	fenced := envText(t, "placed by another process")
	if err := other.Send(context.Background(), "BOB", "id-2", fenced); err != nil {
		t.Fatalf("Send = %v", err)
	}
	isFenced := func(b []byte) bool {
		return strings.HasPrefix(string(b), "```\n") && strings.HasSuffix(string(b), "```\n")
	}
	if got := string(waitClipboard(t, isFenced)); !isFenced([]byte(got)) {
		t.Errorf("fenced Send placed %q, want a ``` fence around the text", got)
	}
	time.Sleep(8 * interval)
	if got := rec.texts(); len(got) != 0 {
		t.Fatalf("Receive ingested %q, its own writes", got)
	}
	// Text copied by someone else is taken.
	theirs := envText(t, "copied by the user")
	if err := xvfbtest.Put(t, theirs); err != nil {
		t.Fatal(err)
	}
	if got := rec.wait(t, 1, 3*time.Second); !bytes.Equal(got[0], theirs) {
		t.Errorf("received %q, want %q", got[0], theirs)
	}
}

// waitClipboard reads the clipboard until ok holds for it, for up to 5 s,
// and returns the last text read. xclip -i, which Send runs, returns
// before its forked child has taken the selection: a read right after
// Send may still see what was there before.
func waitClipboard(t *testing.T, ok func([]byte) bool) []byte {
	t.Helper()
	var got []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = xvfbtest.Get(t); ok(got) {
			break
		}
	}
	return got
}

func TestDuplicatesSuppressed(t *testing.T) {
	xvfbtest.Start(t)
	for _, stateFile := range []string{"", filepath.Join(t.TempDir(), "state")} {
		t.Run(fmt.Sprintf("state=%v", stateFile != ""), func(t *testing.T) {
			// Not the last subtest's envelope: a new Receiver without
			// state would take it.
			if err := xvfbtest.Put(t, []byte("start")); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			start(t, clipboard.New(&clipboard.Options{Interval: interval, StateFile: stateFile}), rec.handle)
			a, b := envText(t, "A"), envText(t, "B")
			steps := []struct {
				text []byte
				n    int // texts received after the step
			}{
				{a, 1},
				{[]byte("just chat, no envelope"), 1},
				{append(append([]byte{}, a...), "\n\n"...), 1}, // A with a trailing newline: the same text
				{a, 1},
				{b, 2},
				{a, 2},
			}
			for i, s := range steps {
				if err := xvfbtest.Put(t, s.text); err != nil {
					t.Fatal(err)
				}
				if s.n > len(rec.texts()) {
					rec.wait(t, s.n, 3*time.Second)
				} else {
					time.Sleep(5 * interval)
				}
				if got := len(rec.texts()); got != s.n {
					t.Fatalf("after step %d the handler got %d texts, want %d", i, got, s.n)
				}
			}
		})
	}
}

func TestHandlerFailureRetried(t *testing.T) {
	xvfbtest.Start(t)
	rec := newRecorder()
	rec.fail = 2
	start(t, clipboard.New(&clipboard.Options{Interval: interval}), rec.handle)
	text := envText(t, "retry me")
	if err := xvfbtest.Put(t, text); err != nil {
		t.Fatal(err)
	}
	if got := rec.wait(t, 1, 5*time.Second); !bytes.Equal(got[0], text) {
		t.Errorf("received %q, want %q", got[0], text)
	}
}

// TestTooLarge: a clipboard holding 100 MB gives a clear error from Read
// without reading it all, one notice from Receive, and Receive goes on.
func TestTooLarge(t *testing.T) {
	xvfbtest.Start(t)
	// Bounded, so that a stuck X server fails the test instead of hanging
	// the suite.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xclip", "-selection", "clipboard", "-i")
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = io.LimitReader(repeatReader('x'), 100<<20)
	if err := cmd.Run(); err != nil {
		t.Fatalf("xclip with 100 MB: %v", err)
	}
	xvfbtest.WaitOwned(t)
	c := clipboard.New(&clipboard.Options{Interval: interval})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.Read(context.Background())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, clipboard.ErrTooLarge) {
		t.Fatalf("Read of 100 MB = %v, want ErrTooLarge", err)
	}
	if want := fmt.Sprintf("clipboard: text too large: the clipboard holds more than %d bytes", clipboard.MaxSize); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Read error = %q, want it to start with %q", err, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("Read allocated %d MiB for a 100 MB clipboard, want it bounded", alloc>>20)
	}

	var logs syncbuf.Buffer
	c = clipboard.New(&clipboard.Options{Interval: interval, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := newRecorder()
	start(t, c, rec.handle)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "more than") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(logs.String(), "clipboard: text too large"); n != 1 {
		t.Errorf("Receive logged the oversized clipboard %d times, want once:\n%s", n, logs.String())
	}
	text := envText(t, "after the big one")
	if err := xvfbtest.Put(t, text); err != nil {
		t.Fatal(err)
	}
	if got := rec.wait(t, 1, 5*time.Second); !bytes.Equal(got[0], text) {
		t.Errorf("received %q, want %q", got[0], text)
	}
	if err := c.Send(context.Background(), "BOB", "id", make([]byte, clipboard.MaxSize+1)); !errors.Is(err, transports.ErrPermanent) {
		t.Errorf("Send of more than MaxSize = %v, want ErrPermanent", err)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestEmptyClipboardAndTools(t *testing.T) {
	xvfbtest.Start(t)
	c := clipboard.New(nil)
	got, err := c.Read(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("Read of a fresh display = %q, %v; want empty, nil", got, err)
	}
	tools := []string{"xclip"}
	if _, err := exec.LookPath("xsel"); err == nil {
		tools = append(tools, "xsel")
	}
	for _, tool := range tools {
		t.Run(tool, func(t *testing.T) {
			c := clipboard.New(&clipboard.Options{Tool: tool})
			if name, err := c.Tool(); name != tool || err != nil {
				t.Fatalf("Tool() = %q, %v; want %q", name, err, tool)
			}
			text := []byte("héllo ✓ " + tool + "\nsecond line\n")
			if err := c.Write(context.Background(), text); err != nil {
				t.Fatalf("Write = %v", err)
			}
			// xsel's forked owner takes the selection just after the
			// command returns: allow it a moment.
			var got []byte
			var err error
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if got, err = c.Read(context.Background()); err == nil && bytes.Equal(got, text) {
					break
				}
			}
			if err != nil || !bytes.Equal(got, text) {
				t.Errorf("Read = %q, %v; want %q", got, err, text)
			}
		})
	}
}

// TestUnavailable: without a tool or a display every call says what is
// missing, wrapping ErrUnavailable; Receive returns the same error.
func TestUnavailable(t *testing.T) {
	empty := t.TempDir()
	withXclip := t.TempDir()
	xclip, err := exec.LookPath("xclip")
	haveXclip := err == nil
	if haveXclip {
		if err := os.Symlink(xclip, filepath.Join(withXclip, "xclip")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, path, display, wayland string
		needXclip                    bool
		want                         string
	}{
		{"nothing", empty, "", "", false, "clipboard: no clipboard tool: install xclip or xsel, and run under X11 (DISPLAY is empty)"},
		{"display, no tool", empty, ":0", "", false, "clipboard: no clipboard tool: install xclip or xsel"},
		{"wayland, no tool", empty, "", "wayland-0", false, "clipboard: no clipboard tool: install wl-clipboard"},
		{"tool, no display", withXclip, "", "", true, "clipboard: no display: DISPLAY is empty"},
		{"tool, dead display", withXclip, ":59999", "", true, `clipboard: xclip cannot reach the display (DISPLAY=":59999"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needXclip && !haveXclip {
				xvfbtest.Need(t, "xclip")
			}
			t.Setenv("PATH", tt.path)
			t.Setenv("DISPLAY", tt.display)
			t.Setenv("WAYLAND_DISPLAY", tt.wayland)
			c := clipboard.New(&clipboard.Options{Interval: interval})
			_, rerr := c.Read(context.Background())
			werr := c.Write(context.Background(), []byte("x"))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			recvErr := c.Receive(ctx, newRecorder().handle)
			for what, err := range map[string]error{"Read": rerr, "Write": werr, "Receive": recvErr} {
				if !errors.Is(err, clipboard.ErrUnavailable) || !strings.HasPrefix(err.Error(), tt.want) {
					t.Errorf("%s = %v, want ErrUnavailable starting %q", what, err, tt.want)
				}
			}
		})
	}
}

func TestFence(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		fence string
	}{
		{"plain", string(envText(t, "hello")), "```"},
		{"backticks in body", string(envText(t, "code: ```go\nx\n```")), "````"},
		{"no final newline", "[[A→B v1]]\nintent: ACK\n\nbody: |\n  ok\nsig: none\n[[END]]", "```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(clipboard.Fence([]byte(tt.text)))
			want := tt.fence + "\n" + strings.TrimSuffix(tt.text, "\n") + "\n" + tt.fence + "\n"
			if got != want {
				t.Errorf("Fence(%q) = %q, want %q", tt.text, got, want)
			}
			e, err := envelope.NewReader(strings.NewReader(got)).Next()
			if err != nil {
				t.Fatalf("reading the fenced text: %v", err)
			}
			if src := string(e.Source()); src != strings.TrimSuffix(tt.text, "\n")+"\n" {
				t.Errorf("fenced envelope's source = %q, want the text unchanged", src)
			}
		})
	}
}

// TestWriteOwnsBeforeReturning checks that Write returns only once the
// clipboard shows its text, even with a tool whose forked owner takes the
// selection late: a read right after Write sees that text, and of quick
// successive writes the last one stays.
func TestWriteOwnsBeforeReturning(t *testing.T) {
	xvfbtest.Start(t)
	real, err := exec.LookPath("xclip")
	if err != nil {
		t.Fatal(err)
	}
	// An xclip whose copy takes the selection 200 ms after it exits.
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in
*" -i "*)
	tmp=$(mktemp)
	cat >"$tmp"
	( sleep 0.2; %[1]q "$@" <"$tmp"; rm -f "$tmp" ) >/dev/null 2>&1 &
	exit 0 ;;
esac
exec %[1]q "$@"
`, real)
	if err := os.WriteFile(filepath.Join(dir, "xclip"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	c := clipboard.New(&clipboard.Options{Interval: interval, Tool: "xclip"})
	ctx := t.Context()
	var last []byte
	for i := range 3 {
		last = fmt.Appendf(nil, "copy %d", i)
		if err := c.Write(ctx, last); err != nil {
			t.Fatalf("Write(%q) error = %v", last, err)
		}
		if got := xvfbtest.Get(t); !bytes.Equal(got, last) {
			t.Fatalf("clipboard right after Write(%q) = %q", last, got)
		}
	}
	time.Sleep(300 * time.Millisecond) // longer than the late owner's delay
	if got := xvfbtest.Get(t); !bytes.Equal(got, last) {
		t.Errorf("clipboard after the writes = %q, want the last, %q", got, last)
	}
}
