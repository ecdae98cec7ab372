package folder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/folder"
	"github.com/crosstalk-go/crosstalk/transports/transporttest"
)

// testOptions are short timings so the tests run in well under a second
// each.
func testOptions() *folder.Options {
	return &folder.Options{Settle: 50 * time.Millisecond, Rescan: 200 * time.Millisecond, Timeout: 10 * time.Second}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := 0
	var mu sync.Mutex
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) (transports.Receiver, transports.Sender) {
			f := folder.New(dir, testOptions())
			return f, f
		},
		Put: func(ctx context.Context, t *testing.T, text []byte) error {
			mu.Lock()
			n++
			name := fmt.Sprintf("put-%03d.crosstalk", n)
			mu.Unlock()
			return writeRenamed(dir, name, text)
		},
		Address: "RELAY",
		Fetch: func(ctx context.Context, t *testing.T) [][]byte {
			return readAll(t, filepath.Join(dir, folder.OutboxDir, "RELAY"))
		},
		Settle: 200 * time.Millisecond,
	})
}

// writeRenamed writes a file the way careful tools do: a hidden temp file,
// then a rename into place.
func writeRenamed(dir, name string, text []byte) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, text, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

func readAll(t *testing.T, dir string) [][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out [][]byte
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// envText returns a small canonical envelope.
func envText(t *testing.T, body string) []byte {
	t.Helper()
	e := envelope.New("ALICE", "BOB", envelope.IntentRequest, body)
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorder is a Handler that records what it got and answers with reply
// (or fails while fail > 0).
type recorder struct {
	mu    sync.Mutex
	got   []transports.Inbound
	reply func(in transports.Inbound) []byte
	fail  int
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 100)} }

func (r *recorder) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return nil, errors.New("not recorded")
	}
	r.got = append(r.got, in)
	r.ch <- struct{}{}
	if r.reply != nil {
		return r.reply(in), nil
	}
	return nil, nil
}

func (r *recorder) inbound() []transports.Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transports.Inbound(nil), r.got...)
}

func (r *recorder) wait(t *testing.T, n int, d time.Duration) []transports.Inbound {
	t.Helper()
	deadline := time.After(d)
	for {
		if got := r.inbound(); len(got) >= n {
			return got
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("handler got %d texts within %s, want %d", len(r.inbound()), d, n)
		}
	}
}

// start runs f.Receive until the test ends.
func start(t *testing.T, f *folder.Folder, h transports.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Receive(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Receive = %v, want nil after cancel", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Receive did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitExists waits until path exists (Lstat).
func waitExists(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %s", path, d)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMaxFileSizeIsMaxIntake(t *testing.T) {
	t.Parallel()
	if folder.MaxFileSize != gateway.MaxIntake {
		t.Errorf("MaxFileSize = %d, want gateway.MaxIntake %d", folder.MaxFileSize, gateway.MaxIntake)
	}
}

func TestRenameSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	text := envText(t, "saved by an editor")
	// vim-like: write a backup-ish temp, then rename over the name; emacs
	// lock files are hidden symlinks and must be ignored, not refused.
	if err := os.Symlink("user@host.1234", filepath.Join(dir, ".#note.crosstalk")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "note.crosstalk.tmp"), text[:20], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "note.crosstalk.tmp"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "note.crosstalk.tmp"), filepath.Join(dir, "note.crosstalk")); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 1, 3*time.Second)
	waitExists(t, filepath.Join(dir, folder.ProcessedDir, "note.crosstalk"), 2*time.Second)
	time.Sleep(150 * time.Millisecond)
	got := rec.inbound()
	if len(got) != 1 || !bytes.Equal(got[0].Data, text) {
		t.Fatalf("handler got %d texts, want the saved file once", len(got))
	}
	if got[0].Transport != "folder" || got[0].Source != filepath.Join(dir, "note.crosstalk") || got[0].CanReply {
		t.Errorf("Inbound = {%q %q CanReply=%v}, want folder, the path, false", got[0].Transport, got[0].Source, got[0].CanReply)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".#note.crosstalk")); err != nil {
		t.Errorf("the hidden lock file was touched: %v", err)
	}
}

func TestPartialWriteThenCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	text := append([]byte("chat before\n"), envText(t, "line one\nline two")...)
	cut := bytes.Index(text, []byte("body: |")) + 3
	path := filepath.Join(dir, "slow.aict")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(text[:cut]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // many settle periods
	if got := rec.inbound(); len(got) != 0 {
		t.Fatalf("handler got %q before the file was complete", got[0].Data)
	}
	if _, err := fh.Write(text[cut:]); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, 1, 3*time.Second)
	if !bytes.Equal(got[0].Data, text) {
		t.Errorf("handler got %q, want the whole file %q", got[0].Data, text)
	}
	waitExists(t, filepath.Join(dir, folder.ProcessedDir, "slow.aict"), 2*time.Second)
}

func TestSeveralEnvelopesPerFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var text []byte
	for i := range 3 {
		text = append(text, fmt.Sprintf("noise %d\n", i)...)
		text = append(text, envText(t, fmt.Sprintf("envelope %d", i))...)
	}
	text = append(text, "```\n\n"...) // a closing fence and blank lines after the last [[END]]
	if err := os.WriteFile(filepath.Join(dir, "three.crosstalk"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	got := rec.wait(t, 1, 3*time.Second)
	r := envelope.NewReader(bytes.NewReader(got[0].Data))
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		n++
	}
	if n != 3 {
		t.Errorf("the one Inbound holds %d envelopes, want 3", n)
	}
	waitExists(t, filepath.Join(dir, folder.ProcessedDir, "three.crosstalk"), 2*time.Second)
	if _, err := os.Stat(filepath.Join(dir, folder.ProcessedDir, "three.crosstalk"+folder.ErrorSuffix)); err == nil {
		t.Errorf("a .error file was written for a file whose envelopes all parsed")
	}
}

// TestFilesWrittenWhileDown: files that arrived while no watcher ran are
// found by the first scan, and a file written while the watcher has no
// events (the rescan path) is found too.
func TestFilesWrittenWhileDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 2 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("early-%d.crosstalk", i)), envText(t, "early"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	f := folder.New(dir, testOptions())
	stop := start(t, f, rec.handle)
	rec.wait(t, 2, 3*time.Second)
	stop()
	// Down again: a file arrives, then a new Receiver starts.
	if err := os.WriteFile(filepath.Join(dir, "late.crosstalk"), envText(t, "late"), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, folder.New(dir, testOptions()), rec.handle)
	got := rec.wait(t, 3, 3*time.Second)
	var names []string
	for _, in := range got {
		names = append(names, filepath.Base(in.Source))
	}
	sort.Strings(names)
	if want := "[early-0.crosstalk early-1.crosstalk late.crosstalk]"; fmt.Sprint(names) != want {
		t.Errorf("offered %v, want %s once each", names, want)
	}
}

// TestRescanAlone: without change notifications (inotify limits, network
// file systems) the periodic rescan still finds every file.
func TestRescanAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newRecorder()
	start(t, folder.WithoutNotify(folder.New(dir, testOptions())), rec.handle)
	time.Sleep(50 * time.Millisecond)
	if err := writeRenamed(dir, "missed.crosstalk", envText(t, "no event for me")); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 1, 3*time.Second) // Rescan is 200 ms
	waitExists(t, filepath.Join(dir, folder.ProcessedDir, "missed.crosstalk"), 2*time.Second)
}

