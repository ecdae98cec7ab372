package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
)

// backgroundCLI is a long-running command (watch, clip watch) started in
// the background.
type backgroundCLI struct {
	stdout, stderr syncbuf.Buffer
	cancel         context.CancelFunc
	done           chan int
}

func startCLI(t *testing.T, args ...string) *backgroundCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &backgroundCLI{cancel: cancel, done: make(chan int, 1)}
	go func() { b.done <- run(ctx, args, strings.NewReader(""), &b.stdout, &b.stderr) }()
	t.Cleanup(func() { b.stop(t) })
	return b
}

// stop interrupts the command and returns its exit code.
func (b *backgroundCLI) stop(t *testing.T) int {
	t.Helper()
	b.cancel()
	select {
	case code := <-b.done:
		b.done <- code
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("command did not stop within 10s of the interrupt")
		return -1
	}
}

// waitOutput waits until stdout holds n lines.
func (b *backgroundCLI) waitOutput(t *testing.T, n int, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if out := b.stdout.String(); strings.Count(out, "\n") >= n {
			return out
		}
		select {
		case code := <-b.done:
			b.done <- code
			t.Fatalf("command exited with %d: stdout %q, stderr %q", code, b.stdout.String(), b.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("stdout has %d lines after %s, want %d:\n%s\nstderr: %s", strings.Count(b.stdout.String(), "\n"), d, n, b.stdout.String(), b.stderr.String())
	return ""
}

// waitFor waits until stdout contains s.
func (b *backgroundCLI) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.stdout.String(), s) {
			return
		}
	}
	t.Fatalf("stdout %q does not contain %q after %s; stderr %q", b.stdout.String(), s, d, b.stderr.String())
}

func waitPath(t *testing.T, path string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within %s", path, d)
}

func testEnvelope(t *testing.T, from, to, intent, body string) string {
	t.Helper()
	e := envelope.New(from, to, intent, body)
	e.Context = "clitest"
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const malformedEnvelope = "[[ALICE→BOB v1]]\nintent: REQUEST\nthis line has no colon\n[[END]]\n"

var fastWatch = []string{"--settle", "30ms", "--rescan", "200ms"}

// TestWatchJSONIsParseJSON: watch --json prints exactly what parse --json
// prints for the same file, and the file moves once handled.
func TestWatchJSONIsParseJSON(t *testing.T) {
	dir := t.TempDir()
	text := "chat first\n" + testEnvelope(t, "ALICE", "BOB", "REQUEST", "one") + "\n" + malformedEnvelope + testEnvelope(t, "BOB", "ALICE", "RESPOND", "two")
	want, _, code := runCLI(t, text, "parse", "--json")
	if code != 1 || strings.Count(want, "\n") != 3 {
		t.Fatalf("parse --json = %d, %q; want three lines, exit 1", code, want)
	}
	w := startCLI(t, append([]string{"watch", "--json", dir}, fastWatch...)...)
	if err := os.WriteFile(filepath.Join(dir, "chat.crosstalk"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := w.waitOutput(t, 3, 5*time.Second); got != want {
		t.Errorf("watch --json printed\n%s\nwant (parse --json)\n%s", got, want)
	}
	// One envelope of three malformed: processed, with a .error.
	waitPath(t, filepath.Join(dir, "processed", "chat.crosstalk.error"), 3*time.Second)
	if code := w.stop(t); code != 0 {
		t.Errorf("watch exited %d after the interrupt, want 0; stderr %q", code, w.stderr.String())
	}
}

func TestWatchHuman(t *testing.T) {
	dir := t.TempDir()
	w := startCLI(t, append([]string{"watch", dir}, fastWatch...)...)
	if err := os.WriteFile(filepath.Join(dir, "a.aict"), []byte(testEnvelope(t, "ALICE", "BOB", "REQUEST", "hello")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.crosstalk"), []byte(malformedEnvelope), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a.aict:1: ALICE → BOB  REQUEST", "bad.crosstalk:3: E-FORMAT"} {
		w.waitFor(t, s, 5*time.Second)
	}
	waitPath(t, filepath.Join(dir, "processed", "a.aict"), 3*time.Second)
	waitPath(t, filepath.Join(dir, "failed", "bad.crosstalk.error"), 3*time.Second)
}

// testRelay is a relay API over an in-memory ledger; down makes every
// request fail with 500 (not recorded).
type testRelay struct {
	url   string
	store ledger.Store
	down  atomic.Bool
}

func newTestRelay(t *testing.T) *testRelay {
	t.Helper()
	r := &testRelay{store: memory.New(nil)}
	a := api.New(gateway.New(r.store, nil), nil)
	a.MountAgents(nil) // the cursors endpoint clip copy uses, as `crosstalk relay` mounts it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			http.Error(w, "relay down", http.StatusInternalServerError)
			return
		}
		a.ServeHTTP(w, req)
	}))
	t.Cleanup(func() { srv.Close(); a.Close(); r.store.Close() })
	r.url = srv.URL
	return r
}

