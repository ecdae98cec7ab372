// Package sqliterr classifies the errors of the modernc.org/sqlite driver
// for the relay's two SQLite files, the ledger and the projection DB. It
// opens nothing and changes nothing.
package sqliterr

import (
	"errors"

	"modernc.org/sqlite"
)

// SQLite's primary result codes (https://sqlite.org/rescode.html) that
// Damaged looks for.
const (
	codeCorrupt = 11 // SQLITE_CORRUPT
	codeNotADB  = 26 // SQLITE_NOTADB
)

// Damaged reports whether err is SQLite's refusal of a file that is not a
// database (SQLITE_NOTADB) or is malformed (SQLITE_CORRUPT), under any of
// their extended codes: a copy cut short, a disk error, garbage over it.
func Damaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case codeCorrupt, codeNotADB:
		return true
	}
	return false
}