func TestRefused(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret.crosstalk")
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string, text []byte) string // returns the name created
		failed string                                             // name expected in failed/
		why    string                                             // in the .error file
	}{
		{"symlink out of the dir", func(t *testing.T, dir string, text []byte) string {
			if err := os.WriteFile(outside, text, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "link.crosstalk")); err != nil {
				t.Fatal(err)
			}
			return "link.crosstalk"
		}, "link.crosstalk", "symbolic link"},
		{"symlink inside the dir", func(t *testing.T, dir string, text []byte) string {
			if err := os.WriteFile(filepath.Join(dir, "real.txt"), text, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("real.txt", filepath.Join(dir, "rel.crosstalk")); err != nil {
				t.Fatal(err)
			}
			return "rel.crosstalk"
		}, "rel.crosstalk", "symbolic link"},
		{"hard link", func(t *testing.T, dir string, text []byte) string {
			if err := os.WriteFile(filepath.Join(dir, "orig.txt"), text, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(dir, "orig.txt"), filepath.Join(dir, "hard.crosstalk")); err != nil {
				t.Skipf("no hard links here: %v", err)
			}
			return "hard.crosstalk"
		}, "hard.crosstalk", "2 hard links"},
		{"backslash and dots", func(t *testing.T, dir string, text []byte) string {
			return `a\..\evil.crosstalk`
		}, "", "path separator"},
		{"dot dot", func(t *testing.T, dir string, text []byte) string { return "a..b.crosstalk" }, "", `".."`},
		{"newline", func(t *testing.T, dir string, text []byte) string { return "new\nline.crosstalk" }, "", "control character"},
		{"line separator", func(t *testing.T, dir string, text []byte) string { return "line\u2028sep.crosstalk" }, "", "control character (U+2028)"},
		{"bidi override", func(t *testing.T, dir string, text []byte) string { return "\u202egnp.crosstalk" }, "", "control character (U+202E)"},
		{"bidi isolate", func(t *testing.T, dir string, text []byte) string { return "a\u2067b.aict" }, "", "control character (U+2067)"},
		{"bad utf-8", func(t *testing.T, dir string, text []byte) string { return "bad\xff.AICT" }, "", "UTF-8"},
		{"fifo", func(t *testing.T, dir string, text []byte) string {
			if err := mkfifo(filepath.Join(dir, "pipe.crosstalk")); err != nil {
				t.Skipf("no FIFOs here: %v", err)
			}
			return "pipe.crosstalk"
		}, "pipe.crosstalk", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			text := envText(t, "should never be read")
			name := tt.make(t, dir, text)
			if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
				if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder()
			start(t, folder.New(dir, testOptions()), rec.handle)
			errFile := waitErrorFile(t, filepath.Join(dir, folder.FailedDir), 3*time.Second)
			if got := rec.inbound(); len(got) != 0 {
				t.Errorf("handler got %q, want nothing", got[0].Data)
			}
			if msg := mustRead(t, errFile); !strings.Contains(msg, tt.why) {
				t.Errorf(".error = %q, want it to say %q", msg, tt.why)
			}
			moved := strings.TrimSuffix(errFile, folder.ErrorSuffix)
			if tt.failed != "" && filepath.Base(moved) != tt.failed {
				t.Errorf("moved to failed/%s, want failed/%s", filepath.Base(moved), tt.failed)
			}
			if _, err := os.Lstat(moved); err != nil {
				t.Errorf("the refused file is not in failed/: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%q is still in the watched dir", name)
			}
			if b := filepath.Base(moved); strings.ContainsAny(b, "\\\n") || strings.Contains(b, "..") {
				t.Errorf("failed/ name %q is not safe", b)
			}
			if _, err := os.Stat(outside); tt.failed == "link.crosstalk" && err != nil {
				t.Errorf("the link's target was touched: %v", err)
			}
		})
	}
}

