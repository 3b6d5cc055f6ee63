package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// withoutEcho runs read with the terminal's echo off, so a typed key does not
// show on the screen; on anything but a terminal it just runs read.
func withoutEcho(f *os.File, read func() (string, error)) (string, bool, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		s, err := read()
		return s, false, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		s, err := read()
		return s, false, err
	}
	defer func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }()
	s, err := read()
	return s, true, err
}

// isTTY reports whether f is a terminal (it has terminal attributes).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
