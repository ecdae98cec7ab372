package limits

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/web"
)

// tokens are the relay's bearer tokens, by principal.
var tokens = map[string]string{
	"claude":  "claude-token-0123456789",
	"chatgpt": "chatgpt-token-0123456789",
}

// waitLimit bounds every wait of these tests for a condition: reaching it
// means the relay hung, never that it was slow.
const waitLimit = 30 * time.Second

// config is what a test changes of the relay.
type config struct {
	relay    gateway.Options
	api      api.Options
	timeouts api.Timeouts
	// wrap, when set, wraps the ledger the relay uses.
	wrap func(ledger.Store) ledger.Store
}

// relay is a running relay: the stack cmd/crosstalk builds, with two
// token principals.
type relay struct {
	t     *testing.T
	url   string
	addr  string
	store ledger.Store
	relay *gateway.Relay
}

func start(t *testing.T, c config) *relay {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	var store ledger.Store = st
	if c.wrap != nil {
		store = c.wrap(st)
	}
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}},
	})
	if err != nil {
		t.Fatalf("NewAddressBook() = %v", err)
	}
	c.relay.Book = book
	rl := gateway.New(store, &c.relay)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	c.api.Tokens = map[string]string{}
	for p, tok := range tokens {
		c.api.Tokens[tok] = p
	}
	c.api.Hosts = []string{addr}
	if c.api.Heartbeat == 0 {
		c.api.Heartbeat = time.Hour // no comments between the events a test reads
	}
	a := api.New(rl, &c.api)
	a.MountAgents(nil)
	site, err := web.New(rl, a, nil)
	if err != nil {
		t.Fatalf("web.New() = %v", err)
	}
	hs := api.NewHTTPServer(site, c.timeouts, slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn))
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		hs.Shutdown(ctx)
		<-done
		st.Close()
	})
	return &relay{t: t, url: "http://" + addr, addr: addr, store: store, relay: rl}
}

// envelopes returns n envelopes from CHATGPT to CLAUDE, the i-th in
// group(i) (no context when group is nil).
func envelopes(t *testing.T, n int, group func(i int) string) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		env := envelope.New("CHATGPT", "CLAUDE", "REQUEST", "question "+strconv.Itoa(i))
		// Without the session line envelope.New writes, 50 000 envelopes
		// stay under MaxIntake, so the envelope bound is what refuses them.
		env.Session = ""
		if group != nil {
			env.Context = group(i)
		}
		text, err := envelope.Marshal(env)
		if err != nil {
			t.Fatalf("Marshal() = %v", err)
		}
		b.Write(text)
	}
	return b.String()
}

// post sends body to the envelope endpoint as principal and returns the
// status and the JSON error code, if any.
func (r *relay) post(principal, body string) (int, string) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodPost, r.url+"/crosstalk/receive", strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokens[principal])
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("POST /crosstalk/receive: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, errorCode(b)
}

// errorCode returns the code of a JSON error answer, "" for another.
func errorCode(b []byte) string {
	var e struct{ Error struct{ Code string } }
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// count returns how many events the ledger's conversation groups hold:
// the bookkeeping groups (gateway.SystemGroup, e.g. the liveness that an
// authenticated request renews) are not what a refused request must
// leave untouched.
func (r *relay) count() int {
	r.t.Helper()
	n := 0
	for after := int64(0); ; {
		page, err := r.store.Log(r.t.Context(), after, 1000)
		if err != nil {
			r.t.Fatalf("Log() = %v", err)
		}
		if len(page) == 0 {
			return n
		}
		for _, l := range page {
			if !gateway.SystemGroup(l.GroupID) {
				n++
			}
		}
		after = page[len(page)-1].Pos
	}
}

// stream is an open SSE response.
type stream struct {
	res    *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, name, data string }

// open starts GET path as principal with optional header pairs; it
// returns the response, and a stream when the status is 200 (after the
// relay's first comment).
func (r *relay) open(principal, path string, header ...string) (*stream, int, string) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokens[principal])
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		r.t.Fatalf("GET %s: %v", path, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		return nil, res.StatusCode, errorCode(b)
	}
	s := &stream{res: res, br: bufio.NewReader(res.Body), cancel: cancel}
	r.t.Cleanup(s.close)
	if line, err := s.br.ReadString('\n'); err != nil || line != ": connected\n" {
		r.t.Fatalf("GET %s: first line %q, %v; want the connected comment", path, line, err)
	}
	return s, res.StatusCode, ""
}

// next reads the next event, skipping comments.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// close ends the stream; calling it again is harmless.
func (s *stream) close() {
	s.cancel()
	s.res.Body.Close()
}

// eventually calls f until it reports true, failing the test after
// waitLimit.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
