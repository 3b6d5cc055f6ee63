package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/redact"
)

// defaultParams are the connection settings of every SQLite handle (platforms.md 4.3).
// Each entry lists the parameter and the aliases mattn/go-sqlite3 also accepts, so
// a DSN that already sets one of them keeps its own value.
var defaultParams = []struct {
	name    string
	value   string
	aliases []string
}{
	{"_journal_mode", "WAL", []string{"_journal"}},
	{"_busy_timeout", "5000", []string{"_timeout"}},
	{"_txlock", "immediate", nil},
	{"_foreign_keys", "on", []string{"_fk"}},
	{"_synchronous", "NORMAL", []string{"_sync"}},
}

// DSN turns a plain path (such as "detour.db") into the recommended SQLite DSN,
// "file:<path>?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL".
// A DSN that already starts with "file:" is kept and only gains the settings it
// does not set itself. It also returns the database file's path ("" for an
// in-memory database).
func DSN(pathOrDSN string) (dsn, path string, err error) {
	if strings.TrimSpace(pathOrDSN) == "" {
		return "", "", errors.New("database: empty database path")
	}
	if m := urlScheme.FindStringSubmatch(pathOrDSN); m != nil && !strings.EqualFold(m[1], "file") {
		// A server's URL is no file: taken as one it would become folders
		// named after it, and its password would be shown wherever the path
		// is. Refused, the password hidden (T8).
		hint := "give a file path such as detour.db"
		if s := strings.ToLower(m[1]); s == "postgres" || s == "postgresql" {
			hint = "set storage.driver: postgres for a Postgres server, or " + hint
		}
		return "", "", fmt.Errorf("database: %s is a %s:// URL, not a SQLite database file: %s", redact.URL(pathOrDSN), m[1], hint)
	}
	var base, query string
	if strings.HasPrefix(pathOrDSN, "file:") {
		base, query, _ = strings.Cut(pathOrDSN, "?")
		path, err = uriPath(base, query)
		if err != nil {
			return "", "", err
		}
	} else {
		path = pathOrDSN
		if path == ":memory:" {
			base, path = "file::memory:", ""
		} else {
			base = "file:" + escapeURIPath(path)
		}
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return "", "", fmt.Errorf("database: bad query in database DSN for %q: %w", path, err)
	}
	var extra []string
	for _, p := range defaultParams {
		if has(params, p.name) {
			continue
		}
		set := false
		for _, a := range p.aliases {
			set = set || has(params, a)
		}
		if !set {
			extra = append(extra, p.name+"="+p.value)
		}
	}
	q := query
	if len(extra) > 0 {
		if q != "" {
			q += "&"
		}
		q += strings.Join(extra, "&")
	}
	dsn = base
	if q != "" {
		dsn += "?" + q
	}
	return dsn, path, nil
}

// urlScheme matches the scheme of a URL (scheme://...).
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

func has(v url.Values, k string) bool { _, ok := v[k]; return ok }

// escapeURIPath escapes the characters that would end or corrupt the path part of
// an SQLite "file:" URI.
func escapeURIPath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")
	return r.Replace(p)
}

// uriPath returns the file path of an SQLite "file:" URI ("" for in-memory).
func uriPath(base, query string) (string, error) {
	p := strings.TrimPrefix(base, "file:")
	p, _, _ = strings.Cut(p, "#")
	if rest, ok := strings.CutPrefix(p, "//"); ok {
		// file://authority/path: SQLite accepts only "" or "localhost" here.
		_, after, found := strings.Cut(rest, "/")
		if !found {
			return "", errors.New("database: database DSN has no path")
		}
		p = "/" + after
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("database: bad database path in DSN: %w", err)
	}
	if dec == "" || dec == ":memory:" || strings.Contains("&"+query+"&", "&mode=memory&") {
		return "", nil
	}
	return dec, nil
}

// openSQLite opens the SQLite database at pathOrDSN. It returns the name errors
// use for it (the path, or ":memory:").
func openSQLite(ctx context.Context, pathOrDSN string, log *slog.Logger) (*gorm.DB, string, error) {
	dsn, path, err := DSN(pathOrDSN)
	if err != nil {
		return nil, "", err
	}
	name := path
	if name == "" {
		name = ":memory:"
	}
	if path != "" {
		if err := prepareFile(path); err != nil {
			return nil, name, fmt.Errorf("database: database %q: %w", name, err)
		}
	}
	dsn, journal, exclusive := lockingMode(dsn)
	var guard *writeGuard
	if path != "" && !exclusive {
		guard = &writeGuard{files: []string{path + "-shm"}}
	}
	sqlDB := sql.OpenDB(sqliteConnector(dsn, journal, guard))
	// One connection: SQLite has one writer anyway, and this avoids SQLITE_BUSY
	// between connections of the same process.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	if err := pingUntilFree(ctx, sqlDB, !exclusive); err != nil {
		_ = sqlDB.Close()
		err = mark(err)
		switch {
		case store.Problem(err) == problemDamaged:
			return nil, name, damagedError(name, err)
		case exclusive && isBusy(err):
			return nil, name, fmt.Errorf("database: database %q is in use by another process, and its DSN sets _locking_mode=EXCLUSIVE (one process only): stop the other process, or remove the setting to share the file: %w", name, err)
		}
		return nil, name, fmt.Errorf("database: open database %q: %w", name, store.Explain(err))
	}
	db, err := gorm.Open(sqliteDialect{&sqlite.Dialector{DriverName: sqlite.DriverName, DSN: dsn, Conn: sqlDB}}, gormConfig(log))
	if err == nil {
		err = finish(db)
	}
	if err != nil {
		_ = sqlDB.Close()
		return nil, name, fmt.Errorf("database: open database %q: %w", name, err)
	}
	if err := quickCheck(ctx, db); err != nil {
		_ = sqlDB.Close()
		return nil, name, damagedError(name, err)
	}
	return db, name, nil
}

