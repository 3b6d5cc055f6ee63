//go:build cgo

package store

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// Every reference to mattn/go-sqlite3's own names lives in this file: without
// cgo the package has no such names, and store_nocgo.go stands in with a build
// error that says what to install.

// IsBusy reports whether err is SQLite's "database is locked" or "table is locked".
func IsBusy(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	var sp *sqlite3.Error
	if errors.As(err, &sp) && sp != nil {
		return sp.Code == sqlite3.ErrBusy || sp.Code == sqlite3.ErrLocked
	}
	return false
}

// sqliteProblem is Problem for SQLite's own error codes.
func sqliteProblem(err error) string {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrReadonly, sqlite3.ErrPerm:
			return "the database is read-only"
		case sqlite3.ErrFull:
			return "the disk holding the database is full"
		case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
			return problemDamaged
		case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
			return "the database file cannot be written (input/output error)"
		}
	}
	return ""
}
