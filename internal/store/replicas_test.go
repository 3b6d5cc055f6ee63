package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// startReplicas starts n replica processes of this test binary on dsn at the
// same moment and returns what each printed; it fails t unless every one is ready.
func startReplicas(t *testing.T, driver, dsn string, n int) {
	t.Helper()
	goFile := filepath.Join(t.TempDir(), "go")
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childDriverEnv+"="+driver, childDSNEnv+"="+dsn, childGoEnv+"="+goFile)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		if out := outs[i].String(); err != nil || !strings.Contains(out, "ready") {
			t.Errorf("replica %d did not start (%v):\n%s", i, err, out)
		}
	}
}

// TestOpen_M4_ReplicaProcesses: replica processes starting together all start,
// on a new database (tables created once, under the migration lock, while the
// others wait) and again on that now existing database; their first updates of
// one shared row lose nothing. SQLite runs more rounds: its race was rare (4 in
// 50 rounds before the lock).
// covers M4, M2, D6
func TestOpen_M4_ReplicaProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		const replicas = 5
		rounds := 8
		if driver == testdb.Postgres {
			rounds = 3
		}
		if testing.Short() {
			rounds = 1
		}
		for round := range rounds {
			dsn := testdb.DSN(t, driver)
			startReplicas(t, driver, dsn, replicas) // new database
			startReplicas(t, driver, dsn, replicas) // existing database
			s := newStoreT(t, openDriverT(t, driver, dsn))
			if got := mustGet(t, s, "replicas:started"); got.ErrorCount != 2*replicas {
				t.Errorf("round %d: %d replicas counted themselves, want %d (lost update)", round, got.ErrorCount, 2*replicas)
			}
		}
	})
}

// TestOpen_M4_StoresStartTogether: several handles in one process (separate
// *gorm.DB, as replicas would be) open one new database at once and all become
// ready; the tables exist once.
// covers M4
func TestOpen_M4_StoresStartTogether(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		dsn := testdb.DSN(t, driver)
		const n = 8
		var wg sync.WaitGroup
		dbs := make([]*gorm.DB, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dbs[i], errs[i] = database.Open(context.Background(), driver, dsn, nil)
				if errs[i] == nil {
					if _, errs[i] = store.NewStateStore(dbs[i]); errs[i] == nil {
						errs[i] = store.Migrate(context.Background(), dbs[i], &replicaTable{})
					}
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Errorf("store %d: %v", i, errs[i])
			}
			if dbs[i] != nil {
				t.Cleanup(func() { _ = database.Close(dbs[i]) })
			}
		}
		if t.Failed() {
			return
		}
		for _, table := range []string{"profile_states", "replica_tables"} {
			if !dbs[0].Migrator().HasTable(table) {
				t.Errorf("table %s missing", table)
			}
		}
	})
}

// TestOpen_M4_OldSQLiteFileReplicas: replicas starting together on an SQLite
// file written by an older version (DATETIME time columns, retyped by the
// migration) all start, and the old row survives.
// covers M4, D6
func TestOpen_M4_OldSQLiteFileReplicas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	writeOldFile(t, path)
	startReplicas(t, testdb.SQLite, path, 5)
	s := newStoreT(t, openT(t, path))
	if got := mustGet(t, s, "openai:default"); got.ErrorCount != 2 || got.CooldownReason != "rate_limit" {
		t.Errorf("old row after the replicas' migration = %+v", got)
	}
}

// writeOldFile writes an SQLite file as an older detour did.
func writeOldFile(t *testing.T, path string) {
	t.Helper()
	raw, err := sql.Open(sqlite.DriverName, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		"CREATE TABLE `profile_states` (`key` text,`last_used` datetime,`last_failure` datetime," +
			"`error_count` integer NOT NULL DEFAULT 0,`consecutive` integer NOT NULL DEFAULT 0,`cooldown_until` datetime," +
			"`cooldown_reason` text,`cooldown_model` text,`disabled_until` datetime,`disabled_reason` text," +
			"`disable_count` integer NOT NULL DEFAULT 0,`recovery_at` datetime,`last_error` text,`last_probe` datetime," +
			"`updated_at` datetime,PRIMARY KEY (`key`))",
		"INSERT INTO profile_states (key, last_used, error_count, consecutive, cooldown_until, cooldown_reason, " +
			"cooldown_model, disabled_reason, disable_count, last_error, updated_at) VALUES ('openai:default', " +
			"'2026-11-29 22:14:05.987654321+00:00', 2, 1, '2026-11-29 22:19:05.5+00:00', 'rate_limit', '', '', 0, '', " +
			"'2026-11-29 22:14:05+00:00')",
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTransaction_M2_DeadlockRetried: two transactions that lock two rows in
// opposite orders deadlock on Postgres (40P01); the one the server aborts runs
// again and both commit. On SQLite (no row locks: BEGIN IMMEDIATE serialises) a
// transaction that cannot get the write lock within the busy timeout is retried
// until the holder lets go.
// covers M2
func TestTransaction_M2_DeadlockRetried(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if driver == testdb.SQLite {
			testBusyRetried(ctx, t)
			return
		}
		db, _ := newDB(t, driver)
		if err := db.Exec("CREATE TABLE lock_pair (id integer PRIMARY KEY, n integer NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("INSERT INTO lock_pair VALUES (1, 0), (2, 0)").Error; err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int64
		var both sync.WaitGroup // each transaction holds its first row before taking the second
		both.Add(2)
		var firstRun [2]atomic.Bool
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, order := range [][2]int{{1, 2}, {2, 1}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = store.Transaction(ctx, db, func(tx *gorm.DB) error {
					runs.Add(1)
					if err := tx.Exec("UPDATE lock_pair SET n = n + 1 WHERE id = ?", order[0]).Error; err != nil {
						return err
					}
					if firstRun[i].CompareAndSwap(false, true) {
						both.Done()
						both.Wait()
					}
					return tx.Exec("UPDATE lock_pair SET n = n + 1 WHERE id = ?", order[1]).Error
				})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		}
		if runs.Load() < 3 {
			t.Errorf("%d runs, want at least 3 (one deadlock victim run again)", runs.Load())
		}
		var ns []int
		db.Raw("SELECT n FROM lock_pair ORDER BY id").Scan(&ns)
		if fmt.Sprint(ns) != "[2 2]" {
			t.Errorf("rows = %v, want [2 2] (each transaction committed once)", ns)
		}
	})
}

func testBusyRetried(ctx context.Context, t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	db := openT(t, "file:"+path+"?_busy_timeout=50") // gives up on the lock after 50 ms
	if err := db.Exec("CREATE TABLE counter (n integer NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO counter VALUES (0)").Error; err != nil {
		t.Fatal(err)
	}
	// Another process holds the write lock for 300 ms (six busy timeouts).
	other, err := sql.Open(sqlite.DriverName, "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond)
		_, _ = conn.ExecContext(ctx, "COMMIT")
		_ = conn.Close()
	}()
	start := time.Now()
	err = store.Transaction(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("UPDATE counter SET n = n + 1").Error
	})
	<-released
	if err != nil {
		t.Fatalf("store.Transaction while another process held the lock: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("committed after %v, before the other process let go: the test proves nothing", d)
	}
	var n int
	db.Raw("SELECT n FROM counter").Scan(&n)
	if n != 1 {
		t.Errorf("n = %d, want 1", n)
	}
}
