package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// syncer is the goroutine that makes commits durable. The writer commits
// with synchronous=NORMAL (no fsync inside COMMIT) and hands each committed
// transaction here, one at a time; syncer fsyncs the WAL file, then
// answers its callers, wakes followers, and tells the writer it is free.
// While it fsyncs, the writer runs the next operations in the next
// transaction (see writer and the package documentation).
//
// After a failed fsync the store is broken: the kernel may have dropped
// the dirty pages, and retrying could report data durable that is not.
// Every waiting and later write fails with ErrBroken.
func (s *Store) syncer() {
	defer close(s.done)
	for c := range s.toSync {
		if s.broken.Load() == nil {
			if err := s.wal.sync(); err != nil {
				s.log.Error("sqlite: fsync of the WAL failed; refusing further writes", "path", s.path, "err", err)
				berr := fmt.Errorf("sqlite: %w: %w", ErrBroken, err)
				s.broken.CompareAndSwap(nil, &berr)
			} else {
				s.syncs.Add(1)
			}
		}
		var fail error
		if p := s.broken.Load(); p != nil {
			fail = *p
		}
		notified := make(map[string]bool)
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
		s.synced <- struct{}{}
	}
}

// walFile fsyncs the database's WAL file ("<db>-wal"). It keeps the file
// open, and reopens it when the name points at another file: SQLite
// deletes the WAL when the last connection closes (after checkpointing it
// into the database with an fsync of its own) and creates a new one later.
// The WAL is never locked by SQLite (its locks are on the database and
// -shm files), so opening and closing it here releases no lock of theirs.
type walFile struct {
	path string
	f    *os.File
	// flush is the fsync itself; tests replace it.
	flush func(*os.File) error
}

func newWALFile(dbPath string) *walFile {
	return &walFile{path: dbPath + "-wal", flush: (*os.File).Sync}
}

// sync flushes everything written to the WAL so far to stable storage.
func (w *walFile) sync() error {
	fi, err := os.Stat(w.path)
	if err != nil {
		return fmt.Errorf("sqlite: WAL: %w", err)
	}
	if w.f != nil {
		cur, err := w.f.Stat()
		if err != nil || !os.SameFile(fi, cur) {
			w.f.Close()
			w.f = nil
		}
	}
	if w.f == nil {
		f, err := os.OpenFile(w.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("sqlite: WAL: %w", err)
		}
		// A new WAL's directory entry must be durable too, as SQLite
		// does when it creates the file with synchronous=FULL.
		if err := syncDir(filepath.Dir(w.path)); err != nil {
			f.Close()
			return err
		}
		w.f = f
	}
	if err := w.flush(w.f); err != nil {
		return fmt.Errorf("sqlite: fsync %s: %w", w.path, err)
	}
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
