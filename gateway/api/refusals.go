package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Bounds of the gate's refusal log (docs/security.md, "What is logged").
const (
	// refusalLinesPerSecond is how many refusals of one reason are logged
	// per second; the rest are counted and reported in one line.
	refusalLinesPerSecond = 5
	// maxLoggedPath is how many bytes of a refused request's path are
	// logged.
	maxLoggedPath = 200
)

// refusalLog logs the gate's refusals at WARN, at most
// refusalLinesPerSecond per reason in each one-second window; the
// refusals over it are counted, and the first refusal of that reason in a
// later window (or Close) logs "gate refusals suppressed" with the count.
// A flood of refused requests therefore yields a bounded number of lines.
type refusalLog struct {
	log *slog.Logger
	now func() time.Time // time.Now; tests replace it

	mu      sync.Mutex
	reasons map[string]*refusalWindow
}

type refusalWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

// refused logs one refusal of r by the gate, unless its reason's budget
// for the current second is spent. It never logs a header or a body.
func (l *refusalLog) refused(r *http.Request, reason string, status int, code envelope.Code) {
	now := l.now()
	l.mu.Lock()
	w := l.reasons[reason]
	if w == nil {
		w = &refusalWindow{start: now}
		l.reasons[reason] = w
	}
	var suppressed int
	if now.Sub(w.start) >= time.Second {
		suppressed = w.suppressed
		*w = refusalWindow{start: now}
	}
	log := w.logged < refusalLinesPerSecond
	if log {
		w.logged++
	} else {
		w.suppressed++
	}
	l.mu.Unlock()
	ctx := context.Background()
	if suppressed > 0 {
		l.log.LogAttrs(ctx, slog.LevelWarn, "gate refusals suppressed", slog.String("reason", reason), slog.Int("count", suppressed))
	}
	if log {
		l.log.LogAttrs(ctx, slog.LevelWarn, "request refused", slog.String("reason", reason),
			slog.String("remote", r.RemoteAddr), slog.String("method", loggedText(r.Method, 16)),
			slog.String("path", loggedText(r.URL.EscapedPath(), maxLoggedPath)),
			slog.Int("status", status), slog.String("code", string(code)))
	}
}

// flush logs the refusals still counted as suppressed.
func (l *refusalLog) flush() {
	l.mu.Lock()
	counts := map[string]int{}
	for reason, w := range l.reasons {
		if w.suppressed > 0 {
			counts[reason] = w.suppressed
			w.suppressed = 0
		}
	}
	l.mu.Unlock()
	for reason, n := range counts {
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "gate refusals suppressed", slog.String("reason", reason), slog.Int("count", n))
	}
}

// loggedText returns attacker-supplied text fit for a log line: at most
// max bytes (cut on a character boundary, marked with …) with every
// control, bidi or invisible character written visibly.
func loggedText(s string, max int) string {
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return envelope.ShowInvisible(s)
}
