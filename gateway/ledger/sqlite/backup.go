package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrBackupExists is returned by Backup when its destination exists: a
// backup never overwrites a file.
var ErrBackupExists = errors.New("sqlite: backup destination exists")

// BackupInfo describes a finished backup.
type BackupInfo struct {
	// Path is the absolute name of the backup file.
	Path string
	// Events and Groups count what it holds.
	Events, Groups int64
	// Bytes is its size.
	Bytes int64
}

// Backup copies the ledger database at src into a new file dest, online:
// relays (in this process or others) may keep appending while it runs.
// The copy is VACUUM INTO run in one read transaction, so it is a
// consistent snapshot holding every event committed before Backup began
// (and perhaps some committed after), compacted, and a database that Open
// accepts as is. It is written to a temporary file beside dest (mode
// 0600), checked (PRAGMA quick_check, schema version), fsynced and only
// then renamed to dest: dest is never a partial copy. dest must not exist
// (ErrBackupExists); src must be a ledger (a schema version this program
// reads). Backup changes nothing in src.
func Backup(ctx context.Context, src, dest string) (BackupInfo, error) {
	info := BackupInfo{}
	srcAbs, err := filepath.Abs(src)
	if err != nil {
		return info, fmt.Errorf("sqlite: backup %q: %w", src, err)
	}
	if _, err := os.Stat(srcAbs); err != nil {
		return info, fmt.Errorf("sqlite: backup %s: %w", srcAbs, err)
	}
	if info.Path, err = filepath.Abs(dest); err != nil {
		return info, fmt.Errorf("sqlite: backup to %q: %w", dest, err)
	}
	if fi, err := os.Lstat(info.Path); err == nil && fi.IsDir() {
		// `backup /backups/` meant a file in it: say so, not "exists".
		return info, fmt.Errorf("sqlite: backup to %s: is a directory; name the new backup file in it", info.Path)
	} else if err == nil {
		return info, fmt.Errorf("%w: %s", ErrBackupExists, info.Path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("sqlite: backup to %s: %w", info.Path, err)
	}
	// VACUUM INTO only reads src (SQLite refuses it under query_only, which
	// would have said so). The busy timeout covers a checkpoint of the
	// relay.
	db, err := sql.Open("sqlite", dsn(srcAbs, fmt.Sprintf("_pragma=busy_timeout(%d)", DefaultBusyTimeout.Milliseconds())))
	if err != nil {
		return info, fmt.Errorf("sqlite: backup %s: %w", srcAbs, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := checkLedger(ctx, db, srcAbs); err != nil {
		return info, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(info.Path), "."+filepath.Base(info.Path)+".partial-*")
	if err != nil {
		return info, fmt.Errorf("sqlite: backup to %s: %w", info.Path, err)
	}
	tmpName := tmp.Name()
	tmp.Close() // empty, 0600: VACUUM INTO fills an empty file
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmpName); err != nil {
		return info, fmt.Errorf("sqlite: backup %s: vacuum into %s: %w", srcAbs, tmpName, err)
	}
	if err := verifyBackup(ctx, tmpName, &info); err != nil {
		return info, err
	}
	if err := syncFile(tmpName); err != nil {
		return info, fmt.Errorf("sqlite: backup to %s: %w", info.Path, err)
	}
	// Link, not rename: rename would replace a dest created meanwhile.
	if err := os.Link(tmpName, info.Path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return info, fmt.Errorf("%w: %s", ErrBackupExists, info.Path)
		}
		return info, fmt.Errorf("sqlite: backup to %s: %w", info.Path, err)
	}
	done = true
	os.Remove(tmpName)
	return info, syncDir(filepath.Dir(info.Path))
}

// checkLedger refuses a database that is not a ledger this program reads.
func checkLedger(ctx context.Context, db *sql.DB, path string) error {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqlite: %s: %w", path, err)
	}
	switch {
	case version == 0:
		return fmt.Errorf("sqlite: %s is not a crosstalk ledger (no schema)", path)
	case version > schemaVersion:
		return fmt.Errorf("sqlite: %s: schema version %d is newer than this program's %d: %s", path, version, schemaVersion, newerHint)
	}
	return nil
}

// verifyBackup checks the copy's integrity and counts what it holds.
func verifyBackup(ctx context.Context, path string, info *BackupInfo) error {
	db, err := sql.Open("sqlite", dsn(path, "_pragma=query_only(1)"))
	if err != nil {
		return fmt.Errorf("sqlite: checking backup %s: %w", path, err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return fmt.Errorf("sqlite: checking backup %s: %w", path, err)
	}
	if !strings.EqualFold(res, "ok") {
		return fmt.Errorf("sqlite: checking backup %s: quick_check: %s", path, res)
	}
	if err := checkLedger(ctx, db, path); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM groups)").Scan(&info.Events, &info.Groups); err != nil {
		return fmt.Errorf("sqlite: checking backup %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("sqlite: checking backup %s: %w", path, err)
	}
	info.Bytes = st.Size()
	return nil
}

// syncFile fsyncs a file by name.
func syncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