// waitErrorFile waits for one .error file in dir and returns its path.
func waitErrorFile(t *testing.T, dir string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ms, _ := filepath.Glob(filepath.Join(dir, "*"+folder.ErrorSuffix))
		if len(ms) > 0 {
			return ms[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no .error file in %s within %s", dir, d)
	return ""
}

func TestIgnoredNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := envText(t, "not for the watcher")
	names := []string{".hidden.crosstalk", "notes.txt", "x.crosstalk~", "x.crosstalk.swp", "x.aict.bak"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.crosstalk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Real.CrossTalk"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	rec.wait(t, 1, 3*time.Second)
	time.Sleep(300 * time.Millisecond)
	if got := rec.inbound(); len(got) != 1 || filepath.Base(got[0].Source) != "Real.CrossTalk" {
		t.Errorf("offered %d files, want only Real.CrossTalk", len(got))
	}
	for _, n := range append(names, "dir.crosstalk") {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was moved: %v", n, err)
		}
	}
}

func TestNeverCompletes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text func(t *testing.T) []byte
		why  string
	}{
		{"no [[END]] at all", func(t *testing.T) []byte {
			b := envText(t, "cut off")
			return b[:len(b)-len("[[END]]\n")]
		}, "the last line is not [[END]]"},
		{"first of two unterminated", func(t *testing.T) []byte {
			b := envText(t, "first")
			b = b[:len(b)-len("[[END]]\n")]
			return append(b, envText(t, "second")...)
		}, "the envelope at line 1 has no [[END]]"},
		{"chat text only", func(t *testing.T) []byte { return []byte("just some notes\n") }, "the last line is not [[END]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "stuck.crosstalk"), tt.text(t), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := testOptions()
			opts.Timeout = 300 * time.Millisecond
			rec := newRecorder()
			start(t, folder.New(dir, opts), rec.handle)
			errFile := waitErrorFile(t, filepath.Join(dir, folder.FailedDir), 3*time.Second)
			if msg := mustRead(t, errFile); !strings.Contains(msg, "never completed") || !strings.Contains(msg, tt.why) {
				t.Errorf(".error = %q, want never completed: %s", msg, tt.why)
			}
			if len(rec.inbound()) != 0 {
				t.Errorf("the handler was called for a file that never completed")
			}
		})
	}
}

// TestWaitingFilesNotLookedAtEveryTick: files that wait to complete are
// looked at less often the longer they stay quiet, not on every tick (a
// folder with 100 000 such files kept a CPU busy with stat calls), and one
// of them that completes is still taken at once.
func TestWaitingFilesNotLookedAtEveryTick(t *testing.T) {
	t.Parallel()
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			const files = 200
			cut := envText(t, "cut off")
			cut = cut[:len(cut)-len("[[END]]\n")]
			for i := range files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("w%03d.crosstalk", i)), cut, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A tick every 5 ms: on every tick, 1.5 s would be about
			// 300 looks at each file.
			opts := &folder.Options{Settle: 20 * time.Millisecond, Rescan: time.Second, Timeout: time.Minute}
			f := folder.New(dir, opts)
			if !notify {
				f = folder.WithoutNotify(f)
			}
			rec := newRecorder()
			start(t, f, rec.handle)
			time.Sleep(1500 * time.Millisecond)
			// Halving the quiet time: about a dozen looks each, from the
			// first to 1.5 s.
			if got := folder.Looks(f); got > files*30 {
				t.Errorf("%d looks at %d waiting files in 1.5 s (%d each), want at most 30 each", got, files, got/files)
			}
			path := filepath.Join(dir, "w007.crosstalk")
			fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString("[[END]]\n"); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			// With notifications at once; without, within a rescan
			// interval of it.
			rec.wait(t, 1, 3*time.Second)
			waitExists(t, filepath.Join(dir, folder.ProcessedDir, "w007.crosstalk"), 2*time.Second)
			if len(rec.inbound()) != 1 {
				t.Errorf("handler called %d times, want once", len(rec.inbound()))
			}
		})
	}
}

