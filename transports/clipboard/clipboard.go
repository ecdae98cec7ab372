package clipboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	atotto "github.com/atotto/clipboard"

	"github.com/crosstalk-go/crosstalk/transports"
)

// MaxSize is the default bound on clipboard text read or written. It
// equals gateway.MaxIntake (this package does not import the gateway).
const MaxSize = 8 << 20

// readTimeout bounds one read of the clipboard by a tool.
var readTimeout = 10 * time.Second

// DefaultInterval is the default poll interval of Receive.
const DefaultInterval = 500 * time.Millisecond

// maxBackoff bounds the wait before offering text again after a Handler
// failure.
const maxBackoff = 30 * time.Second

// Options configures a Clipboard. The zero value (or nil) means defaults.
type Options struct {
	// Logger receives a line per envelope text taken, rejection, oversized
	// clipboard and failure; nil discards. Clipboard text is never logged.
	Logger *slog.Logger
	// Interval is how often Receive reads the clipboard;
	// DefaultInterval when zero.
	Interval time.Duration
	// MaxSize bounds the text read from and written to the clipboard;
	// MaxSize when zero.
	MaxSize int
	// Fence makes Send wrap the text in a ``` fence, for chat UIs that
	// collapse newlines.
	Fence bool
	// StateFile, when set, remembers the hashes of texts handed to the
	// Handler and of texts Send placed, across restarts and between
	// processes (see the package documentation). It is created (0600)
	// as needed. Empty keeps them in memory only.
	StateFile string
	// Tool forces a clipboard tool: "xclip", "xsel", "wl-clipboard",
	// "pbcopy" or "atotto". Empty chooses one at every call.
	Tool string
}

// Clipboard is the system clipboard as a transports.Receiver and
// transports.Sender. Its methods are safe for concurrent use.
type Clipboard struct {
	log      *slog.Logger
	interval time.Duration
	max      int
	fence    bool
	force    string
	state    *state
}

var (
	_ transports.Receiver = (*Clipboard)(nil)
	_ transports.Sender   = (*Clipboard)(nil)
)