// lockingMode reads the locking mode a DSN asks for. With _locking_mode (or
// _locking) EXCLUSIVE, SQLite keeps the WAL index in the process's own memory
// instead of the -shm file every process maps, provided the locking mode is set
// before the database enters WAL mode: dsn then comes back without its journal
// mode, which the connector sets once the locking mode is in place, and journal
// is that mode. Any other DSN comes back as it is.
func lockingMode(dsn string) (out, journal string, exclusive bool) {
	base, query, _ := strings.Cut(dsn, "?")
	params, err := url.ParseQuery(query)
	if err != nil {
		return dsn, "", false
	}
	for _, k := range []string{"_locking_mode", "_locking"} {
		if v := params.Get(k); strings.EqualFold(v, "exclusive") {
			exclusive = true
		}
	}
	if !exclusive {
		return dsn, "", false
	}
	journal = "WAL"
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "_journal_mode" || k == "_journal" {
			if v, err := url.QueryUnescape(v); err == nil && v != "" {
				journal = v
			}
			continue
		}
		keep = append(keep, kv)
	}
	if !safePragmaWord(journal) {
		return dsn, "", false // mattn refuses it with its own error
	}
	return base + "?" + strings.Join(keep, "&"), strings.ToUpper(journal), true
}

// safePragmaWord reports that s is a plain word, safe to put into a PRAGMA.
func safePragmaWord(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return s != ""
}

// writeGuard keeps SQLite from touching a database whose files became read-only
// while the bot runs (T7: a clear error, never a crash). SQLite maps the -shm
// file (the WAL index every process shares) into memory and writes it on every
// transaction, reads included; when that file turns read-only underneath (an
// immutable flag, chattr +i; a file system remounted read-only after an error),
// the next write to a mapped page is a SIGBUS, which kills the process from
// inside C code. The WAL and the database file are written through their
// descriptors, where the same change is an error SQLite reports (Problem says
// "read-only"), so only the mapped file needs the guard: before each transaction
// and statement it asks the system whether this process may still write it
// (access(2)), and refuses the statement with the read-only problem when not. A
// file that does not exist (yet) passes: SQLite creates it, or says why it cannot.
//
// What it costs: one access(2) call per statement, measured by
// BenchmarkWriteGuard (BENCHMARKS.md). What it cannot do: a file made read-only
// in the microseconds between the check and SQLite's write still faults, and so
// does a -shm file truncated underneath. Where one process uses the file, a DSN
// with _locking_mode=EXCLUSIVE removes the mapping altogether (see lockingMode),
// and the guard is off.
type writeGuard struct {
	files []string
}

// check returns an error when a file of the database cannot be written.
func (g *writeGuard) check() error {
	if g == nil {
		return nil
	}
	for _, f := range g.files {
		if err := writable(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &readOnlyError{file: f, err: err}
		}
	}
	return nil
}

// readOnlyError is a statement the write guard refused.
type readOnlyError struct {
	file string
	err  error
}

func (e *readOnlyError) Error() string {
	return fmt.Sprintf("database: the database is read-only: %s cannot be written (%v), so the statement was not run", e.file, e.err)
}

func (e *readOnlyError) Unwrap() error { return e.err }

// prepareFile makes the database's folder (0700) and file (0600) when they do
// not exist, so SQLite, which gives the WAL and SHM files the database file's
// mode, never creates a world-readable file (T7). An existing folder or file
// keeps its mode. It refuses a database, WAL or SHM file, or a folder, that this
// process cannot write: SQLite would open such a file read-only (every write
// then fails), and a read-only shared-memory file is mapped into the process,
// where a fault is fatal (T7: a clear error, never a crash).
func prepareFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return fmt.Errorf("create file: %w", err)
		}
	case errors.Is(err, fs.ErrExist):
		// Another replica made it, or it was there: keep its mode.
	default:
		return fmt.Errorf("create file: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", dir} {
		if err := writable(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the database is read-only (%s: %w): make it and its folder writable by the bot's user", filepath.Base(p), err)
		}
	}
	return nil
}

// damagedError is the start-up error of a database file that is not sound (T7).
func damagedError(name string, err error) error {
	return fmt.Errorf("database: database %q is damaged (integrity check: %w): restore it from a backup, or move it away to start with an empty one", name, err)
}

// quickCheck runs SQLite's quick integrity check and returns its first complaints.
func quickCheck(ctx context.Context, db *gorm.DB) error {
	var rows []string
	if err := db.WithContext(ctx).Raw("PRAGMA quick_check(3)").Scan(&rows).Error; err != nil {
		return store.Explain(err)
	}
	if len(rows) == 1 && rows[0] == "ok" {
		return nil
	}
	if len(rows) == 0 {
		return errors.New("no result")
	}
	return errors.New(strings.Join(rows, "; "))
}

// isBusy reports whether err is SQLite's "database is locked" or "table is locked".
func isBusy(err error) bool {
	busy, _ := sqliteFault(err)
	return busy
}

// pingUntilFree opens the first connection. Switching a fresh file to WAL needs
// an exclusive lock that SQLite does not wait for (the busy timeout does not
// apply), so replicas starting together retry for a bounded time (retryBusy; in
// exclusive locking mode a busy file is another process's for good).
func pingUntilFree(ctx context.Context, db *sql.DB, retryBusy bool) error {
	const tries, pause = 100, 20 * time.Millisecond
	var err error
	for range tries {
		if err = db.PingContext(ctx); err == nil || !isBusy(err) || !retryBusy {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}
