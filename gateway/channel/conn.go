package channel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coder/websocket"
)

// Conn carries whole JSON-RPC messages. Read and Write may be called from
// different goroutines, but each by one at a time.
type Conn interface {
	// Read returns the next message. A message over the size limit is a
	// *TooLargeError; the connection stays usable.
	Read(ctx context.Context) ([]byte, error)
	// Write sends one message.
	Write(ctx context.Context, msg []byte) error
	// Close ends the connection, telling the peer why where it can.
	Close(reason string) error
}

// TooLargeError is a message over the connection's size limit.
type TooLargeError struct {
	Size, Limit int
}

// Error says how large the message was and what the limit is.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("channel: message of at least %d bytes exceeds the limit of %d", e.Size, e.Limit)
}

var _ error = (*TooLargeError)(nil)

// streamConn is newline-delimited JSON on a byte stream (stdio).
type streamConn struct {
	r     *bufio.Reader
	w     io.Writer
	c     io.Closer
	limit int
	// wsem is held by the write under way, which may outlive the Write
	// that started it: a write to a pipe nobody reads cannot be
	// interrupted.
	wsem chan struct{}
}

// NewStreamConn returns a Conn of newline-delimited JSON messages over r
// and w (the MCP stdio framing), with messages of at most limit bytes.
// Close closes c when it is not nil.
func NewStreamConn(r io.Reader, w io.Writer, c io.Closer, limit int) Conn {
	if limit <= 0 {
		limit = DefaultMaxMessage
	}
	return &streamConn{r: bufio.NewReaderSize(r, 64<<10), w: w, c: c, limit: limit, wsem: make(chan struct{}, 1)}
}

func (s *streamConn) Read(_ context.Context) ([]byte, error) {
	for {
		var line []byte
		size, over, eof := 0, false, false
		for {
			chunk, err := s.r.ReadSlice('\n')
			size += len(chunk)
			if size > s.limit+1 {
				over, line = true, nil
			} else if !over {
				line = append(line, chunk...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, fmt.Errorf("channel: reading: %w", err)
			}
			break
		}
		switch {
		case over:
			return nil, &TooLargeError{Size: size, Limit: s.limit}
		case len(trimSpace(line)) > 0:
			return line, nil
		case eof:
			return nil, io.EOF
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// Write writes msg and a newline, or gives up when ctx ends: a harness
// that stops reading its standard input must not hold the session (its
// heartbeat, its shutdown) in a write for ever. The write given up goes on
// in the background, and the next Write waits for it, or for its own ctx.
func (s *streamConn) Write(ctx context.Context, msg []byte) error {
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("channel: writing: %w", ctx.Err())
	}
	done := make(chan error, 1)
	line := append(append([]byte(nil), msg...), '\n')
	go func() {
		_, err := s.w.Write(line)
		<-s.wsem
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("channel: writing: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("channel: writing: %w", ctx.Err())
	}
}

func (s *streamConn) Close(string) error {
	if s.c != nil {
		return s.c.Close()
	}
	return nil
}

// wsConn is one JSON-RPC message per WebSocket text message.
type wsConn struct {
	c     *websocket.Conn
	limit int
}

// NewWebSocketConn returns a Conn over an accepted or dialed WebSocket.
// Messages over limit get a *TooLargeError; messages over four times the
// limit close the connection (status 1009, message too big).
func NewWebSocketConn(c *websocket.Conn, limit int) Conn {
	if limit <= 0 {
		limit = DefaultMaxMessage
	}
	c.SetReadLimit(int64(limit) * 4)
	return &wsConn{c: c, limit: limit}
}

func (w *wsConn) Read(ctx context.Context) ([]byte, error) {
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	if len(b) > w.limit {
		return nil, &TooLargeError{Size: len(b), Limit: w.limit}
	}
	if typ != websocket.MessageText {
		return b, errBinary
	}
	return b, nil
}

var errBinary = errors.New("channel: binary WebSocket message; JSON-RPC messages are text")

func (w *wsConn) Write(ctx context.Context, msg []byte) error {
	return w.c.Write(ctx, websocket.MessageText, msg)
}

func (w *wsConn) Close(reason string) error {
	if len(reason) > 120 {
		// A close frame holds at most 123 bytes of reason, in UTF-8.
		reason = strings.ToValidUTF8(reason[:120], "")
	}
	return w.c.Close(websocket.StatusNormalClosure, reason)
}
