package folder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/transports"
)

// MaxFileSize bounds one file, in and out. It equals gateway.MaxIntake
// (this package does not import the gateway): the relay reads no more from
// one intake anyway.
const MaxFileSize = 8 << 20

// Defaults for Options.
const (
	DefaultSettle  = 500 * time.Millisecond
	DefaultRescan  = 5 * time.Second
	DefaultTimeout = 2 * time.Minute
)

// Names of the subdirectories of the watched directory.
const (
	ProcessedDir = "processed"
	FailedDir    = "failed"
	OutboxDir    = "outbox"
)

// ErrorSuffix is appended to a file's name for the file beside it that says
// why it failed.
const ErrorSuffix = ".error"

// maxNameLen bounds a file name the Sender writes (before the extension).
const maxNameLen = 64

// Options configures a Folder. The zero value (or nil) means defaults.
type Options struct {
	// Logger receives a line per file taken, moved or refused; nil
	// discards. Envelope text is never logged.
	Logger *slog.Logger
	// Settle is how long a complete file must stay unchanged (size and
	// modification time) before it is read; DefaultSettle when zero.
	Settle time.Duration
	// Rescan is the interval of the full directory scan that catches
	// files present at start and events the kernel dropped;
	// DefaultRescan when zero.
	Rescan time.Duration
	// Timeout is how long an incomplete file may stay unchanged before
	// it is moved to failed/; DefaultTimeout when zero.
	Timeout time.Duration
	// Outbox is the directory Send writes to, one subdirectory per
	// receiver; DIR/outbox when empty.
	Outbox string
}

// Folder is a watched directory: a transports.Receiver for the files
// dropped into it and a transports.Sender writing to its outbox. Its
// methods are safe for concurrent use, but only one Receive may run at a
// time.
type Folder struct {
	dir     string
	outbox  string
	inside  bool // the outbox is an entry of DIR, where others drop files
	log     *slog.Logger
	settle  time.Duration
	rescan  time.Duration
	timeout time.Duration

	mu        sync.Mutex
	receiving bool

	noNotify bool         // tests: run on rescans alone, as without inotify
	looks    atomic.Int64 // tests: how many times a pending file was looked at
}

var (
	_ transports.Receiver = (*Folder)(nil)
	_ transports.Sender   = (*Folder)(nil)
)

// New returns a Folder for dir. Nothing is touched until Receive or Send.
func New(dir string, opts *Options) *Folder {
	if opts == nil {
		opts = &Options{}
	}
	f := &Folder{
		dir:     filepath.Clean(dir),
		outbox:  opts.Outbox,
		log:     opts.Logger,
		settle:  opts.Settle,
		rescan:  opts.Rescan,
		timeout: opts.Timeout,
	}
	if f.outbox == "" {
		f.outbox = filepath.Join(f.dir, OutboxDir)
	}
	f.outbox = filepath.Clean(f.outbox)
	f.inside = filepath.Dir(f.outbox) == f.dir
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.settle <= 0 {
		f.settle = DefaultSettle
	}
	if f.rescan <= 0 {
		f.rescan = DefaultRescan
	}
	if f.timeout <= 0 {
		f.timeout = DefaultTimeout
	}
	return f
}

// Dir returns the watched directory.
func (f *Folder) Dir() string { return f.dir }

// ErrBusy is returned by Receive when another Receive runs on the same
// Folder.
var ErrBusy = errors.New("folder: Receive is already running on this folder")

// wanted reports whether a directory entry's name is one the Receiver
// considers: not hidden, ending in .crosstalk or .aict.
func wanted(name string) bool {
	if name == "" || name[0] == '.' {
		return false
	}
	l := strings.ToLower(name)
	return strings.HasSuffix(l, ".crosstalk") || strings.HasSuffix(l, ".aict")
}

// unsafeName says why a (wanted) file name is refused, or "" when it is
// fine. The name comes from a directory listing, so it holds no "/"; the
// rest guards the names this package derives from it, logs and other
// tools (issue 5: "file names with path separators").
func unsafeName(name string) string {
	switch {
	case !utf8.ValidString(name):
		return "the name is not valid UTF-8"
	case strings.ContainsAny(name, `/\`):
		return "the name contains a path separator"
	case strings.Contains(name, ".."):
		return `the name contains ".."`
	}
	for _, r := range name {
		if unicode.IsControl(r) || displayControl(r) {
			return fmt.Sprintf("the name contains a control character (%U)", r)
		}
	}
	return ""
}

// displayControl reports the format characters that change how a name
// is shown rather than adding to it: the Unicode line and paragraph
// separators (a line break in the .error file, a log, a terminal) and
// the bidirectional embeddings, overrides and isolates, which make
// "\u202egnp.crosstalk" show as "klatssorc.png" (Trojan Source,
// CVE-2021-42574). Marks such as U+200F, which right-to-left names use,
// are not among them.
func displayControl(r rune) bool {
	return r == '\u2028' || r == '\u2029' || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// SafeName turns s (a receiver address or a message id) into a file name
// that is safe in any directory: only ASCII letters, digits and "-_.@+="
// (others become "_"), dots only between other characters and never two
// in a row, at most 64 bytes, never empty for a
// non-empty s. When s had to be changed, a short hash of s is appended so
// that different inputs never share a name. SafeName("") is "".
func SafeName(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '@', c == '+', c == '=':
			b.WriteByte(c)
		case c == '.' && b.Len() > 0 && i < len(s)-1 && s[i-1] != '.':
			// Dots only inside: no hidden names, no "..", no trailing
			// dot (Windows drops it; "x." + ".crosstalk" holds "..").
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	out := b.String()
	if reservedName(out) {
		changed = true
	}
	if !changed && len(out) <= maxNameLen {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(out) > maxNameLen-len(suffix) {
		out = out[:maxNameLen-len(suffix)]
	}
	return out + suffix
}

// reservedName reports names Windows cannot create (CON, NUL, COM1, …),
// with or without an extension.
func reservedName(s string) bool {
	base, _, _ := strings.Cut(strings.ToUpper(s), ".")
	switch base {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && base[3] >= '0' && base[3] <= '9' {
		return true
	}
	return false
}

// splitExt splits a wanted name into its stem and its extension
// (".crosstalk" or ".aict", as spelled).
func splitExt(name string) (stem, ext string) {
	l := strings.ToLower(name)
	for _, e := range []string{".crosstalk", ".aict"} {
		if strings.HasSuffix(l, e) {
			return name[:len(name)-len(e)], name[len(name)-len(e):]
		}
	}
	ext = filepath.Ext(name)
	return strings.TrimSuffix(name, ext), ext
}
