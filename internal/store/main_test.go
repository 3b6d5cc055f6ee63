package store_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/store"
)

// Environment of a replica child process (see TestOpen_M4_ReplicaProcesses).
const (
	childDriverEnv = "DETOUR_STORE_REPLICA_DRIVER"
	childDSNEnv    = "DETOUR_STORE_REPLICA_DSN"
	childGoEnv     = "DETOUR_STORE_REPLICA_GO" // a file whose creation starts every child at once
)

// TestMain runs a replica child when asked to, and otherwise the tests, checking
// that every test closes its databases (database/sql keeps a goroutine per open
// handle).
func TestMain(m *testing.M) {
	if os.Getenv(childDriverEnv) != "" {
		os.Exit(replicaChild())
	}
	goleak.VerifyTestMain(m)
}

// replicaTable stands for the tables other packages migrate at start-up.
type replicaTable struct {
	ID        uint64 `gorm:"primaryKey;autoIncrement"`
	Key       string `gorm:"index"`
	Text      string
	CreatedAt time.Time
}

// replicaChild is one replica starting: it waits for the go file, opens the
// database, migrates, counts itself in a shared row and prints "ready".
func replicaChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv(childGoEnv)); err == nil {
			break
		}
	}
	db, err := database.Open(ctx, os.Getenv(childDriverEnv), os.Getenv(childDSNEnv), nil)
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer database.Close(db)
	s, err := store.NewStateStore(db)
	if err == nil {
		err = store.Migrate(ctx, db, &replicaTable{})
	}
	if err == nil {
		_, err = s.Update(ctx, "replicas:started", func(p *failover.ProfileState) { p.ErrorCount++ })
	}
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	fmt.Println("ready")
	return 0
}
