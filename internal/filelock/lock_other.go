//go:build !unix

package filelock

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Lock creates path exclusively, waiting while another writer holds
// it, and returns the function that removes it. A lock file older than a
// minute is taken to be left over by a crashed writer.
func Lock(path string) (func(), error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, errors.New("timed out waiting for " + path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
