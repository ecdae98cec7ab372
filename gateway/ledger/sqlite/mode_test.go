package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// TestOpenFileModes: a ledger Open creates is readable by its owner only —
// the file and the -wal and -shm files SQLite makes beside it with the
// file's mode (they were 0644: the ledger holds every message); an
// existing file keeps the mode it has.
func TestOpenFileModes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing os.FileMode // 0: no file before Open
		want     os.FileMode
	}{
		{"new", 0, 0o600},
		{"existing 0640", 0o640, 0o640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			if tc.existing != 0 {
				if err := os.WriteFile(path, nil, tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil { // whatever the umask
					t.Fatal(err)
				}
			}
			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Append(t.Context(), []ledger.Record{{Kind: "note", GroupID: "g", By: "x"}}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err) // the WAL files exist while the ledger is open
				}
				if got := fi.Mode().Perm(); got != tc.want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(p), got, tc.want)
				}
			}
		})
	}
}
