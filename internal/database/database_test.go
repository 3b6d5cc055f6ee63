package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gorm.io/gorm"

	"github.com/detourbot/detour/failover"
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
	db, err := Open(context.Background(), driver, dsn, log)
	if err != nil {
		t.Fatalf("Open(%s): %v", driver, err)
	}
	t.Cleanup(func() { _ = Close(db) })
	return db
}

func TestDSN(t *testing.T) {
	const defaults = "_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL"
	tests := []struct {
		in, dsn, path string
	}{
		{"detour.db", "file:detour.db?" + defaults, "detour.db"},
		{"/var/lib/detour/detour.db", "file:/var/lib/detour/detour.db?" + defaults, "/var/lib/detour/detour.db"},
		{"odd?#%.db", "file:odd%3F%23%25.db?" + defaults, "odd?#%.db"},
		{":memory:", "file::memory:?" + defaults, ""},
		{"file:x.db", "file:x.db?" + defaults, "x.db"},
		{"file:x.db?_busy_timeout=100", "file:x.db?_busy_timeout=100&_journal_mode=WAL&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL", "x.db"},
		{"file:x.db?_fk=1&_sync=FULL&_journal=DELETE&_timeout=9&_txlock=deferred", "file:x.db?_fk=1&_sync=FULL&_journal=DELETE&_timeout=9&_txlock=deferred", "x.db"},
		{"file:///tmp/a%20b/x.db?mode=rwc", "file:///tmp/a%20b/x.db?mode=rwc&" + defaults, "/tmp/a b/x.db"},
		{"file://localhost/tmp/x.db", "file://localhost/tmp/x.db?" + defaults, "/tmp/x.db"},
		{"file:mem1?mode=memory&cache=shared", "file:mem1?mode=memory&cache=shared&" + defaults, ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			dsn, path, err := DSN(tc.in)
			if err != nil {
				t.Fatalf("DSN(%q): %v", tc.in, err)
			}
			if dsn != tc.dsn || path != tc.path {
				t.Errorf("DSN(%q) = %q, %q; want %q, %q", tc.in, dsn, path, tc.dsn, tc.path)
			}
		})
	}
	for _, bad := range []string{"", "  ", "file://hostonly", "file:x.db?a=%zz"} {
		if _, _, err := DSN(bad); err == nil {
			t.Errorf("DSN(%q): want error", bad)
		}
	}
}

// TestOpen_Settings checks that every handle gets the platforms.md 4.3 settings
// and that the parent directory is created.
func TestOpen_Settings(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, in, file string
	}{
		{"plain nested path", filepath.Join(dir, "a", "b", "detour.db"), filepath.Join(dir, "a", "b", "detour.db")},
		{"file dsn without params", "file:" + filepath.Join(dir, "c", "x.db"), filepath.Join(dir, "c", "x.db")},
		{"path with odd characters", filepath.Join(dir, "d?#%", "y.db"), filepath.Join(dir, "d?#%", "y.db")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openT(t, tc.in)
			if _, err := os.Stat(tc.file); err != nil {
				t.Fatalf("database file not created: %v", err)
			}
			pragma := func(name string) string {
				var v string
				if err := db.Raw("PRAGMA " + name).Scan(&v).Error; err != nil {
					t.Fatalf("PRAGMA %s: %v", name, err)
				}
				return strings.ToLower(v)
			}
			for name, want := range map[string]string{
				"journal_mode": "wal",
				"busy_timeout": "5000",
				"foreign_keys": "1",
				"synchronous":  "1", // NORMAL
			} {
				if got := pragma(name); got != want {
					t.Errorf("PRAGMA %s = %q, want %q", name, got, want)
				}
			}
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			if got := sqlDB.Stats().MaxOpenConnections; got != 1 {
				t.Errorf("MaxOpenConnections = %d, want 1", got)
			}
			if db.Migrator().HasTable("profile_states") {
				t.Error("Open made a table: tables are their owners' (store.NewStateStore, sessions)")
			}
			if db.Callback().Create().Get("detour:clean_text") == nil || db.Callback().Update().Get("detour:clean_text") == nil {
				t.Error("the text cleaner is not registered (M1)")
			}
			if !db.Config.TranslateError {
				t.Error("TranslateError is off")
			}
		})
	}
}

