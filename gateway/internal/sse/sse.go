// Package sse writes Server-Sent Events (the WHATWG EventSource format):
// the API's streams (gateway/api) and the web inbox's live pages
// (gateway/web) share it. It does not decide what is streamed, nor bound
// how many streams are open (api.Server.OpenStream does).
package sse

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// Writer writes Server-Sent Events on a response.
type Writer struct {
	w  http.ResponseWriter
	f  http.Flusher
	rc *http.ResponseController
	// held: Pump flushes, once what it has at hand is written.
	held bool
}

// WriteTimeout bounds writing one event: a reader that stops reading
// loses its stream instead of holding it (and its slot) forever.
const WriteTimeout = time.Minute

// Start writes the event-stream headers and a first comment, and returns
// the writer. When the response cannot stream it answers 500 with the
// API's JSON error and returns false.
func Start(w http.ResponseWriter) (*Writer, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"streaming unsupported"}}`+"\n", gateway.CodeInternal)
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	f.Flush()
	return &Writer{w: w, f: f, rc: http.NewResponseController(w)}, true
}

// deadline bounds the next write: a client that stops reading loses its
// stream instead of holding it (and its slot) forever. Connections that
// take no deadlines keep none.
func (s *Writer) deadline() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
}

// Event writes one event with data, which must not contain a line break
// (JSON does not), and flushes it (within Pump, Pump flushes). An empty id
// writes no id line.
func (s *Writer) Event(id, name string, data []byte) error {
	s.deadline()
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	if !s.held {
		s.f.Flush()
	}
	return nil
}

// JSON writes one event whose data is v as JSON.
func (s *Writer) JSON(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Event(id, name, b)
}

// Comment writes a comment line (a heartbeat) and flushes it.
func (s *Writer) Comment(text string) error {
	s.deadline()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// pumpAhead is how many elements Pump reads ahead of its writes.
const pumpAhead = 32

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

// Pump writes the elements of seq, read in the background, with emit,
// and a heartbeat comment every beat (after calling onBeat, when not nil),
// until seq ends, emit or a write fails, or ctx ends. An error from seq is
// handed to fail, which writes the stream's error event; then Pump
// returns. The API's and the web inbox's streams run on it.
//
// The elements are read up to pumpAhead ahead of the writes, and the
// events emit writes are flushed when no further element is at hand: a
// stream that has several deliveries to send (a page of the ledger's
// tail, a catch-up) sends them in one write instead of one each, which
// the relay and its client both pay for in system calls.
func Pump[T any](ctx context.Context, w *Writer, beat time.Duration, seq iter.Seq2[T, error], emit func(T) error, fail func(error), onBeat func()) {
	ch := make(chan Next[T], pumpAhead)
	w.held = true
	defer func() { w.held = false }()
	go func() {
		defer close(ch)
		Forward(ctx, seq, ch)
	}()
	tick := time.NewTicker(beat)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				w.f.Flush()
				return
			}
			if it.Err != nil {
				fail(it.Err)
				w.f.Flush()
				return
			}
			if emit(it.V) != nil {
				return
			}
			if len(ch) == 0 {
				w.f.Flush()
			}
		case <-tick.C:
			if onBeat != nil {
				onBeat()
			}
			if w.Comment("heartbeat") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
