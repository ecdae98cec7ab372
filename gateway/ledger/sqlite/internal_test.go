package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

func TestPragmas(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	tests := []struct {
		name   string
		reader bool
		q      string
		want   string
	}{
		{"writer journal_mode", false, "PRAGMA journal_mode", "wal"},
		{"writer synchronous", false, "PRAGMA synchronous", "2"}, // FULL
		{"writer busy_timeout", false, "PRAGMA busy_timeout", "5000"},
		{"writer user_version", false, "PRAGMA user_version", "1"},
		{"reader query_only", true, "PRAGMA query_only", "1"},
		{"reader journal_mode", true, "PRAGMA journal_mode", "wal"},
		{"reader busy_timeout", true, "PRAGMA busy_timeout", "5000"},
	}
	for _, tt := range tests {
		db := s.wdb
		if tt.reader {
			db = s.rdb
		}
		var got string
		if err := db.QueryRowContext(ctx, tt.q).Scan(&got); err != nil || got != tt.want {
			t.Errorf("%s: %s = %q, %v, want %q", tt.name, tt.q, got, err, tt.want)
		}
	}
	if _, err := s.rdb.ExecContext(ctx, `DELETE FROM events`); err == nil {
		t.Errorf("DELETE on the read pool succeeded, want a query_only error")
	}
}

// TestGroupCommit holds the writer inside one transaction while appends
// queue up, then checks that all of them share the next transaction.
func TestGroupCommit(t *testing.T) {
	const queued = 20
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int64
	now := func() time.Time {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return time.Now()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &Options{Now: now})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()

	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Append(ctx, []ledger.Record{rec}); err != nil {
			t.Errorf("Append() error = %v", err)
		}
	})
	<-entered // the writer is inside the first transaction
	for range queued {
		wg.Go(func() {
			if _, err := s.Append(ctx, []ledger.Record{rec}); err != nil {
				t.Errorf("Append() error = %v", err)
			}
		})
	}
	for len(s.queue) < queued {
		if ctx.Err() != nil {
			t.Fatalf("only %d appends queued", len(s.queue))
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	want := Stats{Commits: 2, Ops: 1 + queued, Events: 1 + queued}
	if got := s.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v (the queued appends in one commit)", got, want)
	}
}

// TestFailedOpIsolated checks that a failing operation is rolled back to
// its savepoint without affecting the others in its batch.
func TestFailedOpIsolated(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	rec := ledger.Record{Kind: "chat.message", GroupID: "g"}
	// An op that appends and then fails must leave no trace.
	err = s.submit(ctx, func(w *wtx) error {
		if _, err := w.append(rec); err != nil {
			return err
		}
		return ledger.ErrConflict
	})
	if err != ledger.ErrConflict {
		t.Fatalf("submit(failing op) = %v, want ErrConflict", err)
	}
	res, err := s.Append(ctx, []ledger.Record{rec})
	if err != nil || res[0].Event.Seq != 1 {
		t.Fatalf("Append() after a failed op = %+v, %v, want seq 1", res, err)
	}
	if gs, _ := s.Groups(ctx); len(gs) != 1 || gs[0].LastSeq != 1 {
		t.Errorf("Groups() = %+v, want g at seq 1", gs)
	}
}
