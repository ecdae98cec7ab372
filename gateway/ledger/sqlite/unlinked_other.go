//go:build !unix

package sqlite

import "os"

// unlinked reports whether f's file is no longer the one its name points
// at, or cannot be checked.
func unlinked(f *os.File) bool {
	cur, err := f.Stat()
	if err != nil {
		return true
	}
	named, err := os.Stat(f.Name())
	return err != nil || !os.SameFile(cur, named)
}
