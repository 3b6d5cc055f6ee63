package database

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Environment of a storage-fault child (see TestStore_T7_ImmutableWhileRunning).
const (
	childFaultEnv = "DETOUR_DATABASE_FAULT_DB"  // the database's path
	childDSNEnv   = "DETOUR_DATABASE_FAULT_DSN" // the DSN to open it with
)

// TestMain runs a storage-fault child when asked to, and otherwise the tests,
// checking that every test closes its databases (database/sql keeps a
// goroutine per open handle).
func TestMain(m *testing.M) {
	if os.Getenv(childFaultEnv) != "" {
		os.Exit(faultChild(os.Getenv(childFaultEnv), os.Getenv(childDSNEnv)))
	}
	goleak.VerifyTestMain(m)
}
