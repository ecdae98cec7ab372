package bench

import (
	"path/filepath"
	"testing"
)

// TestImport runs a small Import twice over the same kept file and checks
// that it counted every event, timed both imports, and reused the file.
// It checks no rate: that depends on the machine.
func TestImport(t *testing.T) {
	file := filepath.Join(t.TempDir(), "export.jsonl")
	for _, again := range []bool{true, false} {
		res, err := Import(t.Context(), ImportOptions{Events: 500, File: file, Again: again})
		if err != nil {
			t.Fatalf("Import(again %v) = %v", again, err)
		}
		if res.Events != 500 || res.Bytes == 0 || res.First.PerSec <= 0 || res.First.Commits == 0 || res.LedgerBytes == 0 {
			t.Errorf("Import(again %v) = %+v, want 500 events imported, timed, committed", again, res)
		}
		if (res.Again != nil) != again || again && (res.Again.PerSec <= 0 || res.Again.Commits == 0) {
			t.Errorf("Import(again %v).Again = %+v", again, res.Again)
		}
	}
}
