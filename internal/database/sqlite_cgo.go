//go:build cgo

package database

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// Every reference to mattn/go-sqlite3's own names lives in this file: without
// cgo the package has no such names, and sqlite_nocgo.go stands in with a build
// error that says what to install.

// sqliteFault reads SQLite's own error codes: busy or locked may pass when the
// transaction runs again; the others are problems of the storage itself (T7).
func sqliteFault(err error) (retry bool, problem string) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		var sp *sqlite3.Error
		if !errors.As(err, &sp) || sp == nil {
			return false, ""
		}
		se = *sp
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return true, ""
	case sqlite3.ErrReadonly, sqlite3.ErrPerm:
		return false, problemReadOnly
	case sqlite3.ErrFull:
		return false, problemFull
	case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return false, problemDamaged
	case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		return false, "the database file cannot be written (input/output error)"
	}
	return false, ""
}
