//go:build !cgo

package database

import "database/sql/driver"

// detour keeps its state in SQLite through mattn/go-sqlite3, which is C code: it
// needs cgo and a C compiler. Without them the Go toolchain builds with
// CGO_ENABLED=0, and this file makes that build fail with one error whose name
// says what to do (README "Troubleshooting"), instead of a confusing
// "undefined: sqlite3.Error".

// sqliteFault stands in for the cgo version so that the build error below is the only one.
func sqliteFault(err error) (retry bool, problem string) {
	return detour_needs_cgo__install_gcc_or_Xcode_command_line_tools__see_README_Troubleshooting, ""
}

func sqliteConnector(string, string, *writeGuard) driver.Connector { return nil }

func sqliteDamaged(error) bool { return false }
