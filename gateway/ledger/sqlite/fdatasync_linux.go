package sqlite

import (
	"os"
	"syscall"
)

// datasync flushes f's data, and the metadata needed to read it back (its
// size), to stable storage: fdatasync(2), as SQLite syncs its WAL on Linux.
// Unlike fsync it does not force a journal commit for the modification
// time alone, which costs a commit more on ext4.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
