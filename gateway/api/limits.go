package api

import (
	"context"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Defaults of the stream bounds in Options (docs/configuration.md).
const (
	// DefaultStreamLimit is the default of Options.StreamLimit.
	DefaultStreamLimit = 32
	// DefaultMaxStreams is the default of Options.MaxStreams.
	DefaultMaxStreams = 256
)

// streamSlots counts the open long-lived responses (SSE streams, the
// WebSocket channel) per caller and in total.
type streamSlots struct {
	mu       sync.Mutex
	per      map[string]int
	total    int
	perMax   int
	totalMax int
}

// acquire takes a slot for key; it reports false, taking nothing, when key
// or the relay is at its bound.
func (l *streamSlots) acquire(key string) (release func(), why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.per[key] >= l.perMax:
		return nil, "too many open streams for " + key
	case l.total >= l.totalMax:
		return nil, "too many open streams on the relay"
	}
	l.per[key]++
	l.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.per[key]--; l.per[key] <= 0 {
				delete(l.per, key)
			}
		})
	}, ""
}

// openStream starts a long-lived response for a request that passed the
// gate: it takes one of the caller's stream slots (else answers 429 E-RATE
// and returns false) and lifts the request's read deadline (the
// connection's body deadline must not end a stream). The context ends when
// the request ends or Close is called; done must be called.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (ctx context.Context, done func(), ok bool) {
	info, _ := r.Context().Value(principalKey).(authInfo)
	release, why := s.slots.acquire(info.key)
	if release == nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, string(envelope.CodeRate), why)
		return nil, nil, false
	}
	// Errors mean the connection takes no deadlines (a test recorder):
	// there is none to lift.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.streams, cancel)
	if l := loginOf(r, info); l.token != "" {
		go s.watchLogin(ctx, cancel, l)
	}
	return ctx, func() {
		stop()
		cancel()
		release()
		// SSE writes set write deadlines; a kept-alive connection's
		// next response must not inherit the last one.
		_ = rc.SetWriteDeadline(time.Time{})
	}, true
}

// login is the token a request was authenticated with and its principal.
type login struct{ principal, token string }

type loginKey struct{}

// WithLogin returns r marked as logged in with token as principal: a page
// request authenticated by a session of the pages' login form. The
// streams it opens (OpenStream) then end when the token is revoked, as
// those opened with the token in an Authorization header do.
func WithLogin(r *http.Request, principal, token string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), loginKey{}, login{principal: principal, token: token}))
}

// loginOf returns the token a request was authenticated with: its bearer
// token, or the login of WithLogin; none for the local user.
func loginOf(r *http.Request, info authInfo) login {
	if info.token {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return login{principal: info.principal, token: tok}
	}
	l, _ := r.Context().Value(loginKey{}).(login)
	return l
}

// watchLogin ends a stream (cancel) once the token it was opened with no
// longer names its principal — revoked (crosstalk token revoke) or its
// file gone — checking every heartbeat, until ctx ends.
func (s *Server) watchLogin(ctx context.Context, cancel context.CancelFunc, l login) {
	t := time.NewTicker(s.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if p, ok := s.TokenPrincipal(l.token); !ok || p != l.principal {
				s.log.Info("stream ended: its token was revoked", "principal", l.principal)
				cancel()
				return
			}
		}
	}
}

// OpenStream starts a long-lived page response (a Server-Sent-Events
// stream) as the API's own streams start: it counts against the caller's
// StreamLimit and the relay's MaxStreams (over them it answers 429 E-RATE
// and returns false), and its context ends when the request ends or when
// Close is called on the Server that served it, so that
// http.Server.Shutdown is not held up by open streams. done must be
// called.
func OpenStream(w http.ResponseWriter, r *http.Request) (ctx context.Context, done func(), ok bool) {
	if s, ok := r.Context().Value(pageServerKey{}).(*Server); ok {
		return s.openStream(w, r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	return ctx, cancel, true
}

// Timeouts are the connection deadlines of the relay's HTTP server
// (docs/configuration.md); zero fields take the defaults.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body; streams
	// lift it once they start.
	Read time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection.
	Idle time.Duration
}

// Defaults of Timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// NewHTTPServer returns the http.Server that serves handler with the
// relay's connection bounds: t's deadlines (a client that sends its
// headers or body too slowly is disconnected) and 64 KiB of headers.
// Streams opened through the API lift the read deadline for themselves.
// Each connection keeps the tokens that passed on it, which go on past
// the bounds on token guesses (Server.LoginToken).
func NewHTTPServer(handler http.Handler, t Timeouts, errorLog *log.Logger) *http.Server {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Read <= 0 {
		t.Read = DefaultReadTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(t.ReadHeader, t.Read),
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
		ConnContext:       withConnTokens,
	}
}
