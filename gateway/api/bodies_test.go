package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// TestBodiesInFlight: a caller that declares request bodies and sends
// them slowly holds at most four intake bounds of the relay's memory at
// once, and at least twice the JSON bound (4 MiB, here with max_body 1
// KiB): the next body is refused at once with 429 E-RATE, another caller
// is not affected, and a body the caller gives up frees its share. A body
// sent without a declared length is counted as it arrives.
func TestBodiesInFlight(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	relay := gateway.New(st, &gateway.Options{Book: testBook(t), MaxIntake: 1024})
	a := api.New(relay, &api.Options{Tokens: map[string]string{"tok-claude": "claude", "tok-gemini": "gemini"}})
	srv := httptest.NewServer(a)
	t.Cleanup(func() { a.Close(); srv.Close() })
	addr := srv.Listener.Addr().String()

	// hold sends a request's headers declaring a 1 MiB body (over the
	// intake's bound, which only its first 1025 bytes would show), and
	// 10 bytes of it.
	hold := func(token string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /crosstalk/receive HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n0123456789", addr, token, 1<<20)
		return c
	}
	post := func(token, body string, chunked bool) (int, string) {
		t.Helper()
		rd := strings.NewReader(body)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/crosstalk/receive", rd)
		if chunked {
			req.ContentLength = -1
			req.Body = io.NopCloser(rd)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b := new(strings.Builder)
		bufio.NewReader(res.Body).WriteTo(b)
		return res.StatusCode, b.String()
	}
	text := env("CLAUDE", "CHATGPT", "REQUEST", "bodies", "hi")
	held := []net.Conn{hold("tok-claude"), hold("tok-claude"), hold("tok-claude")}
	// Three held, one more fits.
	waitFor(t, func() bool { code, _ := post("tok-claude", text, false); return code == http.StatusOK })
	held = append(held, hold("tok-claude"))
	var code int
	var body string
	waitFor(t, func() bool { code, body = post("tok-claude", text, false); return code != http.StatusOK })
	if code != http.StatusTooManyRequests || !strings.Contains(body, "E-RATE") || !strings.Contains(body, "request bodies in flight") {
		t.Fatalf("a fifth body of claude's = %d\n%s\nwant 429 E-RATE", code, body)
	}
	if code, body := post("tok-gemini", env("GEMINI", "CHATGPT", "REQUEST", "bodies", "hi"), false); code != http.StatusOK {
		t.Fatalf("gemini's body while claude holds its bound = %d\n%s", code, body)
	}
	if code, body := post("tok-claude", text, true); code != http.StatusTooManyRequests || !strings.Contains(body, "E-RATE") || !strings.Contains(body, "for this caller") {
		t.Errorf("claude's body of undeclared length at its bound = %d\n%s\nwant 429 E-RATE", code, body)
	}
	// Giving up a held body frees its share.
	held[0].Close()
	waitFor(t, func() bool { code, _ := post("tok-claude", text, false); return code == http.StatusOK })
	if code, body := post("tok-claude", text, true); code != http.StatusOK {
		t.Errorf("claude's body of undeclared length after one freed = %d\n%s", code, body)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in 10 s")
}
