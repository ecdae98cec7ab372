package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLedgerExportFile checks `crosstalk ledger export FILE`: the file is
// private (0600, like the ledger and its backups: it holds every
// envelope), and an export that fails half way leaves no partial file that
// an import would take for a whole one, and an earlier export by that name
// as it was.
func TestLedgerExportFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	lines := `{"v":1,"id":"01A","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}
{"v":1,"id":"01B","ts":"2026-11-01T00:00:00.000Z","seq":2,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}
{"v":1,"id":"01C","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"b","scope_key":"","by":"x","data":{}}
`
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ledger", "import", "--ledger", db}, strings.NewReader(lines), &stdout, &stderr); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, stderr.String())
	}
	out := filepath.Join(dir, "export.jsonl")
	if code := run(t.Context(), []string{"ledger", "export", "--ledger", db, out}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("export: exit %d: %s", code, stderr.String())
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("export file mode = %v, want 0600", st.Mode().Perm())
	}
	good, _ := os.ReadFile(out)
	if string(good) != lines {
		t.Fatalf("export =\n%s\nwant\n%s", good, lines)
	}

	// Group b claims an event the ledger lacks: the export fails after
	// writing group a.
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`UPDATE groups SET last_seq = 2 WHERE group_id = 'b'`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	for _, name := range []string{out, filepath.Join(dir, "new.jsonl")} {
		stderr.Reset()
		if code := run(t.Context(), []string{"ledger", "export", "--ledger", db, name}, strings.NewReader(""), &stdout, &stderr); code != exitFailure {
			t.Fatalf("export of a broken ledger: exit %d, want %d", code, exitFailure)
		}
		got, err := os.ReadFile(name)
		switch {
		case name == out && string(got) != string(good):
			t.Errorf("after a failed export, %s = %q, want the earlier export kept", name, got)
		case name != out && err == nil:
			t.Errorf("a failed export left %s: %q", name, got)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "partial") {
			t.Errorf("a failed export left %s", e.Name())
		}
	}
}

// TestLedgerImportMissingFile: an import whose input file does not exist
// fails before it opens the ledger, so a mistyped name leaves no new empty
// ledger (nor JetStream stream) behind.
func TestLedgerImportMissingFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"ledger", "import", "--ledger", db, filepath.Join(dir, "no-such.jsonl")}, strings.NewReader(""), &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "no-such.jsonl") {
		t.Fatalf("import of a missing file: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("import of a missing file created %s", db)
	}
}

// TestLedgerImportBOM: an export saved by an editor that starts files
// with a UTF-8 byte order mark imports like the export itself (before,
// line 1 was "invalid character 'ï'"), with CRLF line ends too.
func TestLedgerImportBOM(t *testing.T) {
	dir := t.TempDir()
	lines := "\ufeff" + `{"v":1,"id":"01A","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}` + "\r\n" +
		`{"v":1,"id":"01B","ts":"2026-11-01T00:00:00.000Z","seq":2,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}` + "\r\n"
	file := filepath.Join(dir, "export.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"ledger", "import", "--ledger", filepath.Join(dir, "a.db"), file},
		{"ledger", "import", "--ledger", filepath.Join(dir, "b.db")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, strings.NewReader(lines), &stdout, &stderr); code != exitOK || !strings.Contains(stderr.String(), "2 events") {
			t.Errorf("crosstalk %v of an export with a BOM: exit %d: %s", args, code, stderr.String())
		}
	}
}

// TestLedgerImportDirectory: ledger import DIR is refused before the
// ledger is opened, so no empty ledger is left behind (as for a missing
// file).
func TestLedgerImportDirectory(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "new.db")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ledger", "import", "--ledger", db, dir}, strings.NewReader(""), &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "directory") {
		t.Errorf("ledger import DIR: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("ledger import DIR created the ledger")
	}
}

// TestLedgerImportFailureLeavesNothing: an import that fails into a ledger
// that did not exist removes the file (and its -wal, -shm) and the
// directories it made — it left an empty or part-filled ledger, which the
// relay would then start on; an existing ledger stays, with what it held.
func TestLedgerImportFailureLeavesNothing(t *testing.T) {
	good := `{"v":1,"id":"01A","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}` + "\n"
	for _, tc := range []struct {
		name, input string
	}{
		{"garbage", "garbage\n"},
		{"good line then garbage", good + "garbage\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "new", "deeper", "ledger.db")
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), []string{"ledger", "import", "--ledger", db}, strings.NewReader(tc.input), &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "line") {
				t.Fatalf("failed import: exit %d, %q", code, stderr.String())
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
				t.Errorf("a failed import into a new ledger left %v", left)
			}

			// An existing ledger keeps its file and its events.
			existing := filepath.Join(dir, "ledger.db")
			if code := run(t.Context(), []string{"ledger", "import", "--ledger", existing}, strings.NewReader(good), &stdout, &stderr); code != exitOK {
				t.Fatalf("import: exit %d, %q", code, stderr.String())
			}
			if code := run(t.Context(), []string{"ledger", "import", "--ledger", existing}, strings.NewReader(tc.input), &stdout, &stderr); code != exitFailure {
				t.Fatalf("failed import into an existing ledger: exit %d", code)
			}
			stdout.Reset()
			if code := run(t.Context(), []string{"ledger", "export", "--ledger", existing}, strings.NewReader(""), &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), `"id":"01A"`) {
				t.Errorf("the existing ledger after a failed import: exit %d, export %q", code, stdout.String())
			}
		})
	}
}

// TestLedgerExportToDirectory: an export named as a directory fails at
// once, saying so, and leaves no partial file beside it — before, it
// wrote the whole export into a temporary file beside the directory and
// then failed to rename it with "file exists".
func TestLedgerExportToDirectory(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	line := `{"v":1,"id":"01A","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}` + "\n"
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ledger", "import", "--ledger", db}, strings.NewReader(line), &stdout, &stderr); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, stderr.String())
	}
	target := filepath.Join(dir, "exports")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"ledger", "export", "--ledger", db, target}, strings.NewReader(""), &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "is a directory") {
		t.Errorf("export to a directory: exit %d, %q; want %d and \"is a directory\"", code, stderr.String(), exitFailure)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) > 0 {
		t.Errorf("export to a directory left %v", left)
	}
}

// TestLedgerImportKeepsOrphanedWAL: an import into a ledger file that is
// missing beside a WAL that is there (a ledger moved without it) fails,
// and the WAL it did not create stays — the cleanup of a failed import
// into a new ledger removed it.
func TestLedgerImportKeepsOrphanedWAL(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	if err := os.WriteFile(db+"-wal", []byte("what is left of a ledger"), 0o600); err != nil {
		t.Fatal(err)
	}
	line := `{"v":1,"id":"01A","ts":"2026-11-01T00:00:00.000Z","seq":1,"kind":"note","group_id":"a","scope_key":"","by":"x","data":{}}` + "\n"
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ledger", "import", "--ledger", db}, strings.NewReader(line), &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "write-ahead log") {
		t.Fatalf("import beside an orphaned WAL: exit %d, %q; want %d naming the WAL", code, stderr.String(), exitFailure)
	}
	if b, err := os.ReadFile(db + "-wal"); string(b) != "what is left of a ledger" {
		t.Errorf("after the failed import the WAL is %q, %v; want it kept", b, err)
	}
}