// New returns a Clipboard. Nothing is run until a method is called.
func New(opts *Options) *Clipboard {
	if opts == nil {
		opts = &Options{}
	}
	c := &Clipboard{
		log:      opts.Logger,
		interval: opts.Interval,
		max:      opts.MaxSize,
		fence:    opts.Fence,
		force:    opts.Tool,
		state:    newState(opts.StateFile),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.interval <= 0 {
		c.interval = DefaultInterval
	}
	if c.max <= 0 {
		c.max = MaxSize
	}
	return c
}

// ErrUnavailable is wrapped by every error that says there is no usable
// clipboard: no tool installed, no display, a display that cannot be
// reached.
var ErrUnavailable = errors.New("clipboard: no clipboard available")

// ErrTooLarge is wrapped by the error Read returns when the clipboard
// holds more than the bound, and by Send for a text larger than it.
var ErrTooLarge = errors.New("clipboard: text too large")

// unavailable is an error with its own message that wraps ErrUnavailable.
type unavailable struct{ msg string }

func (e *unavailable) Error() string { return e.msg }
func (e *unavailable) Unwrap() error { return ErrUnavailable }

// tool is a clipboard program: the command that prints the clipboard and
// the one that sets it from standard input.
type tool struct {
	name        string
	read, write []string
	x11         bool // needs DISPLAY
}

var (
	toolXclip = tool{name: "xclip", read: []string{"xclip", "-selection", "clipboard", "-o"}, write: []string{"xclip", "-selection", "clipboard", "-i"}, x11: true}
	toolXsel  = tool{name: "xsel", read: []string{"xsel", "--clipboard", "--output"}, write: []string{"xsel", "--clipboard", "--input"}, x11: true}
	toolWl    = tool{name: "wl-clipboard", read: []string{"wl-paste", "--no-newline"}, write: []string{"wl-copy"}}
	toolPb    = tool{name: "pbcopy", read: []string{"pbpaste"}, write: []string{"pbcopy"}}
	toolAtto  = tool{name: "atotto"}
)

func have(cmd string) bool {
	_, err := exec.LookPath(cmd)
	return err == nil
}

// Tool returns the name of the clipboard tool a call would use now, or an
// error wrapping ErrUnavailable that says what is missing.
func (c *Clipboard) Tool() (string, error) {
	t, err := c.pick()
	return t.name, err
}

// pick chooses the clipboard tool for one call (see the package
// documentation for the order).
func (c *Clipboard) pick() (tool, error) {
	display, wayland := os.Getenv("DISPLAY"), os.Getenv("WAYLAND_DISPLAY")
	if c.force != "" {
		for _, t := range []tool{toolXclip, toolXsel, toolWl, toolPb, toolAtto} {
			if t.name != c.force {
				continue
			}
			if t.read != nil && (!have(t.read[0]) || !have(t.write[0])) {
				return t, &unavailable{fmt.Sprintf("clipboard: no clipboard tool: %s is not installed", t.name)}
			}
			if t.x11 && display == "" {
				return t, &unavailable{"clipboard: no display: DISPLAY is empty; run under X11"}
			}
			return t, nil
		}
		return tool{}, fmt.Errorf("clipboard: unknown tool %q (want xclip, xsel, wl-clipboard, pbcopy or atotto)", c.force)
	}
	switch runtime.GOOS {
	case "darwin":
		if have("pbpaste") && have("pbcopy") {
			return toolPb, nil
		}
		return tool{}, &unavailable{"clipboard: no clipboard tool: pbcopy and pbpaste are not on PATH"}
	case "linux", "freebsd", "openbsd", "netbsd", "dragonfly", "solaris", "illumos":
	default:
		return toolAtto, nil // Windows, Termux: atotto knows them
	}
	if wayland != "" && have("wl-paste") && have("wl-copy") {
		return toolWl, nil
	}
	var x *tool
	switch {
	case have("xclip"):
		x = &toolXclip
	case have("xsel"):
		x = &toolXsel
	}
	switch {
	case x != nil && display != "":
		return *x, nil
	case x != nil:
		return tool{}, &unavailable{"clipboard: no display: DISPLAY is empty; run under X11 (or under Wayland with wl-clipboard installed)"}
	case display == "" && wayland == "":
		return tool{}, &unavailable{"clipboard: no clipboard tool: install xclip or xsel, and run under X11 (DISPLAY is empty)"}
	case display != "":
		return tool{}, &unavailable{"clipboard: no clipboard tool: install xclip or xsel"}
	default:
		return tool{}, &unavailable{"clipboard: no clipboard tool: install wl-clipboard (wl-copy and wl-paste), or xclip or xsel for XWayland"}
	}
}

// Read returns the clipboard's text: empty when the clipboard is empty, an
// error wrapping ErrTooLarge when it holds more than the bound (nothing
// more than the bound is read), and one wrapping ErrUnavailable when there
// is no clipboard.
func (c *Clipboard) Read(ctx context.Context) ([]byte, error) {
	t, err := c.pick()
	if err != nil {
		return nil, err
	}
	if t.read == nil {
		return c.readAtotto()
	}
	// The application owning the clipboard answers the tool's request
	// for the text; one that hangs would keep the tool (and every later
	// poll) waiting for ever.
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, t.read[0], t.read[1:]...)
	var stderr cappedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("clipboard: %s: %w", t.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("clipboard: running %s: %w", t.read[0], err)
	}
	data, rerr := io.ReadAll(io.LimitReader(out, int64(c.max)+1))
	if len(data) > c.max {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, c.tooLarge()
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rctx.Err() != nil {
		return nil, fmt.Errorf("clipboard: %s did not answer within %v: the application that owns the clipboard may be hung", t.read[0], readTimeout)
	}
	if werr != nil {
		msg := strings.TrimSpace(stderr.String())
		if emptyClipboard(msg) {
			return nil, nil
		}
		return nil, toolError(t, t.read, werr, msg)
	}
	if rerr != nil {
		return nil, fmt.Errorf("clipboard: reading from %s: %w", t.read[0], rerr)
	}
	return data, nil
}

func (c *Clipboard) tooLarge() error {
	return fmt.Errorf("%w: the clipboard holds more than %d bytes (%d MiB); not read — save it to a file and use `crosstalk watch` or `crosstalk send` instead", ErrTooLarge, c.max, c.max>>20)
}

func (c *Clipboard) readAtotto() ([]byte, error) {
	if atotto.Unsupported {
		return nil, &unavailable{"clipboard: no clipboard tool: atotto/clipboard supports none here (install xclip, xsel or wl-clipboard)"}
	}
	s, err := atotto.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("clipboard: %w", err)
	}
	if len(s) > c.max {
		return nil, c.tooLarge()
	}
	return []byte(s), nil
}

