package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// goalImportPerSec is issue 13's goal for `crosstalk ledger import` into
// SQLite, on a million events.
const goalImportPerSec = 100_000

// ImportOptions configure Import.
type ImportOptions struct {
	// Events is how many events the generated export holds.
	Events int
	// Again also times importing the same file a second time, when every
	// event is present already (a resumed import).
	Again bool
	// File is the JSON Lines export to import. When it does not exist,
	// Import generates Events events into it and keeps it (so that
	// `crosstalk ledger import` can be timed on the same file); "" means
	// a temporary file, removed afterwards.
	File string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// ImportResult is the outcome of Import (`crosstalk-bench import`).
type ImportResult struct {
	Machine Machine `json:"machine"`
	File    string  `json:"file,omitempty"`
	Events  int     `json:"events"`
	Bytes   int64   `json:"bytes"`
	// First imports the file into a new ledger, Again (with
	// ImportOptions.Again) the same file once more: every event is then
	// already present and skipped (a resumed import).
	First ImportRun  `json:"first"`
	Again *ImportRun `json:"again,omitempty"`
	// LedgerBytes is the size of the database file after the imports.
	LedgerBytes int64   `json:"ledger_bytes"`
	Goal        float64 `json:"goal_events_per_second"`
}

// ImportRun is one timed import.
type ImportRun struct {
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"events_per_second"`
	MBPerS  float64 `json:"mb_per_second"`
	// Commits is the number of write transactions (each fsynced).
	Commits int64 `json:"commits"`
}

// Import times `crosstalk ledger import` of a JSON Lines export into a new
// SQLite ledger: the ledger is opened as the command opens it
// (server.OpenLedger) and fed by ledger.Import from the file, Close
// included (everything is durable when the clock stops). The export holds
// the realistic mix of History (generated before the clock starts).
func Import(ctx context.Context, o ImportOptions) (*ImportResult, error) {
	if o.Events < 1 && o.File == "" {
		return nil, errors.New("bench import: want at least 1 event")
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	tmp, err := os.MkdirTemp("", "crosstalk-bench-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &ImportResult{Machine: machine(tmp), File: o.File, Goal: goalImportPerSec}
	file := o.File
	if file == "" {
		file = filepath.Join(tmp, "export.jsonl")
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(progress, "bench import: generating %d events into %s\n", o.Events, file)
		if err := writeHistory(file, o.Events); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	res.Bytes = fi.Size()
	db := filepath.Join(tmp, "ledger.db")
	runs := []*ImportRun{&res.First}
	if o.Again {
		res.Again = &ImportRun{}
		runs = append(runs, res.Again)
	}
	for i, run := range runs {
		fmt.Fprintf(progress, "bench import: import %d of %d (%s)\n", i+1, len(runs), map[bool]string{true: "new ledger", false: "every event present"}[i == 0])
		n, err := timeImport(ctx, db, file, run)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			res.Events = n
		} else if n != res.Events {
			return nil, fmt.Errorf("bench import: the second import counted %d events, the first %d", n, res.Events)
		}
		run.PerSec = float64(n) / run.Seconds
		run.MBPerS = float64(res.Bytes) / 1e6 / run.Seconds
		fmt.Fprintf(progress, "bench import: %d events in %.2f s: %.0f events/s\n", n, run.Seconds, run.PerSec)
	}
	if fi, err := os.Stat(db); err == nil {
		res.LedgerBytes = fi.Size()
	}
	return res, nil
}

// timeImport imports file into the SQLite ledger db as `crosstalk ledger
// import` does and records the time, Close included, in run.
func timeImport(ctx context.Context, db, file string, run *ImportRun) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	st, err := server.OpenLedger(ctx, server.LedgerOptions{Spec: db})
	if err != nil {
		return 0, err
	}
	n, err := ledger.Import(ctx, st, f)
	if s, ok := st.(*sqlite.Store); ok {
		run.Commits = s.Stats().Commits
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	run.Seconds = time.Since(start).Seconds()
	if err != nil {
		return n, fmt.Errorf("bench import: %w", err)
	}
	return n, nil
}

// writeHistory writes n generated events (generateHistory) to the file
// at path as JSON Lines.
func writeHistory(path string, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = generateHistory(bw, n)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// Print writes the result as a table.
func (r *ImportResult) Print(w io.Writer) {
	fmt.Fprintf(w, "crosstalk-bench import: %d events, %.0f MB of JSON Lines", r.Events, float64(r.Bytes)/1e6)
	if r.File != "" {
		fmt.Fprintf(w, " (%s)", r.File)
	}
	fmt.Fprintf(w, "\nmachine: %s, %d CPUs (GOMAXPROCS %d), %s %s\n\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.OS)
	line := func(name string, run ImportRun) {
		fmt.Fprintf(w, "%-28s %8.2f s  %9.0f events/s  %6.1f MB/s  %d commits\n", name, run.Seconds, run.PerSec, run.MBPerS, run.Commits)
	}
	line("into a new ledger", r.First)
	if r.Again != nil {
		line("again (every event present)", *r.Again)
	}
	verdict := "MISSED"
	if r.First.PerSec >= r.Goal {
		verdict = "met"
	}
	fmt.Fprintf(w, "\nledger file %.0f MB; import into a new ledger %.0f events/s (goal ≥ %.0f: %s)\n", float64(r.LedgerBytes)/1e6, r.First.PerSec, r.Goal, verdict)
}
