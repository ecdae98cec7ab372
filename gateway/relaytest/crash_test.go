package relaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// The crash test's load: crashClients goroutines post distinct envelopes
// into crashGroups groups; the relay is killed crashKills times, each time
// after at least crashAcksPerRun new acknowledgements.
const (
	crashClients    = 16
	crashGroups     = 4
	crashKills      = 4
	crashAcksPerRun = 150
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// crosstalkBinary builds cmd/crosstalk once per test binary (with the race
// detector when the tests have it) and returns its path.
func crosstalkBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			binErr = fmt.Errorf("no go command to build crosstalk: %w", err)
			return
		}
		binDir, err = os.MkdirTemp("", "crosstalk-relaytest-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "crosstalk")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		args = append(args, "github.com/crosstalk-go/crosstalk/cmd/crosstalk")
		out, err := exec.Command(goTool, args...).CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// tail keeps the last bytes written to it, for failure messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 8<<10; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// child is a `crosstalk relay` process.
type child struct {
	cmd  *exec.Cmd
	url  string
	logs *tail
	done chan error // the result of Wait
}

var listeningURL = regexp.MustCompile(`msg="relay listening".* url=(\S+)`)

// startChild starts `crosstalk relay` on dataDir and a free loopback port
// and waits for its "relay listening" log line.
func startChild(t *testing.T, bin, config, dataDir string) *child {
	t.Helper()
	cmd := exec.Command(bin, "relay", "--config", config, "--data", dataDir, "--listen", "127.0.0.1:0")
	// Whatever else defaults to the user's directories stays in the test's.
	home := filepath.Join(filepath.Dir(dataDir), "home")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &tail{}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s relay: %v", bin, err)
	}
	t.Cleanup(func() { c.kill() })
	urls := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stderr)
		for {
			line, err := br.ReadString('\n')
			c.logs.Write([]byte(line))
			if m := listeningURL.FindStringSubmatch(line); m != nil {
				urls <- m[1]
				break
			}
			if err != nil {
				close(urls)
				break
			}
		}
		io.Copy(c.logs, br) // keep draining, or the child blocks on logging
		c.done <- cmd.Wait()
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("relay exited before listening:\n%s", c.logs)
		}
		c.url = u
	case <-time.After(30 * time.Second):
		c.kill()
		t.Fatalf("relay did not log \"relay listening\" within 30 s:\n%s", c.logs)
	}
	return c
}

// kill sends SIGKILL: no shutdown, no deferred code, no final fsync.
// Killing a process that has already exited is harmless.
func (c *child) kill() { c.cmd.Process.Kill() }

// wait waits for the process to end and returns its Wait error.
func (c *child) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("relay did not exit within 30 s:\n%s", c.logs)
		return nil
	}
}

// load posts distinct envelopes from several goroutines to whichever relay
// is current, remembering what was acknowledged and what was not.
type load struct {
	client *http.Client
	url    atomic.Pointer[string]
	acks   atomic.Int64

	mu     sync.Mutex
	acked  map[string]api.Result // by message id: answered 200
	failed map[string]string     // by message id: the text of an envelope without 200
	// batches are the message ids of multi-envelope requests without 200
	batches [][]string
	sent    int
}

func newLoad() *load {
	return &load{
		client: &http.Client{Timeout: 20 * time.Second},
		acked:  map[string]api.Result{},
		failed: map[string]string{},
	}
}

// post sends a body of n envelopes; ok reports a 200 with n results.
func (l *load) post(ctx context.Context, text string, n int) ([]api.Result, bool) {
	u := l.url.Load()
	if u == nil {
		return nil, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *u+"/crosstalk/receive", strings.NewReader(text))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Accept", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		return nil, false
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, false
	}
	var out struct{ Results []api.Result }
	if err := json.Unmarshal(body, &out); err != nil || len(out.Results) != n {
		return nil, false
	}
	return out.Results, true
}