// messages returns the envelope message ids recorded in group.
func (r *testRelay) messages(t *testing.T, group string) []string {
	t.Helper()
	evs, err := r.store.Range(context.Background(), group, 0, []string{gateway.KindMessage}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		d, _ := gateway.ParseData(ev)
		if d.X != nil && d.X.Envelope != nil {
			ids = append(ids, d.X.Envelope.Message)
		}
	}
	return ids
}

func TestWatchRelay(t *testing.T) {
	dir := t.TempDir()
	relay := newTestRelay(t)
	w := startCLI(t, append([]string{"watch", "--relay", relay.url, dir}, fastWatch...)...)

	good := testEnvelope(t, "ALICE", "BOB", "REQUEST", "forward me")
	env, _ := envelope.Unmarshal([]byte(good))
	if err := os.WriteFile(filepath.Join(dir, "good.crosstalk"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	out := w.waitOutput(t, 1, 5*time.Second)
	if !regexp.MustCompile(`good\.crosstalk: recorded message ` + env.Message + ` as event [0-9A-Z]{26} \(group clitest, seq 1\)`).MatchString(out) {
		t.Errorf("watch --relay printed %q, want the receipt", out)
	}
	waitPath(t, filepath.Join(dir, "processed", "good.crosstalk"), 3*time.Second)
	if got := relay.messages(t, "clitest"); len(got) != 1 || got[0] != env.Message {
		t.Errorf("relay recorded %v, want [%s]", got, env.Message)
	}

	// Rejected by the relay (recorded as a rejection): failed/ with the reason.
	if err := os.WriteFile(filepath.Join(dir, "bad.crosstalk"), []byte(malformedEnvelope), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPath(t, filepath.Join(dir, "failed", "bad.crosstalk.error"), 5*time.Second)
	if msg, _ := os.ReadFile(filepath.Join(dir, "failed", "bad.crosstalk.error")); !strings.Contains(string(msg), "E-FORMAT") {
		t.Errorf("failed/bad.crosstalk.error = %q, want the relay's E-FORMAT", msg)
	}
	// The printed rejection says where, as the relay's ERROR does.
	w.waitFor(t, "bad.crosstalk: rejected (no message id): E-FORMAT: line 3: ", 5*time.Second)

	// The relay failing: the file stays until it is recorded.
	relay.down.Store(true)
	later := testEnvelope(t, "ALICE", "BOB", "REQUEST", "while the relay is down")
	if err := os.WriteFile(filepath.Join(dir, "later.crosstalk"), []byte(later), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "later.crosstalk")); err != nil {
		t.Fatalf("the file moved while the relay failed: %v", err)
	}
	relay.down.Store(false)
	waitPath(t, filepath.Join(dir, "processed", "later.crosstalk"), 5*time.Second)
	if got := relay.messages(t, "clitest"); len(got) != 2 {
		t.Errorf("relay recorded %v, want two messages", got)
	}
}

func TestWatchUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"watch"}, 2, "want exactly one DIR"},
		{[]string{"watch", dir, dir}, 2, "want exactly one DIR"},
		{[]string{"watch", filepath.Join(dir, "missing")}, 1, "hint: create it first"},
		{[]string{"watch", "--settle", "soon", dir}, 2, "invalid value"},
	}
	for _, tt := range tests {
		_, stderr, code := runCLI(t, "", tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.err) {
			t.Errorf("crosstalk %v = %d, %q; want %d and %q", tt.args, code, stderr, tt.code, tt.err)
		}
	}
	// A file where DIR belongs: `mkdir -p FILE` would fail, so no such hint.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, stderr, code := runCLI(t, "", "watch", file); code != 1 || !strings.Contains(stderr, "not a directory") || strings.Contains(stderr, "mkdir") {
		t.Errorf("crosstalk watch FILE = %d, %q; want 1, not a directory, no mkdir hint", code, stderr)
	}
	out, _, code := runCLI(t, "", "watch", "--help")
	if code != 0 || !strings.Contains(out, "usage: crosstalk watch") || !strings.Contains(out, "-relay") {
		t.Errorf("watch --help = %d, %q", code, out)
	}
}