func TestOversize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("x"), folder.MaxFileSize)
	big = append(big, envText(t, "at the end")...)
	if err := os.WriteFile(filepath.Join(dir, "big.crosstalk"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	errFile := waitErrorFile(t, filepath.Join(dir, folder.FailedDir), 3*time.Second)
	if msg := mustRead(t, errFile); !strings.Contains(msg, "larger than the limit") || !strings.Contains(msg, "E-TOO-LARGE") {
		t.Errorf(".error = %q, want the size limit named", msg)
	}
	if len(rec.inbound()) != 0 {
		t.Errorf("the handler was called for an oversized file")
	}
}

// TestOutcome: where a handled file goes, from the Handler's reply or the
// file's own parse.
func TestOutcome(t *testing.T) {
	t.Parallel()
	good := string(envText(t, "fine"))
	bad := "[[ALICE→BOB v1]]\nintent: REQUEST\nbogus line without a colon\n[[END]]\n"
	errEnv := func(code envelope.Code) string {
		e := envelope.NewError(nil, code, "refused by the test", "refused")
		b, _ := envelope.Marshal(e)
		return string(b)
	}
	// gateway.Relay.Receipt: the line is in the body, not in Reason.
	relayErr := func() string {
		e := envelope.NewError(nil, envelope.CodeFormat, "malformed field: want `key: value`", "E-FORMAT: line 3: malformed field: want `key: value`")
		b, _ := envelope.Marshal(e)
		return string(b)
	}()
	ack := string(envText(t, "ack-ish"))
	tests := []struct {
		name    string
		text    string
		reply   string
		dir     string // where the file goes
		errFile bool   // NAME.error beside it
		why     string
	}{
		{"accepted, no reply", good, "", folder.ProcessedDir, false, ""},
		{"malformed, no reply", bad, "", folder.FailedDir, true, "E-FORMAT"},
		{"one of two malformed, no reply", good + bad, "", folder.ProcessedDir, true, "partly rejected"},
		{"reply all ERROR", good, errEnv(envelope.CodePerm), folder.FailedDir, true, "E-PERM"},
		{"reply mixed", good + good, ack + errEnv(envelope.CodeFormat), folder.ProcessedDir, true, "partly rejected"},
		{"reply all ACK", good, ack, folder.ProcessedDir, false, ""},
		// gateway.Relay.Handler answers with the ERROR envelopes alone.
		{"reply one ERROR for two envelopes", good + good, errEnv(envelope.CodePerm), folder.ProcessedDir, true, "partly rejected"},
		{"reply two ERRORs for two envelopes", good + good, errEnv(envelope.CodePerm) + errEnv(envelope.CodeFormat), folder.FailedDir, true, "E-FORMAT"},
		{"no envelope, only [[END]]", "chat\n[[END]]\n", "", folder.FailedDir, true, "no envelope found"},
		// The list of rejections names each one's line, as the relay's
		// ERROR envelope does (its Reason has no line; its body has).
		{"reply ERROR with a line", bad, relayErr, folder.FailedDir, true, "  - E-FORMAT: line 3: malformed field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.crosstalk"), []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			if tt.reply != "" {
				rec.reply = func(transports.Inbound) []byte { return []byte(tt.reply) }
			}
			start(t, folder.New(dir, testOptions()), rec.handle)
			rec.wait(t, 1, 3*time.Second)
			moved := filepath.Join(dir, tt.dir, "in.crosstalk")
			waitExists(t, moved, 2*time.Second)
			if tt.errFile {
				waitExists(t, moved+folder.ErrorSuffix, time.Second)
				if msg := mustRead(t, moved+folder.ErrorSuffix); !strings.Contains(msg, tt.why) {
					t.Errorf(".error = %q, want it to mention %q", msg, tt.why)
				}
			} else if _, err := os.Stat(moved + folder.ErrorSuffix); err == nil {
				t.Errorf("unexpected .error: %s", mustRead(t, moved+folder.ErrorSuffix))
			}
		})
	}
}

func TestHandlerFailureKeepsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "retry.crosstalk"), envText(t, "retry me"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	rec.fail = 1
	start(t, folder.New(dir, testOptions()), rec.handle)
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "retry.crosstalk")); err != nil {
		t.Fatalf("the file moved after a failed handler call: %v", err)
	}
	rec.wait(t, 1, 3*time.Second) // retried after the 1 s backoff
	waitExists(t, filepath.Join(dir, folder.ProcessedDir, "retry.crosstalk"), 2*time.Second)
}

func TestNameCollision(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	for i := range 3 {
		if err := writeRenamed(dir, "same.crosstalk", envText(t, fmt.Sprint("copy ", i))); err != nil {
			t.Fatal(err)
		}
		rec.wait(t, i+1, 3*time.Second)
		waitExists(t, filepath.Join(dir, folder.ProcessedDir, []string{"same.crosstalk", "same-1.crosstalk", "same-2.crosstalk"}[i]), 2*time.Second)
	}
	for i, n := range []string{"same.crosstalk", "same-1.crosstalk", "same-2.crosstalk"} {
		if got := mustRead(t, filepath.Join(dir, folder.ProcessedDir, n)); !strings.Contains(got, fmt.Sprint("copy ", i)) {
			t.Errorf("processed/%s = %q, want copy %d", n, got, i)
		}
	}
}

// TestNameCollisionLongRun: a tool that always writes the same name
// (reply.crosstalk, a few times a day for a year) filled NAME-1 … NAME-9999
// in processed/; from then on every such file was handled but could not
// be moved ("no free name"), stayed in DIR and was never offered again
// until it changed. It is moved under a name of its own now.
func TestNameCollisionLongRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done := filepath.Join(dir, folder.ProcessedDir)
	if err := os.Mkdir(done, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		name := "same.crosstalk"
		if i > 0 {
			name = fmt.Sprintf("same-%d.crosstalk", i)
		}
		if err := os.WriteFile(filepath.Join(done, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	if err := writeRenamed(dir, "same.crosstalk", envText(t, "the 10001st")); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 1, 3*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Lstat(filepath.Join(dir, "same.crosstalk"))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("same.crosstalk still in DIR (%v): not moved", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	des, err := os.ReadDir(done)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, de := range des {
		if b, _ := os.ReadFile(filepath.Join(done, de.Name())); strings.Contains(string(b), "the 10001st") {
			found = true
			if !strings.HasPrefix(de.Name(), "same-") || !strings.HasSuffix(de.Name(), ".crosstalk") {
				t.Errorf("moved to processed/%s, want same-….crosstalk", de.Name())
			}
		}
	}
	if !found {
		t.Errorf("the file is not in processed/")
	}
}

func TestReceiveErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "missing"), file} {
		err := folder.New(d, nil).Receive(context.Background(), newRecorder().handle)
		if err == nil || !strings.HasPrefix(err.Error(), "folder: ") {
			t.Errorf("Receive(%s) = %v, want a folder: error", d, err)
		}
	}
	// The first Receive runs once it has offered a file. A fixed head
	// start (it was 50 ms) was not always enough on a loaded machine:
	// the second Receive then won, and waited forever.
	watched := t.TempDir()
	if err := os.WriteFile(filepath.Join(watched, "running.crosstalk"), envText(t, "Receive runs"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := folder.New(watched, testOptions())
	rec := newRecorder()
	start(t, f, rec.handle)
	rec.wait(t, 1, 5*time.Second)
	// Bounded: a second Receive that is let run fails the test instead
	// of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Receive(ctx, newRecorder().handle); !errors.Is(err, folder.ErrBusy) {
		t.Errorf("second Receive = %v, want ErrBusy", err)
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := folder.New(dir, nil)
	ctx := context.Background()
	tests := []struct {
		to, id string
	}{
		{"CLAUDE", "01J9ZX3C4M8S2Q7W5E6R1T0Y9U"},
		{"../../etc", "../passwd"},
		{"claude://session/abc", "sha256:0123abcd"},
		{"..", "..."},
		{"a/b", "a_b"},
		{"CON", "nul"},
		{strings.Repeat("x", 300), strings.Repeat("é", 100)},
		{"bob@example.test", ""},
	}
	for _, tt := range tests {
		t.Run(tt.to+"/"+tt.id, func(t *testing.T) {
			text := envText(t, "to "+tt.to)
			if err := f.Send(ctx, tt.to, tt.id, text); err != nil {
				t.Fatalf("Send(%q, %q) = %v", tt.to, tt.id, err)
			}
			rdir := filepath.Join(dir, folder.OutboxDir, folder.SafeName(tt.to))
			if filepath.Dir(rdir) != filepath.Join(dir, folder.OutboxDir) {
				t.Fatalf("receiver dir %s is not directly in the outbox", rdir)
			}
			files := readAll(t, rdir)
			found := false
			for _, b := range files {
				found = found || bytes.Equal(b, text)
			}
			if !found {
				t.Errorf("Send(%q, %q): text not found in %s", tt.to, tt.id, rdir)
			}
			if ms, _ := filepath.Glob(filepath.Join(rdir, ".*")); len(ms) > 0 {
				t.Errorf("temp files left behind: %v", ms)
			}
		})
	}
	// Idempotent: the same id replaces its file.
	if err := f.Send(ctx, "BOB", "ID1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := f.Send(ctx, "BOB", "ID1", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, filepath.Join(dir, folder.OutboxDir, "BOB")); len(got) != 1 || string(got[0]) != "second" {
		t.Errorf("after two Sends of one id the outbox holds %q, want one file \"second\"", got)
	}
	// Permanent failures.
	for _, c := range []struct {
		to   string
		text []byte
	}{{"", []byte("x")}, {"BOB", make([]byte, folder.MaxFileSize+1)}} {
		if err := f.Send(ctx, c.to, "id", c.text); !errors.Is(err, transports.ErrPermanent) {
			t.Errorf("Send(%q, %d bytes) = %v, want ErrPermanent", c.to, len(c.text), err)
		}
	}
	// A symbolic link planted as a receiver's directory is not written through.
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, folder.OutboxDir, "EVE")); err != nil {
		t.Fatal(err)
	}
	if err := f.Send(ctx, "EVE", "id", []byte("x")); err == nil {
		t.Errorf("Send through a symlinked receiver dir succeeded")
	}
	if ms, _ := filepath.Glob(filepath.Join(elsewhere, "*")); len(ms) > 0 {
		t.Errorf("Send wrote through the symlink: %v", ms)
	}
}