func TestOpen_Memory(t *testing.T) {
	db := openT(t, ":memory:")
	s, err := store.NewStateStore(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(context.Background(), "k", func(p *failover.ProfileState) { p.ErrorCount = 2 }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "k")
	if err != nil || got.ErrorCount != 2 {
		t.Fatalf("Get = %+v, %v; want ErrorCount 2", got, err)
	}
}

func TestOpen_Errors(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	asDir := filepath.Join(dir, "isdir.db")
	if err := os.Mkdir(asDir, 0o750); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		mention string      // the error names this path
		is      error       // errors.Is target, if any
		want    []string    // more substrings
		not     []string    // must not appear (secrets)
		skip    func() bool // skip condition
	}{
		{name: "parent is a file", in: filepath.Join(blocker, "sub", "detour.db"), mention: filepath.Join(blocker, "sub", "detour.db"), is: syscall.ENOTDIR, want: []string{"create directory"}},
		{name: "path is a directory", in: asDir, mention: asDir, want: []string{"open database"}},
		{name: "dsn params never echoed", in: "file:" + filepath.Join(blocker, "x.db") + "?_auth_pass=" + canary, mention: filepath.Join(blocker, "x.db"), not: []string{canary, "_auth_pass"}},
		{name: "empty", in: "", want: []string{"empty database path"}},
		{name: "read-only directory", in: filepath.Join(dir, "ro", "detour.db"), mention: filepath.Join(dir, "ro", "detour.db"),
			skip: func() bool {
				if os.Geteuid() == 0 {
					return true // root writes anywhere
				}
				_ = os.Mkdir(filepath.Join(dir, "ro"), 0o500)
				return false
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != nil && tc.skip() {
				t.Skip("not applicable for this user")
			}
			log, buf := testLogger(t)
			db, err := Open(context.Background(), DriverSQLite, tc.in, log)
			if err == nil {
				_ = Close(db)
				t.Fatalf("Open(%q) succeeded, want error", tc.in)
			}
			msg := err.Error()
			if tc.mention != "" && !strings.Contains(msg, fmt.Sprintf("%q", tc.mention)) {
				t.Errorf("error %q does not name path %q", msg, tc.mention)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) || strings.Contains(buf.String(), n) {
					t.Errorf("error or log leaks %q: %q / %q", n, msg, buf.String())
				}
			}
		})
	}
}

// TestOpen_M1_PostgresErrors: a Postgres DSN that does not parse, or a server
// that cannot be reached, is a clear error that never shows the password; an
// unknown driver is refused.
// covers M1, T8
func TestOpen_M1_PostgresErrors(t *testing.T) {
	tests := []struct {
		driver, dsn, want string
	}{
		{DriverPostgres, "", "empty postgres DSN"},
		{DriverPostgres, "postgres://u:" + canary + "@127.0.0.1:notaport/db", "does not parse"},
		{DriverPostgres, "postgres://u:" + canary + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", "connect to postgres"},
		{DriverPostgres, "host=127.0.0.1 port=1 user=u password=" + canary + " dbname=db sslmode=disable connect_timeout=5", "connect to postgres"},
		{"mysql", "u:p@tcp(127.0.0.1)/db", "unknown database driver"},
	}
	for _, tc := range tests {
		log, buf := testLogger(t)
		db, err := Open(context.Background(), tc.driver, tc.dsn, log)
		if err == nil {
			_ = Close(db)
			t.Errorf("Open(%s, %q) succeeded", tc.driver, tc.dsn)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s, %q) = %v, want %q", tc.driver, tc.dsn, err, tc.want)
		}
		if strings.Contains(err.Error()+buf.String(), "CANARY") {
			t.Errorf("the password leaks: %v\n%s", err, buf.String())
		}
	}
}

func newStoreT(t testing.TB, db *gorm.DB) *store.StateStore {
	t.Helper()
	s, err := store.NewStateStore(db)
	if err != nil {
		t.Fatalf("NewStateStore: %v", err)
	}
	return s
}

func mustUpdate(t *testing.T, s *store.StateStore, key string, fn func(*failover.ProfileState)) {
	t.Helper()
	if _, err := s.Update(context.Background(), key, fn); err != nil {
		t.Fatalf("Update(%q): %v", key, err)
	}
}