// emptyClipboard reports the tools' ways of saying there is nothing to
// read: xclip "Error: target STRING not available", wl-paste "No
// selection" / "Nothing is copied".
func emptyClipboard(stderr string) bool {
	s := strings.ToLower(stderr)
	return strings.Contains(s, "not available") || strings.Contains(s, "no selection") || strings.Contains(s, "nothing is copied")
}

// toolError turns a failed tool run into an error; one that cannot reach
// the display wraps ErrUnavailable.
func toolError(t tool, args []string, err error, stderr string) error {
	l := strings.ToLower(stderr)
	if strings.Contains(l, "open display") || strings.Contains(l, "failed to connect") || strings.Contains(l, "compositor") {
		return &unavailable{fmt.Sprintf("clipboard: %s cannot reach the display (DISPLAY=%q, WAYLAND_DISPLAY=%q): %s", t.name, os.Getenv("DISPLAY"), os.Getenv("WAYLAND_DISPLAY"), stderr)}
	}
	if stderr != "" {
		return fmt.Errorf("clipboard: %s: %w: %s", strings.Join(args, " "), err, stderr)
	}
	return fmt.Errorf("clipboard: %s: %w", strings.Join(args, " "), err)
}

// Write places text on the clipboard as it is and remembers it as written
// by this package, so no Receive sharing the state ingests it.
func (c *Clipboard) Write(ctx context.Context, text []byte) error {
	if len(text) > c.max {
		return fmt.Errorf("%w: %d bytes, more than the bound of %d", ErrTooLarge, len(text), c.max)
	}
	t, err := c.pick()
	if err != nil {
		return err
	}
	// Remember first: a Receive polling right now must already know it.
	if err := c.state.add(kindOwn, hashText(text)); err != nil {
		c.log.Warn("clipboard: recording an own write", "err", err)
	}
	if t.write == nil {
		if atotto.Unsupported {
			return &unavailable{"clipboard: no clipboard tool: atotto/clipboard supports none here (install xclip, xsel or wl-clipboard)"}
		}
		if err := atotto.WriteAll(string(text)); err != nil {
			return fmt.Errorf("clipboard: %w", err)
		}
		return nil
	}
	// xclip, xsel and wl-copy fork a process that owns the selection
	// until another program takes it; it inherits standard error. A pipe
	// would keep Wait waiting for that process, so standard error goes to
	// an unlinked temp file, and standard output to the null device.
	errf, err := os.CreateTemp("", "crosstalk-clipboard-*.stderr")
	if err != nil {
		return fmt.Errorf("clipboard: %w", err)
	}
	defer func() {
		errf.Close()
		os.Remove(errf.Name())
	}()
	cmd := exec.CommandContext(ctx, t.write[0], t.write[1:]...)
	cmd.Stdin = bytes.NewReader(text)
	cmd.Stderr = errf
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b := make([]byte, 4096)
		n, _ := errf.ReadAt(b, 0)
		return toolError(t, t.write, err, strings.TrimSpace(string(b[:n])))
	}
	c.awaitOwned(ctx, text)
	return nil
}

// ownWait bounds how long Write waits for its text to show on the
// clipboard.
const ownWait = 2 * time.Second

// awaitOwned waits until the clipboard reads back text. The tools exit
// before the process they fork has taken the selection, so without the
// wait a read right after Write could still see the old text, and of two
// quick Writes the first could end up on the clipboard. Waiting is best
// effort: when the clipboard shows other text after ownWait (a person
// copied something meanwhile), Write has still done its part.
func (c *Clipboard) awaitOwned(ctx context.Context, text []byte) {
	want := hashText(text)
	deadline := time.Now().Add(ownWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		got, err := c.Read(ctx)
		if err != nil && !errors.Is(err, ErrTooLarge) {
			return // no clipboard to read, or ctx ended
		}
		if err == nil && hashText(got) == want {
			return
		}
		if time.Now().After(deadline) {
			c.log.Warn("clipboard: the written text did not show on the clipboard", "waited", ownWait)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// cappedBuffer keeps the first 4 KiB written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
