//go:build unix

package filelock

import (
	"os"
	"syscall"
)

// Lock takes an exclusive flock on path (created if needed) and
// returns the function that releases it. flock locks belong to the open
// file, so two goroutines of one process exclude each other too.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
