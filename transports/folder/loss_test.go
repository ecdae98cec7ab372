package folder_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/folder"
)

// dirNames lists the names in dir, without hidden ones.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if !de.IsDir() && !strings.HasPrefix(de.Name(), ".") {
			out = append(out, de.Name())
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAppendWhileHandled appends a second envelope to a file while the
// relay records the first (issue 12: it was moved to processed/ with the
// second envelope never read). The file is handed over again, whole, and
// only then moved.
func TestAppendWhileHandled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "log.crosstalk")
	second := envText(t, "appended while the first was recorded")
	var mu sync.Mutex
	var got []string
	h := func(ctx context.Context, in transports.Inbound) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(in.Data))
		if len(got) == 1 {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Errorf("appending: %v", err)
				return nil, nil
			}
			f.Write(second)
			f.Close()
		}
		return nil, nil
	}
	if err := writeRenamed(dir, "log.crosstalk", envText(t, "first")); err != nil {
		t.Fatal(err)
	}
	start(t, folder.New(dir, testOptions()), h)
	moved := filepath.Join(dir, folder.ProcessedDir, "log.crosstalk")
	waitExists(t, moved, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if last := got[len(got)-1]; !strings.Contains(last, string(second)) {
		t.Errorf("handed over %d times, last %q; want the appended envelope handed over", len(got), last)
	}
	if data := mustRead(t, moved); !strings.Contains(data, string(second)) {
		t.Errorf("processed/log.crosstalk = %q, want both envelopes", data)
	}
}

// TestLongNames drops files whose names are as long as the file system
// allows (issue 12: a name of 250+ bytes was recorded but stayed in the
// folder forever, as no name with a suffix or .error fits). Each ends in
// processed/ or failed/, under a shortened name, with its .error file
// where it has one; a second file of the same long name does not
// overwrite the first.
func TestLongNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := newRecorder()
	start(t, folder.New(dir, testOptions()), rec.handle)
	ascii := strings.Repeat("a", 255-len(".crosstalk")) + ".crosstalk"
	multi := strings.Repeat("é", 122) + ".crosstalk" // 254 bytes
	refused := strings.Repeat("b", 240) + "\x01.crosstalk"
	for _, n := range []string{ascii, multi, refused} {
		if len(n) < 250 || len(n) > 255 {
			t.Fatalf("test name of %d bytes", len(n))
		}
	}
	for i, name := range []string{ascii, multi, ascii, refused} {
		// Written under a short hidden name, then renamed: the usual
		// temp name would be too long itself.
		tmp := filepath.Join(dir, ".long.tmp")
		if err := os.WriteFile(tmp, envText(t, "long name "+string(rune('0'+i))), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the long-named file leaves the folder", 5*time.Second, func() bool { return len(dirNames(t, dir)) == 0 })
	}
	rec.wait(t, 3, time.Second)
	processed := dirNames(t, filepath.Join(dir, folder.ProcessedDir))
	if len(processed) != 3 {
		t.Fatalf("processed/ = %q, want three files", processed)
	}
	bodies := map[string]bool{}
	for _, n := range processed {
		if len(n)+len(folder.ErrorSuffix) > 255 {
			t.Errorf("processed/%s: %d bytes, no room for its .error file", n, len(n))
		}
		bodies[mustRead(t, filepath.Join(dir, folder.ProcessedDir, n))] = true
	}
	if len(bodies) != 3 {
		t.Errorf("processed/ holds %d distinct files, want 3 (none overwritten)", len(bodies))
	}
	// The .error file is written just after the move.
	waitFor(t, "the refused file's .error", 5*time.Second, func() bool { return len(dirNames(t, filepath.Join(dir, folder.FailedDir))) >= 2 })
	failed := dirNames(t, filepath.Join(dir, folder.FailedDir))
	if len(failed) != 2 || !strings.HasSuffix(failed[0]+failed[1], folder.ErrorSuffix) {
		t.Errorf("failed/ = %q, want the refused file and its .error", failed)
	}
}

// TestReplacedWhileHandled replaces the file, while the relay records it,
// by another file of the same size and modification time (a rename-save
// by a tool that keeps times: mv, cp -p, tar, rsync -t). The new file is
// a different file and was never read: it is handed over too, not moved
// to processed/ unread.
func TestReplacedWhileHandled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.crosstalk")
	first, second := envText(t, "the first version"), envText(t, "the other version")
	if len(first) != len(second) {
		t.Fatalf("the two texts differ in size: %d, %d", len(first), len(second))
	}
	var mu sync.Mutex
	var got []string
	h := func(ctx context.Context, in transports.Inbound) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(in.Data))
		if len(got) == 1 {
			fi, err := os.Stat(path)
			if err != nil {
				t.Errorf("stat: %v", err)
				return nil, nil
			}
			tmp := filepath.Join(dir, ".x.tmp")
			if err := os.WriteFile(tmp, second, 0o644); err != nil {
				t.Errorf("writing: %v", err)
			}
			if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
				t.Errorf("chtimes: %v", err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Errorf("rename: %v", err)
			}
		}
		return nil, nil
	}
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	stop := start(t, folder.New(dir, testOptions()), h)
	waitFor(t, "the folder empty", 5*time.Second, func() bool { return len(dirNames(t, dir)) == 0 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != string(second) {
		t.Errorf("handed over %d times (%q); want the replacement handed over too", len(got), got)
	}
}

// TestIncompleteReplacedByComplete: an incomplete file, once read, is
// replaced by a complete file of the same size and modification time. It
// is a different file: it is read and handed over, not refused after the
// timeout as "never completed" unread.
func TestIncompleteReplacedByComplete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.crosstalk")
	complete := envText(t, "complete")
	incomplete := append([]byte(nil), complete...)
	copy(incomplete[len(incomplete)-len("[[END]]\n"):], "[[EN]]\n\n")
	if err := os.WriteFile(path, incomplete, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := newRecorder()
	start(t, folder.New(dir, opts), rec.handle)
	waitFor(t, "the incomplete file read", 5*time.Second, func() bool { return strings.Contains(logs.String(), "incomplete") })
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".x.tmp")
	if err := os.WriteFile(tmp, complete, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the complete replacement was never handed over")
	}
}
