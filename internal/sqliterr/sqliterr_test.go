package sqliterr

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestDamaged: a file of garbage is damaged, wrapped or not; a missing
// table, a closed database and other errors are not.
func TestDamaged(t *testing.T) {
	query := func(path, q string) error {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = db.Exec(q)
		return err
	}
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	b := []byte("this is not a database, only some text over its first page ")
	if err := os.WriteFile(garbage, append(b, make([]byte, 8192)...), 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := query(garbage, "CREATE TABLE t(x)")
	noTable := query(filepath.Join(t.TempDir(), "ok.db"), "SELECT * FROM missing")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"not a database", notDB, true},
		{"wrapped", fmt.Errorf("open: %w", notDB), true},
		{"no such table", noTable, false},
		{"nil", nil, false},
		{"another error", errors.New("disk on fire"), false},
	} {
		if got := Damaged(tc.err); got != tc.want {
			t.Errorf("%s: Damaged(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
