package store_test

import (
	"context"
	"log/slog"
	"testing"

	"gorm.io/gorm"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

const canary = "sk-CANARY-7f3a9c1e5b2d4f60"

func testLogger(t testing.TB) (*slog.Logger, *syncbuf.Buffer) {
	t.Helper()
	buf := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func openT(t testing.TB, path string) *gorm.DB {
	t.Helper()
	return openDriverT(t, testdb.SQLite, path)
}

// openDriverT opens dsn of driver, closed when t ends.
func openDriverT(t testing.TB, driver, dsn string) *gorm.DB {
	t.Helper()
	log, _ := testLogger(t)
	db, err := database.Open(context.Background(), driver, dsn, log)
	if err != nil {
		t.Fatalf("Open(%s): %v", driver, err)
	}
	t.Cleanup(func() { _ = database.Close(db) })
	return db
}

// newDB opens a fresh database of driver for t and returns its database.DSN too.
func newDB(t testing.TB, driver string) (*gorm.DB, string) {
	t.Helper()
	dsn := testdb.DSN(t, driver)
	return openDriverT(t, driver, dsn), dsn
}

func newStoreT(t testing.TB, db *gorm.DB) *store.StateStore {
	t.Helper()
	s, err := store.NewStateStore(db)
	if err != nil {
		t.Fatalf("store.NewStateStore: %v", err)
	}
	return s
}

func mustUpdate(t *testing.T, s *store.StateStore, key string, fn func(*failover.ProfileState)) failover.ProfileState {
	t.Helper()
	got, err := s.Update(context.Background(), key, fn)
	if err != nil {
		t.Fatalf("Update(%q): %v", key, err)
	}
	return got
}

func mustGet(t *testing.T, s *store.StateStore, key string) failover.ProfileState {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return got
}
