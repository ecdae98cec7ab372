package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// stdioClient drives a server on a StreamTransport with raw lines.
type stdioClient struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func startStdio(t *testing.T, maxMessage int) *stdioClient {
	t.Helper()
	r := testrelay.Start(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	c.out.Buffer(nil, 4<<20)
	go func() {
		err := mcpserver.Run(ctx, mcpserver.Options{Agent: "claude", Backend: &c2a.Local{Relay: r.Relay}, Heartbeat: -1},
			&mcpserver.StreamTransport{Reader: inR, Writer: outW, MaxMessage: maxMessage})
		outW.CloseWithError(errors.New("server ended"))
		c.done <- err
	}()
	t.Cleanup(func() { inW.Close(); cancel(); outR.Close() })
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	if m := c.next(); string(m.ID) != `"init"` || m.Error != nil {
		t.Fatalf("initialize = %+v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	return c
}

func (c *stdioClient) send(s string) {
	c.t.Helper()
	go func() { io.WriteString(c.in, s) }() // a large line is read while written
}

type rawMsg struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// next returns the server's next message; the test fails when the server
// ends instead.
func (c *stdioClient) next() rawMsg {
	c.t.Helper()
	if !c.out.Scan() {
		c.t.Fatalf("the server ended: %v (%v)", c.out.Err(), <-c.done)
	}
	var m rawMsg
	if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
		c.t.Fatalf("server wrote %.200q: %v", c.out.Text(), err)
	}
	return m
}

// TestStdioHostileLines: `crosstalk mcp` answers every line that is not
// one JSON-RPC message with a JSON-RPC error of id null — it used to end
// the session at the first one (the SDK's stdio transport) — and goes on
// serving: the ping after it is answered.
func TestStdioHostileLines(t *testing.T) {
	const limit = 1 << 20
	bigID := strings.Repeat("i", limit/2)
	tests := []struct {
		name, line string
		code       int    // 0: the line is a ping answered with id
		want       string // reason, or the id of the answer
	}{
		{"not JSON", "not json", -32700, "not JSON"},
		{"half an object", `{"jsonrpc":"2.0","id":1,`, -32700, "not JSON"},
		{"invalid UTF-8 outside a string", "{\xff}", -32700, "not JSON"},
		{"an empty batch", "[]", -32600, "batch"},
		{"a batch of 10 000 requests", "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 9999) + `{"jsonrpc":"2.0","id":2,"method":"ping"}]`, -32600, "batch"},
		{"nested 10 001 levels", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "}", -32700, "max depth"},
		{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "invalid ID"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600, "version"},
		{"a string", `"ping"`, -32600, "JSON-RPC"},
		{"a line over the limit", `{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"` + strings.Repeat("a", 4*limit) + `"}}`, -32600, "exceeds the limit"},
		{"2 MB of NUL bytes", strings.Repeat("\x00", 2*limit), -32600, "exceeds the limit"},
		{"an id of half a MB", `{"jsonrpc":"2.0","id":"` + bigID + `","method":"ping"}`, 0, `"` + bigID + `"`},
		{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}", 0, `"u"`},
		{"a null id (a notification: no answer)", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 0, ""},
		{"an unknown method", `{"jsonrpc":"2.0","id":"m","method":"chat/fly"}`, -32601, "method not found"},
	}
	c := startStdio(t, limit)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			c.send(tc.line + "\n" + `{"jsonrpc":"2.0","id":"after","method":"ping"}` + "\n")
			// The SDK answers requests concurrently: the answer to the
			// line and the ping's come in either order.
			answered := tc.code != 0 || tc.want != ""
			var got []rawMsg
			for seenAfter := false; !seenAfter || answered && len(got) == 0; {
				switch m := c.next(); {
				case string(m.ID) == `"after"`:
					seenAfter = true
					if m.Error != nil {
						t.Errorf("ping after %.60q = %+v, want its result", tc.line, m.Error)
					}
				case !answered || len(got) > 0:
					t.Fatalf("%.60q: unexpected answer id %.60s error %+v", tc.line, m.ID, m.Error)
				default:
					got = append(got, m)
				}
			}
			switch {
			case tc.code != 0:
				wantID := "null"
				if tc.code == -32601 {
					wantID = `"m"`
				}
				if m := got[0]; string(m.ID) != wantID || m.Error == nil || m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.want) {
					t.Errorf("%.60q = id %.60s error %+v, want id %s, %d saying %q", tc.line, m.ID, m.Error, wantID, tc.code, tc.want)
				}
			case tc.want != "":
				if m := got[0]; string(m.ID) != tc.want || m.Error != nil {
					t.Errorf("%.60q = id %.60s error %+v, want the answer", tc.line, m.ID, m.Error)
				}
			}
		})
	}
	// A message written a byte at a time is one message.
	c.t = t
	go func() {
		for _, b := range []byte(`{"jsonrpc":"2.0","id":"slow","method":"ping"}` + "\n") {
			c.in.Write([]byte{b})
		}
	}()
	if m := c.next(); string(m.ID) != `"slow"` || m.Error != nil {
		t.Errorf("a ping written a byte at a time = %+v, want its result", m)
	}
}

// TestStdioClientThatNeverReads: a client that writes requests and reads
// no answer ends its session once a write has waited WriteTimeout: the
// SDK queues what it reads and answers each request in a goroutine of its
// own, so the server used to hold every request such a client sent, for
// ever.
func TestStdioClientThatNeverReads(t *testing.T) {
	r := testrelay.Start(t, nil)
	inR, inW := io.Pipe()
	_, outW := io.Pipe() // never read
	t.Cleanup(func() { inW.Close() })
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(t.Context(), mcpserver.Options{Agent: "claude", Backend: &c2a.Local{Relay: r.Relay}, Heartbeat: -1},
			&mcpserver.StreamTransport{Reader: inR, Writer: outW, WriteTimeout: 50 * time.Millisecond})
	}()
	go func() {
		io.WriteString(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
		for i := 0; ; i++ {
			if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"ping"}`+"\n"); err != nil {
				return // the server stopped reading
			}
		}
	}()
	<-done // the session ended
}
