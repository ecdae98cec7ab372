package limits

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// TestOversizePost posts more envelopes than one request may hold — the
// attack of issue 12, as many envelopes as fit in one 7.5 MB body (about
// 40 000) — and one over a
// configured bound: each is refused whole with 413 E-TOO-LARGE and
// nothing at all is recorded; a request at the bound is recorded whole.
func TestOversizePost(t *testing.T) {
	tests := []struct {
		name   string
		max    int // gateway.Options.MaxEnvelopes; 0 for the default
		n      int // -1: as many as fit in 7.5 MB
		status int
		code   string
	}{
		{"the attack, default bound", 0, -1, http.StatusRequestEntityTooLarge, "E-TOO-LARGE"},
		{"one over the default bound", 0, gateway.DefaultMaxEnvelopes + 1, http.StatusRequestEntityTooLarge, "E-TOO-LARGE"},
		{"one over a configured bound", 5, 6, http.StatusRequestEntityTooLarge, "E-TOO-LARGE"},
		{"at a configured bound", 5, 5, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := start(t, config{relay: gateway.Options{MaxEnvelopes: tt.max}})
			if tt.n < 0 {
				tt.n = 7_500_000 / len(envelopes(t, 1, nil))
			}
			body := envelopes(t, tt.n, nil)
			if len(body) > gateway.MaxIntake {
				t.Fatalf("test body is %d bytes, over MaxIntake: it would test the byte bound", len(body))
			}
			status, code := r.post("chatgpt", body)
			if status != tt.status || code != tt.code {
				t.Errorf("POST of %d envelopes (%d bytes) = %d %q, want %d %q", tt.n, len(body), status, code, tt.status, tt.code)
			}
			want := 0
			if tt.status == http.StatusOK {
				want = tt.n
			}
			if got := r.count(); got != want {
				t.Errorf("after a POST of %d envelopes the ledger holds %d events, want %d", tt.n, got, want)
			}
		})
	}
}

// rawConn dials the relay and sends the start of a request by hand.
func rawConn(t *testing.T, r *relay, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatalf("writing the request head: %v", err)
	}
	return c
}

// trickle writes one byte of s at a time, with a pause, until the relay
// closes the connection or s ends.
func trickle(c net.Conn, s string) {
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closedByRelay reads what the relay answers until it closes the
// connection; it fails the test if the connection is still open after
// waitLimit (the old relay held it forever).
func closedByRelay(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitLimit))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the relay still holds the connection after %v (read %q)", waitLimit, b)
	}
	return string(b)
}

// TestSlowClient sends a request body, and request headers, one byte at a
// time (slowloris): the relay closes the connection at its read deadline
// instead of holding it, and records nothing. The deadlines are
// configured short; the test asserts the close, not its timing.
func TestSlowClient(t *testing.T) {
	r := start(t, config{timeouts: api.Timeouts{ReadHeader: 200 * time.Millisecond, Read: 400 * time.Millisecond}})
	body := envelopes(t, 1, nil)
	t.Run("body", func(t *testing.T) {
		c := rawConn(t, r, fmt.Sprintf("POST /crosstalk/receive HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
			r.addr, tokens["chatgpt"], len(body)+10_000))
		go trickle(c, body+strings.Repeat("x", 10_000))
		answer := closedByRelay(t, c)
		if strings.HasPrefix(answer, "HTTP/1.1 200") {
			t.Errorf("slow body answered %q, want an error or a plain close", firstLine(answer))
		}
	})
	t.Run("headers", func(t *testing.T) {
		c := rawConn(t, r, "POST /crosstalk/receive HTTP/1.1\r\n")
		go trickle(c, fmt.Sprintf("Host: %s\r\nAuthorization: Bearer %s\r\nX-Padding: %s\r\n\r\n", r.addr, tokens["chatgpt"], strings.Repeat("p", 10_000)))
		closedByRelay(t, c)
	})
	if n := r.count(); n != 0 {
		t.Errorf("the ledger holds %d events after slow requests, want 0", n)
	}
	// The relay still serves a normal client.
	if status, code := r.post("chatgpt", body); status != http.StatusOK {
		t.Errorf("POST after the slow clients = %d %s, want 200", status, code)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestStreamLongerThanReadDeadline keeps an agent stream open past the
// read deadline and receives a live delivery on it: lifting the deadline
// for streams is what makes a short read_timeout safe.
func TestStreamLongerThanReadDeadline(t *testing.T) {
	r := start(t, config{timeouts: api.Timeouts{ReadHeader: 100 * time.Millisecond, Read: 200 * time.Millisecond}})
	s, status, _ := r.open("claude", "/v1/agents/claude/stream")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/agents/claude/stream = %d, want 200", status)
	}
	// Wait out several read deadlines (the condition is time itself),
	// then send.
	time.Sleep(time.Second)
	if status, code := r.post("chatgpt", envelopes(t, 1, nil)); status != http.StatusOK {
		t.Fatalf("POST = %d %s, want 200", status, code)
	}
	if ev := s.next(t); ev.name != "delivery" {
		t.Errorf("stream event = %+v, want a delivery", ev)
	}
}
