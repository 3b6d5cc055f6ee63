//go:build unix

package database

import "syscall"

// writable reports (as an error) whether this process may write path: mode
// bits for an ordinary user, a read-only mount or an immutable file for root.
func writable(path string) error {
	const wOK = 2 // W_OK
	return syscall.Access(path, wOK)
}
