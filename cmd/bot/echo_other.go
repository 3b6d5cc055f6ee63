//go:build !linux

package main

import "os"

// withoutEcho runs read; hiding typed input is done on Linux only, so here a
// typed key shows on the screen (bot init says so).
func withoutEcho(_ *os.File, read func() (string, error)) (string, bool, error) {
	s, err := read()
	return s, false, err
}

// isTTY is true for every character device here: only Linux tells a terminal
// from /dev/null.
func isTTY(*os.File) bool { return true }
