//go:build !unix

package database

// writable cannot be checked ahead here; SQLite's own errors say it later.
func writable(string) error { return nil }
