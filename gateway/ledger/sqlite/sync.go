package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// committed is one committed write transaction waiting for the fsync that
// makes it durable; its callers are answered after that fsync.
type committed struct {
	batch  []*op
	errs   []error  // each op's own outcome
	groups []string // groups appended to, whose followers to wake
}

// ErrBroken is wrapped by the error of every write whose fsync of the WAL
// failed, and of every write after it: the Store must be closed and
// opened again.
var ErrBroken = errors.New("the ledger's write-ahead log could not be synced to disk; close and reopen the store")

// syncer is the goroutine that makes commits durable when the writer has
// more work. The writer commits with synchronous=NORMAL (no fsync inside
// COMMIT); when operations are waiting, it hands the committed transaction
// here and goes on with them, and syncer fsyncs the WAL file, answers the
// transaction's callers, wakes followers, and tells the writer it is free.
// So the fsync overlaps the next transaction (see writer and the package
// documentation). There is at most one commit waiting for its fsync.
func (s *Store) syncer() {
	defer close(s.done)
	for c := range s.toSync {
		s.finish(c)
		s.synced <- struct{}{}
	}
}

// finish fsyncs the WAL, then answers c's callers and wakes the followers
// of its groups. The writer calls it itself when nothing else is queued,
// the syncer otherwise; never both at once.
//
// After a failed fsync the store is broken: the kernel may have dropped
// the dirty pages, and retrying could report data durable that is not.
// The transaction's callers and every later write fail with ErrBroken.
func (s *Store) finish(c committed) {
	if s.broken.Load() == nil {
		t0 := time.Now()
		err := s.wal.sync()
		took := int64(time.Since(t0))
		s.lastSync.Store(took)
		if err != nil {
			s.log.Error("sqlite: fsync of the WAL failed; refusing further writes", "path", s.path, "err", err)
			berr := fmt.Errorf("sqlite: %w: %w", ErrBroken, err)
			s.broken.CompareAndSwap(nil, &berr)
		} else {
			s.syncTime.Add(took) // before the count: see Stats
			s.syncs.Add(1)
		}
	}
	var fail error
	if p := s.broken.Load(); p != nil {
		fail = *p
	}
	notified := make(map[string]bool)
	if len(c.groups) > 0 {
		s.notes.notify(logWake)
	}
	for _, g := range c.groups {
		if !notified[g] {
			notified[g] = true
			s.notes.notify(g)
		}
	}
	for i, o := range c.batch {
		if fail != nil && c.errs[i] == nil {
			c.errs[i] = fail
		}
		o.done <- c.errs[i]
	}
}

// walFile fsyncs the database's WAL file ("<db>-wal"), kept open.
//
// SQLite deletes the WAL when the last connection to the database closes
// (after checkpointing it into the database with an fsync of its own), and
// creates a new one later; fsyncing the old file then would make nothing
// durable. The Store keeps a read connection open for its whole life, so
// that cannot happen while it is open. As a second line of defence, sync
// checks at most once per checkEvery that the open file still has a name,
// and follows the name to the new file when not: the check is an fstat,
// which between a write and its fsync costs as much as half an fsync on
// ext4, so it is not made every time.
//
// The WAL is never locked by SQLite (its locks are on the database and
// -shm files), so opening and closing it here releases no lock of theirs.
type walFile struct {
	path       string
	f          *os.File
	checked    time.Time
	checkEvery time.Duration
	// flush is the fsync itself; tests replace it.
	flush func(*os.File) error
}

func newWALFile(dbPath string) *walFile {
	return &walFile{path: dbPath + "-wal", flush: datasync, checkEvery: time.Second}
}

// sync flushes everything written to the WAL so far to stable storage.
func (w *walFile) sync() error {
	if w.f == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	if err := w.flush(w.f); err != nil {
		return fmt.Errorf("sqlite: fsync %s: %w", w.path, err)
	}
	if now := time.Now(); now.Sub(w.checked) >= w.checkEvery {
		w.checked = now
		if unlinked(w.f) {
			// What was just written went to the new file.
			w.f.Close()
			w.f = nil
			if err := w.open(); err != nil {
				return err
			}
			if err := w.flush(w.f); err != nil {
				return fmt.Errorf("sqlite: fsync %s: %w", w.path, err)
			}
		}
	}
	return nil
}

// open opens the WAL by name and makes its directory entry durable, as
// SQLite does when it creates the file with synchronous=FULL.
func (w *walFile) open() error {
	f, err := os.OpenFile(w.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlite: WAL: %w", err)
	}
	if err := syncDir(filepath.Dir(w.path)); err != nil {
		f.Close()
		return err
	}
	w.f = f
	return nil
}

func (w *walFile) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// syncDir fsyncs a directory, making the names created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sqlite: fsync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sqlite: fsync directory %s: %w", dir, err)
	}
	return nil
}
