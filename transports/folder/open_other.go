//go:build !unix

package folder

import (
	"io/fs"
	"os"
)

// openNoFollow opens path for reading. Without O_NOFOLLOW the caller's
// Lstat and the SameFile check after opening guard against a symbolic
// link swapped in.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

// linkCount returns 1: the platform does not report hard links portably.
func linkCount(fs.FileInfo) uint64 { return 1 }
