//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// unlinked reports whether f's file no longer has a name (its link count
// is 0: it was deleted, perhaps replaced), or cannot be checked. One fstat,
// no path lookup.
func unlinked(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink == 0
}
