//go:build !cgo

package sessions

import "testing"

// The router's tests run on a real database (SQLite always, Postgres when
// DETOUR_TEST_POSTGRES_DSN is set), and SQLite needs cgo: without it only the
// tests that need no database are built. This says so instead of passing quietly.
func TestStorage_NeedsCgo(t *testing.T) {
	t.Skip("the tests on a database are left out: cgo is off (CGO_ENABLED=0 or no C compiler); install one (README Set-up) to run them")
}
