// Package testdb gives each storage test a fresh database on every driver the
// bot supports (M1): SQLite always, PostgreSQL when DETOUR_TEST_POSTGRES_DSN
// names a server (.ci/with-postgres starts one). It is for tests only.
//
// Each Postgres database is created for one test and dropped when it ends; a
// role that may not create databases gets a schema of its own instead.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// EnvPostgres names the variable holding the DSN of a Postgres database the
// tests may create databases (or schemas) from, such as
// postgres://detour@127.0.0.1:5432/detour_test?sslmode=disable.
const EnvPostgres = "DETOUR_TEST_POSTGRES_DSN"

// Driver names, as database.Open takes them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Drivers lists the drivers every storage test runs on.
var Drivers = []string{SQLite, Postgres}

// Each runs fn once per driver, as subtests named after the drivers. The
// Postgres subtest is skipped, with a message naming EnvPostgres, when it is unset.
func Each(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range Drivers {
		t.Run(d, func(t *testing.T) {
			Require(t, d)
			fn(t, d)
		})
	}
}

// Require skips t when driver cannot be tested here (Postgres without EnvPostgres).
func Require(t testing.TB, driver string) {
	t.Helper()
	if driver == Postgres && os.Getenv(EnvPostgres) == "" {
		t.Skipf("no PostgreSQL server: set %s (for example by running the tests under .ci/with-postgres)", EnvPostgres)
	}
}

// DSN returns the DSN of a new, empty database of driver, removed when t ends:
// a file in t.TempDir() for SQLite, a new database (or schema) for Postgres. It
// skips t like Require.
func DSN(t testing.TB, driver string) string {
	t.Helper()
	switch driver {
	case SQLite:
		return filepath.Join(t.TempDir(), "detour.db")
	case Postgres:
		Require(t, driver)
		return newPostgres(t, os.Getenv(EnvPostgres))
	}
	t.Fatalf("testdb: unknown driver %q", driver)
	return ""
}

// newPostgres creates a database named for t on the server of admin and returns
// its DSN; t's cleanup drops it (closing connections left open).
func newPostgres(t testing.TB, admin string) string {
	t.Helper()
	name := "detour_t_" + randomHex(8)
	if err := adminExec(admin, "CREATE DATABASE "+name); err == nil {
		t.Cleanup(func() {
			if err := adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Errorf("testdb: drop database %s: %v", name, err)
			}
		})
		dsn, err := withParam(admin, "dbname", name)
		if err != nil {
			t.Fatalf("testdb: %s: %v", EnvPostgres, err)
		}
		return dsn
	} else if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("testdb: create database on %s: %v", EnvPostgres, err)
	}
	// No CREATEDB privilege: a schema of its own in the given database.
	if err := adminExec(admin, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("testdb: create schema on %s: %v", EnvPostgres, err)
	}
	t.Cleanup(func() {
		if err := adminExec(admin, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("testdb: drop schema %s: %v", name, err)
		}
	})
	dsn, err := withParam(admin, "search_path", name)
	if err != nil {
		t.Fatalf("testdb: %s: %v", EnvPostgres, err)
	}
	return dsn
}

// adminExec runs one statement on a connection of its own (closed at once, so
// no test leaves a pool behind).
func adminExec(dsn, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// withParam returns dsn with one connection parameter set: the path of a URL for
// dbname, a query parameter otherwise; a keyword=value pair in a keyword DSN.
func withParam(dsn, key, value string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("the DSN does not parse as a URL")
		}
		if key == "dbname" {
			u.Path = "/" + value
		} else {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	var out []string
	for _, f := range strings.Fields(dsn) {
		if k, _, _ := strings.Cut(f, "="); k != key {
			out = append(out, f)
		}
	}
	return strings.Join(append(out, key+"="+value), " "), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testdb: random: %v", err))
	}
	return hex.EncodeToString(b)
}

// SmallDisk mounts a tmpfs of size bytes for t and returns its folder; it skips t
// (saying why) unless the test runs as root and may mount.
func SmallDisk(t testing.TB, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the full-disk test mounts a small tmpfs, which needs root: skipped (run the tests as root to include it)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("the full-disk test could not mount a tmpfs (%v: %s): skipped", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", "-l", dir).Run(); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file into dir until the disk is full and returns its path.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return path
		}
	}
}

// Server is a PostgreSQL server of one test's own (OwnPostgres), which the test
// may stop and start again: a database restart, as an operator's or a crash's.
type Server struct {
	t    testing.TB
	bin  string   // the folder of initdb, pg_ctl
	run  []string // runuser -u <user> -- when the tests run as root
	data string
	port int
	dsn  string
}

// OwnPostgres initialises and starts a PostgreSQL server for t alone, on
// 127.0.0.1 at a free port, stopped and removed when t ends. It needs the
// server's binaries (on PATH or in /usr/lib/postgresql/*/bin, as
// .ci/with-postgres finds them) and skips t, saying why, without them or
// without EnvPostgres (the Postgres tests are asked for by setting it).
func OwnPostgres(t testing.TB) *Server {
	t.Helper()
	Require(t, Postgres)
	bin, err := postgresBin()
	if err != nil {
		t.Skipf("no PostgreSQL server binaries to start a server of this test's own (%v): skipped", err)
	}
	s := &Server{t: t, bin: bin}
	base := os.TempDir()
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		user := "postgres"
		if _, err := exec.Command("id", "-u", user).Output(); err != nil {
			user = "nobody"
		}
		s.run = []string{"runuser", "-u", user, "--"}
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "detour-pg-own.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if len(s.run) > 0 {
		if out, err := exec.Command("chown", s.run[2], dir).CombinedOutput(); err != nil {
			t.Fatalf("testdb: chown %s: %v %s", dir, err, out)
		}
	}
	s.data = filepath.Join(dir, "data")
	if out, err := s.cmd("initdb", "-D", s.data, "-U", "detour", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		t.Skipf("testdb: initdb failed (%v): %s: skipped", err, out)
	}
	s.port = freePort(t)
	s.dsn = fmt.Sprintf("postgres://detour@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.Start()
	t.Cleanup(func() { _ = s.cmd("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").Run() })
	return s
}

// DSN is the server's database (the "postgres" database of a role that owns
// the server).
func (s *Server) DSN() string { return s.dsn }

// Start starts the server (again) and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off", s.port, filepath.Dir(s.data))
	out, err := s.cmd("pg_ctl", "-D", s.data, "-l", filepath.Join(filepath.Dir(s.data), "server.log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(s.data), "server.log"))
		s.t.Fatalf("testdb: start postgres: %v %s\n%s", err, out, log)
	}
}

// Kill stops the server at once, as a crash or a kill does: no checkpoint,
// every connection cut; the next Start recovers from its log.
func (s *Server) Kill() {
	s.t.Helper()
	if out, err := s.cmd("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		s.t.Fatalf("testdb: stop postgres: %v %s", err, out)
	}
}

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), s.run...), filepath.Join(s.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

// postgresBin finds the folder of the PostgreSQL server binaries.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			p, _ = filepath.EvalSymlinks(p)
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no pg_ctl and initdb on PATH or in /usr/lib/postgresql/*/bin")
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// RequireChattr skips t unless this process may set the immutable flag on a
// file in the test's temporary folder (root on ext4, xfs, btrfs...): the tests
// that make a database read-only while the bot runs use chattr +i.
func RequireChattr(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the immutable flag (chattr +i) needs root: skipping the read-only-while-running test")
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", probe).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not possible here (%v: %s): skipping the read-only-while-running test", err, out)
	}
	if out, err := exec.Command("chattr", "-i", probe).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
}