func TestSafeName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"CLAUDE", "CLAUDE"},
		{"01J9ZX3C4M8S2Q7W5E6R1T0Y9U", "01J9ZX3C4M8S2Q7W5E6R1T0Y9U"},
		{"bob@example.test", "bob@example.test"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := folder.SafeName(tt.in); got != tt.want {
			t.Errorf("SafeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	inputs := []string{".", "..", "...", "../x", "a/b", "a_b", `a\b`, ".hidden", "x.", "a..b", "CON", "con.txt",
		"COM1", strings.Repeat("y", 65), strings.Repeat("y", 66), "ü", "\x00", "a b", "claude://s/1"}
	seen := map[string]string{}
	for _, in := range inputs {
		got := folder.SafeName(in)
		if got == "" || len(got) > 64 || strings.HasPrefix(got, ".") || strings.HasSuffix(got, ".") ||
			strings.Contains(got, "..") || strings.ContainsAny(got, `/\ :`) {
			t.Errorf("SafeName(%q) = %q, not a safe name", in, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("SafeName(%q) = SafeName(%q) = %q", in, prev, got)
		}
		seen[got] = in
	}
}

// TestSendOutboxSymlink: anyone who may drop files into the watched
// directory could plant DIR/outbox itself as a symbolic link, and every
// receiver's envelopes were written wherever it pointed (a directory
// others read), each delivery recorded as delivered. The default outbox
// is not written through a link; an outbox the user configured may be
// one.
func TestSendOutboxSymlink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, folder.OutboxDir)); err != nil {
		t.Fatal(err)
	}
	if err := folder.New(dir, nil).Send(ctx, "BOB", "id", []byte("secret")); !errors.Is(err, transports.ErrPermanent) {
		t.Errorf("Send through a symlinked DIR/outbox = %v, want ErrPermanent", err)
	}
	// The same outbox configured by name.
	if err := folder.New(dir, &folder.Options{Outbox: filepath.Join(dir, "outbox")}).Send(ctx, "BOB", "id", []byte("secret")); !errors.Is(err, transports.ErrPermanent) {
		t.Errorf("Send through a symlinked DIR/outbox (configured) = %v, want ErrPermanent", err)
	}
	if ms, _ := filepath.Glob(filepath.Join(elsewhere, "*")); len(ms) > 0 {
		t.Errorf("Send wrote through the symlinked outbox: %v", ms)
	}
	// A configured outbox elsewhere that is a link is the user's choice.
	link := filepath.Join(t.TempDir(), "out")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	if err := folder.New(dir, &folder.Options{Outbox: link}).Send(ctx, "BOB", "id", []byte("x")); err != nil {
		t.Errorf("Send to a configured outbox that is a link: %v", err)
	}
}

