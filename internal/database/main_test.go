package database

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every test closes its databases (database/sql keeps a
// goroutine per open handle).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
