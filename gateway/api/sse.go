package api

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// SSE writes Server-Sent Events on a response: the API's streams and the
// web inbox's live pages share it.
type SSE struct {
	w  http.ResponseWriter
	f  http.Flusher
	rc *http.ResponseController
}

// StartSSE writes the event-stream headers and a first comment, and
// returns the writer. When the response cannot stream it answers 500 and
// returns false.
func StartSSE(w http.ResponseWriter) (*SSE, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, "streaming unsupported")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	f.Flush()
	return &SSE{w: w, f: f, rc: http.NewResponseController(w)}, true
}

// deadline bounds the next write: a client that stops reading loses its
// stream instead of holding it (and its slot) forever. Connections that
// take no deadlines keep none.
func (s *SSE) deadline() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
}

// Event writes one event with data, which must not contain a line break
// (JSON does not), and flushes it. An empty id writes no id line.
func (s *SSE) Event(id, name string, data []byte) error {
	s.deadline()
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// JSON writes one event whose data is v as JSON.
func (s *SSE) JSON(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Event(id, name, b)
}

// Comment writes a comment line (a heartbeat) and flushes it.
func (s *SSE) Comment(text string) error {
	s.deadline()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Next is one element of a sequence handed over a channel by Forward.
type Next[T any] struct {
	V   T
	Err error
}

// Forward sends the elements of seq to out until seq ends, yields an
// error (sent, then Forward returns) or ctx ends. It does not close out, so
// several sequences can share one channel. Streams use it to wait for the
// next element and a heartbeat tick at once.
func Forward[T any](ctx context.Context, seq iter.Seq2[T, error], out chan<- Next[T]) {
	for v, err := range seq {
		select {
		case out <- Next[T]{v, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}
