package folder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crosstalk-go/crosstalk/transports"
)

// Send writes text to <outbox>/<to>/<id>.crosstalk atomically (temp file,
// fsync, rename, fsync of the directory). to and id are made safe with
// SafeName; an empty id names the file by a hash of the text. Writing the
// same id again replaces the file, so a retry delivers once. An empty
// receiver or a text larger than MaxFileSize is a permanent error
// (transports.ErrPermanent).
func (f *Folder) Send(ctx context.Context, to, id string, text []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rdir := SafeName(to)
	if rdir == "" {
		return fmt.Errorf("folder: send: %w: empty receiver", transports.ErrPermanent)
	}
	if len(text) > MaxFileSize {
		return fmt.Errorf("folder: send to %s: %w: text is %d bytes, larger than %d", to, transports.ErrPermanent, len(text), MaxFileSize)
	}
	name := SafeName(id)
	if name == "" {
		sum := sha256.Sum256(text)
		name = "sha256-" + hex.EncodeToString(sum[:16])
	}
	dir := filepath.Join(f.outbox, rdir)
	if f.inside {
		// Checked before MkdirAll, which would create the receiver's
		// directory through a link.
		if fi, err := os.Lstat(f.outbox); err == nil && !fi.IsDir() {
			return fmt.Errorf("folder: send to %s: %w: %s is not a directory (a symbolic link?)", to, transports.ErrPermanent, f.outbox)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("folder: send to %s: %w", to, err)
	}
	// MkdirAll follows a symbolic link planted as the receiver's directory
	// (or as the outbox when it is an entry of DIR, checked above: anyone
	// who may drop files into DIR could plant it); refuse to write through
	// it. An outbox elsewhere may be a link: the user's choice, as DIR is.
	if fi, err := os.Lstat(dir); err != nil {
		return fmt.Errorf("folder: send to %s: %w", to, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("folder: send to %s: %w: %s is not a directory (a symbolic link?)", to, transports.ErrPermanent, dir)
	}
	path := filepath.Join(dir, name+".crosstalk")
	if err := writeAtomic(path, text, 0o600); err != nil {
		return fmt.Errorf("folder: send to %s: %w", to, err)
	}
	f.log.Info("folder: wrote envelope", "to", to, "file", path)
	return nil
}

// writeAtomic writes data to path through a hidden temp file in the same
// directory: write, fsync, close, chmod, rename, fsync the directory. A
// reader sees the old file or the new one, never a part. The temp name
// keeps the start of the name, shortened (see shorten) so that with its
// dot and random suffix it stays within maxName however long path's
// name is: a .error beside a file of 250 bytes could not be written.
func writeAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+shorten(base, maxTempBase)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// maxTempBase bounds the part of a temp name taken from the final name:
// "." before it and ".tmp-" and up to 10 digits after it fill maxName.
const maxTempBase = maxName - len(".") - len(".tmp-") - 10

// syncDir makes a rename in dir durable where the platform allows it.
func syncDir(dir string) {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync() // not supported everywhere (Windows): best effort
	d.Close()
}
