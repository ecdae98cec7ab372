package privfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCreate: a new file is 0600 and empty; an existing one keeps its mode
// and content.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new")
	if err := Create(p); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Errorf("new file: %v, %v; want empty, 0600", fi.Mode(), err)
	}
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Create(old); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != "kept" {
		t.Errorf("existing file's content = %q, %v", b, err)
	}
	if fi, _ := os.Stat(old); fi.Mode().Perm() != 0o640 {
		t.Errorf("existing file's mode = %v, want 0640 kept", fi.Mode())
	}
	if err := Create(filepath.Join(dir, "no", "such", "dir")); err == nil {
		t.Error("Create in a missing directory succeeded")
	}
}
