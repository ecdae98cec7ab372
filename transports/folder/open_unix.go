//go:build unix

package folder

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path for reading without following a symbolic link
// in its last element and without blocking on a FIFO swapped in after the
// Lstat.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// linkCount returns the number of hard links of the file fi describes, or
// 1 when the platform does not say.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
