package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// TestBackupUnderWrites takes a backup while writers append: the copy
// opens as a ledger, holds every event appended before the backup began,
// and each of its groups is a prefix of the live group, event for event.
func TestBackupUnderWrites(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ledger.db")
	s := openPath(t, src)
	defer s.Close()

	ctx, stop := context.WithCancel(t.Context())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked []ledger.Event
		n     atomic.Int64
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				res, err := s.Append(ctx, []ledger.Record{msg(fmt.Sprintf("g%d", (w+i)%3), fmt.Sprintf("w%d-%d", w, i))})
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, res[0].Event)
				mu.Unlock()
				n.Add(1)
			}
		})
	}
	for n.Load() < 200 { // appends under way when the backup starts
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	before := append([]ledger.Event(nil), acked...)
	mu.Unlock()
	dest := filepath.Join(dir, "backup", "ledger.db")
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		t.Fatal(err)
	}
	info, err := sqlite.Backup(t.Context(), src, dest)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup = %v", err)
	}
	if info.Events < int64(len(before)) || info.Groups != 3 {
		t.Errorf("Backup info = %+v, want ≥ %d events in 3 groups", info, len(before))
	}
	if st, err := os.Stat(dest); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("backup file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(dest)); len(ents) != 1 {
		t.Errorf("backup directory holds %v, want only the copy (no temporary, -wal or -shm file)", ents)
	}

	b := openPath(t, dest)
	defer b.Close()
	for _, want := range before {
		got, err := b.Get(t.Context(), want.ID)
		if err != nil || !ledger.Equal(got, want) {
			t.Fatalf("event %s acknowledged before the backup: %+v, %v in the copy", want.ID, got, err)
		}
	}
	gs, err := b.Groups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		copied := checkDense(t, b, g.ID)
		live, err := s.Range(t.Context(), g.ID, 0, nil, len(copied))
		if err != nil {
			t.Fatal(err)
		}
		for i := range copied {
			if !ledger.Equal(copied[i], live[i]) {
				t.Fatalf("group %s seq %d differs between the copy and the ledger", g.ID, copied[i].Seq)
			}
		}
	}
	// The copy is a ledger like any other: it takes appends.
	if _, err := b.Append(t.Context(), []ledger.Record{msg("g0", "after-restore")}); err != nil {
		t.Errorf("Append to the restored copy = %v", err)
	}
}

func TestBackupRefuses(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ledger.db")
	s := openPath(t, src)
	s.Close()
	exists := filepath.Join(dir, "exists.db")
	if err := os.WriteFile(exists, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	notLedger := filepath.Join(dir, "other.db")
	if err := os.WriteFile(notLedger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, dest string
		is              error
		say             string // in the error
	}{
		{"destination exists", src, exists, sqlite.ErrBackupExists, "exists"},
		{"source missing", filepath.Join(dir, "missing.db"), filepath.Join(dir, "b1.db"), os.ErrNotExist, ""},
		{"source not a ledger", notLedger, filepath.Join(dir, "b2.db"), nil, "not a crosstalk ledger"},
		{"destination directory missing", src, filepath.Join(dir, "no", "b3.db"), os.ErrNotExist, ""},
		// Not "exists", whose hint is to name a new file: the directory
		// was meant to hold it.
		{"destination a directory", src, dir, nil, "is a directory; name the new backup file in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlite.Backup(t.Context(), tc.src, tc.dest)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || tc.is == nil && errors.Is(err, sqlite.ErrBackupExists) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("Backup = %v, want an error wrapping %v, saying %q", err, tc.is, tc.say)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) > 0 {
		t.Errorf("failed backups left %v", left)
	}
	if b, _ := os.ReadFile(exists); string(b) != "keep me" {
		t.Errorf("Backup changed an existing file: %q", b)
	}
}
