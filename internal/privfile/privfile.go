// Package privfile creates the files the relay keeps private: readable
// and writable by their owner only. It does not change the mode of a file
// that exists.
package privfile

import (
	"errors"
	"io/fs"
	"os"
)

// Create creates path, empty, with mode 0600 when it does not exist, and
// leaves an existing file as it is. Databases are created this way before
// SQLite opens them: SQLite gives the -wal and -shm files it makes the
// database file's mode.
func Create(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}
