package metrics

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Kinds of long-lived connections in crosstalk_streams_open.
const (
	StreamSSE       = "sse"
	StreamWebSocket = "websocket"
)

// Middleware returns next with its responses counted by status
// (crosstalk_http_responses_total: the gate's 401, 403 and 429 refusals
// happen before any envelope is read) and its long-lived ones counted while
// open: a response that starts an event stream (Content-Type
// text/event-stream) is an open "sse" stream, one that switches protocols
// (101) an open "websocket", until its handler returns. The ResponseWriter
// it hands on still flushes and hijacks.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &streamWriter{ResponseWriter: w, m: m}
		defer sw.close()
		next.ServeHTTP(sw, r)
	})
}

// streamWriter watches the status and content type of one response.
type streamWriter struct {
	http.ResponseWriter
	m       *Metrics
	started bool // WriteHeader seen
	status  int
	kind    string // "" until the response turns out to be a stream
}

func (w *streamWriter) WriteHeader(code int) {
	if !w.started {
		w.started, w.status = true, code
		switch {
		case code == http.StatusSwitchingProtocols:
			w.open(StreamWebSocket)
		case code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
			w.open(StreamSSE)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *streamWriter) open(kind string) {
	w.kind = kind
	w.m.streamsOpen.WithLabelValues(kind).Inc()
	w.m.streamsTotal.WithLabelValues(kind).Inc()
}

func (w *streamWriter) close() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.m.responses.WithLabelValues(strconv.Itoa(w.status)).Inc()
	if w.kind != "" {
		w.m.streamsOpen.WithLabelValues(w.kind).Dec()
	}
}

// Flush implements http.Flusher, which event streams need.
func (w *streamWriter) Flush() {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker, which WebSocket handshakes need.
func (w *streamWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("metrics: the response cannot be hijacked")
	}
	return h.Hijack()
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
