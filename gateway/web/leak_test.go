package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAbandonedStreamsLeaveNothing opens the page and API streams a
// relay serves for a year — over many distinct groups — and abandons
// each one after its first line, as a browser tab closed or a client
// gone away does. Each must give back its stream slot (more are opened
// than one caller may hold at once) and its goroutines.
func TestAbandonedStreamsLeaveNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.ingest(envText(t, "CLAUDE", "CHATGPT", "REQUEST", "g0", "hello"))
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	settle := func() int {
		tr.CloseIdleConnections()
		return runtime.NumGoroutine()
	}
	before := settle()
	paths := []string{"/ui/groups/g%d/stream", "/ui/changes?v=%d", "/v1/groups/g%d/stream", "/v1/agents/claude/stream?x=%d", "/v1/agents/claude/stream?group=g%d"}
	const streams = 400
	for i := range streams {
		p := fmt.Sprintf(paths[i%len(paths)], i)
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+p, nil)
		res, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s = %v", p, err)
		}
		if res.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("stream %d: GET %s = %d (a slot of an abandoned stream was not given back?)", i, p, res.StatusCode)
		}
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, ":") {
			t.Fatalf("GET %s: first line %q, %v", p, line, err)
		}
		cancel()
		res.Body.Close()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n := settle()
		if n <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after %d abandoned streams, %d before:\n%s", n, streams, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
