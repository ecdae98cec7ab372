package folder_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/transports/folder"
)

// TestLongNameErrorFile drops files whose names are as long as the file
// system allows and that fail: no envelope in them, a symbolic link. Each
// goes to failed/ with its .error file beside it, which names it. The
// .error file's temp name once ran past 255 bytes, so a long-named failed
// file got no .error at all, only a log line.
func TestLongNameErrorFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		why  string
	}{
		{"no envelope", func(t *testing.T, path string) {
			tmp := filepath.Join(filepath.Dir(path), ".long.tmp")
			if err := os.WriteFile(tmp, []byte("no envelope here\n[[END]]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}, "no envelope"},
		{"symlink", func(t *testing.T, path string) {
			if err := os.Symlink("/etc/passwd", path); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name := strings.Repeat("L", 255-len(".crosstalk")) + ".crosstalk"
			rec := newRecorder()
			start(t, folder.New(dir, testOptions()), rec.handle)
			tt.make(t, filepath.Join(dir, name))
			errFile := waitErrorFile(t, filepath.Join(dir, folder.FailedDir), 3*time.Second)
			msg := mustRead(t, errFile)
			if !strings.Contains(msg, tt.why) || !strings.Contains(msg, name) {
				t.Errorf(".error = %q, want the reason %q and the original name", msg, tt.why)
			}
		})
	}
}