// run is one client: distinct envelopes until ctx ends. Most clients post
// one envelope per request into group worker%crashGroups; every fourth
// posts three at once, into three groups, which the relay appends as one
// atomic batch.
func (l *load) run(ctx context.Context, worker int) {
	per := 1
	if worker%4 == 3 {
		per = 3
	}
	for i := 0; ctx.Err() == nil; i++ {
		if l.url.Load() == nil { // between a kill and the restart
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		var (
			body  strings.Builder
			ids   []string
			texts []string
		)
		for k := range per {
			e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("client %d, request %d, envelope %d", worker, i, k))
			e.Context = fmt.Sprintf("crash-%d", (worker+k)%crashGroups)
			b, err := envelope.Marshal(e)
			if err != nil {
				panic(err)
			}
			if k > 0 {
				body.WriteString("\n")
			}
			body.Write(b)
			ids, texts = append(ids, e.Message), append(texts, string(b))
		}
		l.mu.Lock()
		l.sent += per
		l.mu.Unlock()
		res, ok := l.post(ctx, body.String(), per)
		l.mu.Lock()
		for k, id := range ids {
			if ok {
				l.acked[id] = res[k]
			} else {
				l.failed[id] = texts[k]
			}
		}
		if !ok && per > 1 {
			l.batches = append(l.batches, ids)
		}
		l.mu.Unlock()
		if ok {
			l.acks.Add(int64(per))
		} else {
			select { // the relay is down: do not spin
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// snapshot returns a copy of the acknowledged envelopes.
func (l *load) snapshot() map[string]api.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]api.Result, len(l.acked))
	for k, v := range l.acked {
		out[k] = v
	}
	return out
}

// ledgerView is what GET /v1/groups and its event pages show.
type ledgerView struct {
	byMessage map[string][]ledger.Event
	events    int
}

// readLedger reads every group's events over the API, page by page, and
// checks that seq is dense from 1 in every group and that no message id
// is recorded twice.
func readLedger(t *testing.T, client *http.Client, url string) ledgerView {
	t.Helper()
	get := func(path string, v any) {
		t.Helper()
		res, err := client.Get(url + path)
		if err != nil {
			t.Fatalf("GET %s = %v", path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, res.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var groups struct{ Groups []ledger.Group }
	get("/v1/groups", &groups)
	view := ledgerView{byMessage: map[string][]ledger.Event{}}
	for _, g := range groups.Groups {
		var since int64
		for page := 0; ; page++ {
			if page > 1000 {
				t.Fatalf("group %s: more than 1000 pages", g.ID)
			}
			var p struct {
				Events  []ledger.Event
				NextSeq int64 `json:"next_seq"`
			}
			get(fmt.Sprintf("/v1/groups/%s/events?since_seq=%d&limit=500", g.ID, since), &p)
			if len(p.Events) == 0 {
				break
			}
			for _, ev := range p.Events {
				if ev.Seq != since+1 {
					t.Fatalf("group %s: seq %d after %d, want %d (seq must be dense)", g.ID, ev.Seq, since, since+1)
				}
				since = ev.Seq
				d, err := gateway.ParseData(ev)
				if err != nil || d.X == nil || d.X.Envelope == nil {
					t.Fatalf("group %s seq %d: %s without an envelope (%v)", g.ID, ev.Seq, ev.Kind, err)
				}
				view.byMessage[d.X.Envelope.Message] = append(view.byMessage[d.X.Envelope.Message], ev)
				view.events++
			}
		}
		if since != g.LastSeq {
			t.Errorf("group %s: last event seq %d, want last_seq %d", g.ID, since, g.LastSeq)
		}
	}
	for m, evs := range view.byMessage {
		if len(evs) != 1 {
			t.Errorf("message %s recorded %d times, want once", m, len(evs))
		}
	}
	return view
}

// checkAcked requires every acknowledged envelope to be in the ledger
// once, as the event its acknowledgement named.
func checkAcked(t *testing.T, view ledgerView, acked map[string]api.Result, when string) {
	t.Helper()
	missing := 0
	for m, res := range acked {
		evs := view.byMessage[m]
		if len(evs) == 0 {
			missing++
			continue
		}
		if ev := evs[0]; ev.ID != res.EventID || ev.GroupID != res.GroupID || ev.Seq != res.Seq {
			t.Errorf("%s: message %s is event %s %s/%d, but its 200 said %s %s/%d", when, m, ev.ID, ev.GroupID, ev.Seq, res.EventID, res.GroupID, res.Seq)
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d of %d acknowledged envelopes are missing from the ledger", when, missing, len(acked))
	}
}

// loadConfig writes the config of a relay under test load into a fresh
// directory, with extra TOML lines, and returns it and a data dir beside
// it: no rate limit to speak of, the trust store in the test's directory,
// never the user's own.
func loadConfig(t *testing.T, extra string) (config, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	config = filepath.Join(dir, "relay.toml")
	toml := fmt.Sprintf("rate_limit = 1000000.0\nrate_burst = 1000000\nlog_level = \"info\"\ntrust_file = %q\n%s\n", filepath.Join(dir, "known_keys"), extra)
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, filepath.Join(dir, "data")
}

// TestCrash runs `crosstalk relay` as a child process under concurrent
// load, kills it with SIGKILL crashKills times and restarts it on the same
// data dir. After every restart, every envelope that got a 200 is in the
// ledger exactly once and seq is dense in every group; at the end, the
// envelopes that got no answer are sent again and are then in the ledger
// exactly once too.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crosstalk and runs it as a child process")
	}
	bin := crosstalkBinary(t)
	config, dataDir := loadConfig(t, "")

	l := newLoad()
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range crashClients {
		wg.Go(func() { l.run(ctx, w) })
	}

	for run := 0; run < crashKills; run++ {
		c := startChild(t, bin, config, dataDir)
		// Before the load reaches the new relay: everything acknowledged
		// by the killed ones is there.
		acked := l.snapshot()
		view := readLedger(t, l.client, c.url)
		checkAcked(t, view, acked, fmt.Sprintf("after restart %d", run))
		if t.Failed() {
			t.Fatalf("relay log:\n%s", c.logs)
		}

		target := l.acks.Load() + crashAcksPerRun
		l.url.Store(&c.url)
		deadline := time.Now().Add(30 * time.Second)
		for l.acks.Load() < target && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if l.acks.Load() < target {
			t.Fatalf("run %d: %d acknowledgements in 30 s, want %d; relay log:\n%s", run, l.acks.Load()-target+crashAcksPerRun, crashAcksPerRun, c.logs)
		}
		c.kill() // under load: requests are in flight
		l.url.Store(nil)
		if err := c.wait(t); err == nil {
			t.Fatalf("run %d: relay exited cleanly after SIGKILL", run)
		}
	}
	stopLoad()
	wg.Wait()

	// The last restart: check, send again what got no 200, check again.
	c := startChild(t, bin, config, dataDir)
	l.url.Store(&c.url)
	acked := l.snapshot()
	view := readLedger(t, l.client, c.url)
	checkAcked(t, view, acked, "after the last restart")
	// A request's envelopes are one atomic append: all of them or none.
	for _, ids := range l.batches {
		present := 0
		for _, id := range ids {
			present += len(view.byMessage[id])
		}
		if present != 0 && present != len(ids) {
			t.Errorf("unanswered request of %d envelopes %v: %d in the ledger, want all or none", len(ids), ids, present)
		}
	}

	retried := map[string]api.Result{}
	var unanswered []string
	for m := range l.failed {
		unanswered = append(unanswered, m)
	}
	sort.Strings(unanswered)
	for _, m := range unanswered {
		var (
			res api.Result
			ok  bool
		)
		for try := 0; try < 5 && !ok; try++ {
			var rs []api.Result
			if rs, ok = l.post(context.Background(), l.failed[m], 1); ok {
				res = rs[0]
			}
		}
		if !ok {
			t.Fatalf("envelope %s: no 200 in 5 tries from a running relay; log:\n%s", m, c.logs)
		}
		if res.Message != m {
			t.Fatalf("envelope %s: answer names message %s", m, res.Message)
		}
		retried[m] = res
		acked[m] = res
	}
	view = readLedger(t, l.client, c.url)
	checkAcked(t, view, acked, "after sending the unanswered again")
	if view.events != l.sent {
		t.Errorf("ledger holds %d events, want one per envelope sent (%d)", view.events, l.sent)
	}
	dups := 0
	for _, res := range retried {
		if res.Duplicate {
			dups++ // committed before the kill, answer lost
		}
	}
	t.Logf("%d envelopes sent, %d acknowledged under load; %d unanswered sent again, of which %d were already committed; %d unanswered 3-envelope requests",
		l.sent, len(acked)-len(retried), len(retried), dups, len(l.batches))

	// A clean stop finishes and exits 0.
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.wait(t); err != nil {
		t.Errorf("relay after SIGTERM: %v, want exit 0; log:\n%s", err, c.logs)
	}
}
