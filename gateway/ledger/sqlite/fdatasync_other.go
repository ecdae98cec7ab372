//go:build !linux

package sqlite

import "os"

// datasync flushes f to stable storage with (*os.File).Sync: fsync(2), or
// F_FULLFSYNC on macOS.
func datasync(f *os.File) error { return f.Sync() }