// TestUnmovableRefusedFileNotLookedAtEveryTick: a file refused on sight
// (here larger than MaxFileSize) whose move to failed/ fails — anyone who
// may drop files can drop a plain file named "failed" — was looked at,
// refused again and logged at ERROR on every tick (8 times a second by
// default) for as long as it stayed; it now waits like any other file
// that waits, and is moved once failed/ can be made.
func TestUnmovableRefusedFileNotLookedAtEveryTick(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	block := filepath.Join(dir, folder.FailedDir)
	if err := os.WriteFile(block, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.crosstalk")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, folder.MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	// A tick every 10 ms: on every tick, 1 s would be about 100 looks.
	opts := &folder.Options{Settle: 40 * time.Millisecond, Rescan: 2 * time.Second, Timeout: time.Minute}
	f := folder.New(dir, opts)
	rec := newRecorder()
	start(t, f, rec.handle)
	time.Sleep(time.Second)
	// Halving the quiet time: about a dozen looks in 1 s.
	if got := folder.Looks(f); got > 30 {
		t.Errorf("%d looks at a refused file that cannot be moved in 1 s, want at most 30", got)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	waitExists(t, filepath.Join(dir, folder.FailedDir, "big.crosstalk"), 5*time.Second)
	if len(rec.inbound()) != 0 {
		t.Errorf("the handler was called for a refused file")
	}
}

// TestStuckFileReplacedAlike: a file handled but not movable (processed/
// blocked) waits for a change, and without notifications a change was a
// new size or time: another file renamed over it with the same size and
// time was never handled. The file's identity counts now too.
func TestStuckFileReplacedAlike(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, folder.ProcessedDir), []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.crosstalk")
	first, second := envText(t, "body one"), envText(t, "body two")
	if len(first) != len(second) || bytes.Equal(first, second) {
		t.Fatalf("want two different texts of one size, got %d and %d bytes", len(first), len(second))
	}
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := folder.WithoutNotify(folder.New(dir, &folder.Options{Settle: 20 * time.Millisecond, Rescan: 200 * time.Millisecond, Timeout: time.Minute}))
	rec := newRecorder()
	start(t, f, rec.handle)
	rec.wait(t, 1, 3*time.Second)
	time.Sleep(200 * time.Millisecond) // the move failed: it waits for a change
	tmp := filepath.Join(dir, ".a.tmp")
	if err := os.WriteFile(tmp, second, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, 2, 3*time.Second)
	if !bytes.Equal(got[1].Data, second) {
		t.Errorf("second hand-over = %q, want the replacing file", got[1].Data)
	}
}
