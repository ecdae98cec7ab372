package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/gateway/channel"
)

// DefaultMaxMessage bounds one incoming JSON-RPC message of a
// StreamTransport: twice MaxText, room for an envelope.parse text of
// MaxText bytes with its JSON escapes.
const DefaultMaxMessage = 2 * MaxText

// StreamTransport is the MCP stdio transport (newline-delimited JSON-RPC
// 2.0) over Reader and Writer, for `crosstalk mcp`. Unlike the SDK's
// stdio transports, which end the session at the first line that is not
// one JSON-RPC message, it answers such a line with a JSON-RPC error (id
// null) and goes on reading: -32700 for a line that is not JSON, -32600
// for a batch (JSON array; MCP since 2025-06-18 has none), for JSON that is
// not one JSON-RPC 2.0 message (a wrong "jsonrpc", an id that is neither
// a string nor a number), and for a line over MaxMessage bytes, which is
// skipped without being held in memory.
type StreamTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxMessage bounds one incoming line; DefaultMaxMessage when 0.
	MaxMessage int
	// WriteTimeout bounds the write of one message; DefaultWriteTimeout
	// when 0. A write that does not finish in time (a client that stopped
	// reading) ends the session: the SDK answers requests concurrently and
	// queues those it reads, so a client that writes requests and reads no
	// answer would otherwise make the server hold more of them for ever.
	WriteTimeout time.Duration
}

// DefaultWriteTimeout is a StreamTransport's WriteTimeout when 0.
const DefaultWriteTimeout = 30 * time.Second

var _ mcp.Transport = (*StreamTransport)(nil)

// Connect starts reading t.Reader.
func (t *StreamTransport) Connect(context.Context) (mcp.Connection, error) {
	if t.Reader == nil || t.Writer == nil {
		return nil, errors.New("mcpserver: StreamTransport needs Reader and Writer")
	}
	limit := t.MaxMessage
	if limit <= 0 {
		limit = DefaultMaxMessage
	}
	wt := t.WriteTimeout
	if wt <= 0 {
		wt = DefaultWriteTimeout
	}
	c := &streamConn{conn: channel.NewStreamConn(t.Reader, t.Writer, nil, limit), lines: make(chan line), closed: make(chan struct{}),
		writeTimeout: wt}
	go c.readLoop()
	return c, nil
}

type line struct {
	b   []byte
	err error
}

type streamConn struct {
	conn   channel.Conn
	lines  chan line
	closed chan struct{}
	once   sync.Once

	writeTimeout time.Duration
}

// readLoop hands over the lines, one at a time, until the input ends or
// the connection is closed. A read of the input cannot be interrupted: it
// ends with the input.
func (c *streamConn) readLoop() {
	for {
		b, err := c.conn.Read(context.Background())
		select {
		case c.lines <- line{b, err}:
		case <-c.closed:
			return
		}
		var tl *channel.TooLargeError
		if err != nil && !errors.As(err, &tl) {
			return
		}
	}
}

// Read returns the next JSON-RPC message, answering every line that is
// none with an error.
func (c *streamConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var l line
		select {
		case l = <-c.lines:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
		var tl *channel.TooLargeError
		switch {
		case errors.As(l.err, &tl):
			if err := c.refuse(ctx, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message of at least %d bytes exceeds the limit of %d bytes", tl.Size, tl.Limit)); err != nil {
				return nil, err
			}
			continue
		case l.err != nil:
			return nil, l.err
		}
		msg, code, reason := decode(l.b)
		if msg != nil {
			return msg, nil
		}
		if err := c.refuse(ctx, code, reason); err != nil {
			return nil, err
		}
	}
}

// decode returns the message of one line, or the JSON-RPC error code and
// reason it is refused with.
func decode(b []byte) (jsonrpc.Message, int64, string) {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, jsonrpc.CodeParseError, fmt.Sprintf("not JSON: %v", err)
	}
	for _, ch := range b {
		if ch == '[' {
			return nil, jsonrpc.CodeInvalidRequest, "a batch (JSON array) is not taken: send one JSON-RPC message object at a time"
		}
		if ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n' {
			break
		}
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("not one JSON-RPC 2.0 message: %v", err)
	}
	return msg, 0, ""
}

// refuse writes a JSON-RPC error with a null id: the line it answers had
// no id the server could read.
func (c *streamConn) refuse(ctx context.Context, code int64, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, c.writeTimeout)
	defer cancel()
	b, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *string        `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, &jsonrpc.Error{Code: code, Message: reason}})
	if err != nil {
		return fmt.Errorf("mcpserver: encoding: %w", err)
	}
	return c.conn.Write(ctx, b)
}

// Write sends one message on one line.
func (c *streamConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpserver: encoding: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.writeTimeout)
	defer cancel()
	if err := c.conn.Write(wctx, b); err != nil {
		if ctx.Err() == nil { // not the caller giving up: the client reads nothing
			c.Close()
		}
		return err
	}
	return nil
}

// Close stops handing over lines; a read of the input under way ends
// with the input.
func (c *streamConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// SessionID is empty: a stream carries one session.
func (c *streamConn) SessionID() string { return "" }
