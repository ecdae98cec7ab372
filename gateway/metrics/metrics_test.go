package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
	"github.com/crosstalk-go/crosstalk/transports"
)

// flakySender fails its first failures sends, then succeeds.
type flakySender struct {
	mu       sync.Mutex
	failures int
}

func (s *flakySender) Send(ctx context.Context, to, id string, text []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.failures--
		return errors.New("medium down")
	}
	return nil
}

type rig struct {
	url   string
	relay *gateway.Relay
}

// newRig starts a relay on a SQLite ledger with its API, metrics and
// outbound dispatcher wired as cmd/crosstalk wires them. Agents: claude
// (folder, failing once), chatgpt (mail), gemini (a2a, which this relay
// cannot send over: its deliveries fail).
func newRig(t *testing.T, tokens map[string]string) *rig {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "mail", Address: "gpt@example.test"},
		{ID: "gemini", Names: []string{"GEMINI"}, Transport: "a2a", Address: "https://gemini.example.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	relay := gateway.New(m.Store(st), &gateway.Options{Book: book, Observer: m})
	m.WatchRelay(relay)
	m.WatchSQLite(st)
	a := api.New(relay, &api.Options{Tokens: tokens})
	a.MountAgents(nil)
	a.Handle("GET /metrics", m.Handler())
	srv := httptest.NewServer(m.Middleware(a))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- relay.RunOutbound(ctx, &gateway.OutboundOptions{
			Senders:    map[string]transports.Sender{"folder": &flakySender{failures: 1}, "mail": &flakySender{}},
			MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		a.Close()
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunOutbound = %v", err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return &rig{url: srv.URL, relay: relay}
}

func text(from, to, intent, body string) string {
	e := envelope.New(from, to, intent, body)
	e.Context = "g"
	b, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (r *rig) post(t *testing.T, body string) int {
	t.Helper()
	resp, err := http.Post(r.url+"/crosstalk/receive", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scrape reads /metrics with token ("" for none) and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return resp.StatusCode, fams
}

// value returns the value of the sample of family name whose labels
// include labels (name, value pairs): a counter's or gauge's value, a
// histogram's sample count. A missing sample is 0.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// want is one expected sample.
type want struct {
	name   string
	labels []string
	value  float64
}

func (w want) String() string { return fmt.Sprintf("%s%v", w.name, w.labels) }

// waitFor scrapes until every expected sample has its value, and fails
// with the ones that do not when the test's deadline nears.
func waitFor(t *testing.T, url string, wants ...want) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Second).Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	for {
		_, fams := scrape(t, url, "")
		var bad []string
		for _, w := range wants {
			if got := value(fams, w.name, w.labels...); got != w.value {
				bad = append(bad, fmt.Sprintf("%v = %v, want %v", w, got, w.value))
			}
		}
		if len(bad) == 0 {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never reached their values:\n%s", strings.Join(bad, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCountersMove sends, rejects and delivers envelopes through a relay
// and checks that each moves its metrics, in the scraped text format.
func TestCountersMove(t *testing.T) {
	r := newRig(t, nil)
	fams := waitFor(t, r.url,
		want{"crosstalk_envelopes_received_total", []string{"outcome", "accepted"}, 0},
		want{"crosstalk_must_respond_open", []string{"agent", "chatgpt"}, 0},
		want{"crosstalk_must_respond_open", []string{"agent", "other"}, 0})
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "crosstalk_outbound_backlog", "crosstalk_ledger_append_duration_seconds"} {
		if fams[name] == nil && (name != "process_cpu_seconds_total" || runtime.GOOS == "linux") {
			t.Errorf("%s missing from /metrics", name)
		}
	}

	question := text("CLAUDE", "CHATGPT", "REQUEST", "Is the deploy blocked?")
	if s := r.post(t, question); s != http.StatusOK {
		t.Fatalf("POST = %d", s)
	}
	waitFor(t, r.url,
		want{"crosstalk_envelopes_received_total", []string{"transport", "http", "outcome", "accepted"}, 1},
		want{"crosstalk_verifications_total", []string{"status", "unsigned"}, 1},
		want{"crosstalk_ingest_duration_seconds", []string{"transport", "http"}, 1},
		want{"crosstalk_must_respond_open", []string{"agent", "chatgpt"}, 1},
		want{"crosstalk_must_respond_open", []string{"agent", "claude"}, 0},
		want{"crosstalk_outbound_deliveries_total", []string{"transport", "mail", "result", "delivered"}, 1})

	r.post(t, question)
	if s := r.post(t, "no envelope here"); s != http.StatusBadRequest {
		t.Errorf("POST of plain text = %d, want 400", s)
	}
	if s := r.post(t, strings.Repeat(question, 1001)); s != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of 1001 envelopes = %d, want 413", s)
	}
	r.post(t, text("CHATGPT", "CLAUDE", "RESPOND", "No."))
	r.post(t, text("CHATGPT", "MISTRAL", "REQUEST", "Can you check?"))
	r.post(t, text("CLAUDE", "GEMINI", "REQUEST", "And you?"))
	waitFor(t, r.url,
		want{"crosstalk_envelopes_received_total", []string{"transport", "http", "outcome", "accepted"}, 4},
		want{"crosstalk_envelopes_received_total", []string{"transport", "http", "outcome", "duplicate"}, 1},
		want{"crosstalk_envelopes_received_total", []string{"transport", "http", "outcome", "rejected"}, 2},
		want{"crosstalk_envelopes_rejected_total", []string{"code", "E-FORMAT"}, 1},
		want{"crosstalk_envelopes_rejected_total", []string{"code", "E-TOO-LARGE"}, 1},
		want{"crosstalk_verifications_total", []string{"status", "unsigned"}, 5},
		want{"crosstalk_must_respond_open", []string{"agent", "other"}, 1},
		want{"crosstalk_must_respond_open", []string{"agent", "gemini"}, 1},
		want{"crosstalk_must_respond_open", []string{"agent", "claude"}, 0}, // RESPOND asks for nothing
		// claude's folder fails once, then takes the reply.
		want{"crosstalk_outbound_retries_total", []string{"transport", "folder"}, 1},
		want{"crosstalk_outbound_deliveries_total", []string{"transport", "folder", "result", "delivered"}, 1},
		// No a2a sender on this relay: gemini's delivery fails for good.
		want{"crosstalk_outbound_deliveries_total", []string{"transport", "a2a", "result", "failed"}, 1},
		want{"crosstalk_outbound_backlog", nil, 0})
	_, fams = scrape(t, r.url, "")
	// 4 messages, 1 rejection notice, 3 deliveries, 1 failure notice, at least.
	if n := value(fams, "crosstalk_ledger_events_appended_total"); n < 9 {
		t.Errorf("ledger_events_appended_total = %v, want ≥ 9", n)
	}
	if n := value(fams, "crosstalk_ledger_append_duration_seconds"); n < 8 {
		t.Errorf("ledger_append_duration_seconds count = %v, want ≥ 8", n)
	}
	// The SQLite writer's own counters: every append was committed and
	// fsynced, several appends may share a commit, and each commit has
	// its fsync.
	commits, ops := value(fams, "crosstalk_sqlite_commits_total"), value(fams, "crosstalk_sqlite_write_ops_total")
	syncs, secs := value(fams, "crosstalk_sqlite_fsyncs_total"), value(fams, "crosstalk_sqlite_fsync_seconds_total")
	if commits < 1 || ops < 8 || ops < commits || syncs < 1 || syncs > commits || secs <= 0 {
		t.Errorf("sqlite commits %v, write ops %v, fsyncs %v in %v s; want ≥ 1 commit, ≥ 8 ops, no more commits than ops, 1 to commits fsyncs, and their time", commits, ops, syncs, secs)
	}
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if strings.HasPrefix(lp.GetValue(), "01") && len(lp.GetValue()) == 26 {
					t.Errorf("%s has an id as label value: %s=%s", f.GetName(), lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

// TestStreams opens an SSE stream and a WebSocket channel and checks
// crosstalk_streams_open counts them while they are open, and not after.
func TestStreams(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/groups/g/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, ":") {
		t.Fatalf("stream starts %q, %v", line, err)
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.url, "http")+"/v1/agents/claude/channel", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, r.url,
		want{"crosstalk_streams_open", []string{"kind", "sse"}, 1},
		want{"crosstalk_streams_open", []string{"kind", "websocket"}, 1},
		want{"crosstalk_streams_total", []string{"kind", "websocket"}, 1})
	resp.Body.Close()
	c.Close(websocket.StatusNormalClosure, "done")
	waitFor(t, r.url,
		want{"crosstalk_streams_open", []string{"kind", "sse"}, 0},
		want{"crosstalk_streams_open", []string{"kind", "websocket"}, 0},
		want{"crosstalk_streams_total", []string{"kind", "sse"}, 1})
}

// TestAuth: with tokens, any valid token reads /metrics and a request
// without one, or with a wrong one, is 401 — the API's rules.
func TestAuth(t *testing.T) {
	r := newRig(t, map[string]string{"tok-claude": "claude", "tok-gpt": "chatgpt"})
	for _, tc := range []struct {
		token string
		want  int
	}{
		{"", http.StatusUnauthorized},
		{"wrong", http.StatusUnauthorized},
		{"tok-claude", http.StatusOK},
		{"tok-gpt", http.StatusOK},
	} {
		if got, _ := scrape(t, r.url, tc.token); got != tc.want {
			t.Errorf("GET /metrics with token %q = %d, want %d", tc.token, got, tc.want)
		}
	}
	_, fams := scrape(t, r.url, "tok-claude")
	if n := value(fams, "crosstalk_http_responses_total", "status", "401"); n != 2 {
		t.Errorf(`http_responses_total{status="401"} = %v, want 2`, n)
	}
}

// TestRegistryPerRelay: two relays in one process count apart.
func TestRegistryPerRelay(t *testing.T) {
	a, b := newRig(t, nil), newRig(t, nil)
	a.post(t, text("CLAUDE", "CHATGPT", "REQUEST", "only on a"))
	waitFor(t, a.url, want{"crosstalk_envelopes_received_total", []string{"outcome", "accepted"}, 1})
	waitFor(t, b.url, want{"crosstalk_envelopes_received_total", []string{"outcome", "accepted"}, 0})
}
