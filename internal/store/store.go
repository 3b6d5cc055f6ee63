// Package store opens detour's database and keeps the failover engine's durable
// profile state in it (SPEC D6: cooldowns and usage survive restarts and are shared
// by every session and every replica that shares the database).
//
// SQLite is opened through gorm.io/driver/sqlite (cgo, mattn/go-sqlite3) with WAL,
// a 5 s busy timeout, BEGIN IMMEDIATE transactions, foreign keys and
// synchronous=NORMAL, over a single-connection pool. Transactions are kept short:
// nothing slow ever runs while one is open.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
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
		return "", "", errors.New("store: empty database path")
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
		return "", "", fmt.Errorf("store: bad query in database DSN for %q: %w", path, err)
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
			return "", errors.New("store: database DSN has no path")
		}
		p = "/" + after
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("store: bad database path in DSN: %w", err)
	}
	if dec == "" || dec == ":memory:" || strings.Contains("&"+query+"&", "&mode=memory&") {
		return "", nil
	}
	return dec, nil
}

// Open opens (creating if needed) the SQLite database at pathOrDSN, which is a
// plain path such as "detour.db" or a full "file:" DSN (see DSN). It creates the
// parent directory, uses one connection, translates constraint errors
// (gorm.ErrDuplicatedKey ...), logs through log at warn level (record-not-found is
// silent) and migrates the store's own tables. Errors name the path, never the
// DSN's query parameters. Close the handle with Close.
func Open(ctx context.Context, pathOrDSN string, log *slog.Logger) (*gorm.DB, error) {
	dsn, path, err := DSN(pathOrDSN)
	if err != nil {
		return nil, err
	}
	name := path
	if name == "" {
		name = ":memory:"
	}
	if path != "" {
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("store: create directory for database %q: %w", name, err)
			}
		}
	}
	if log == nil {
		log = slog.Default()
	}
	sqlDB, err := sql.Open(sqlite.DriverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open database %q: %w", name, err)
	}
	// One connection: SQLite has one writer anyway, and this avoids SQLITE_BUSY
	// between connections of the same process.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	if err := pingUntilFree(ctx, sqlDB); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: open database %q: %w", name, err)
	}
	db, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: sqlite.DriverName, DSN: dsn, Conn: sqlDB}), &gorm.Config{
		TranslateError: true,
		// gorm's prepared-statement cache starts a cleanup goroutine that never
		// exits unless the TTL is its own "no eviction" value (10 years); callers
		// that enable PrepareStmt (sessions) would otherwise leak one per handle.
		PrepareStmtTTL: 10 * 365 * 24 * time.Hour,
		Logger: logger.NewSlogLogger(log, logger.Config{
			LogLevel:                  logger.Warn,
			SlowThreshold:             time.Second,
			IgnoreRecordNotFoundError: true,
			ParameterizedQueries:      true, // never log bound values
		}),
		NowFunc: func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: open database %q: %w", name, err)
	}
	db = db.WithContext(ctx)
	if err := Migrate(db, &stateRow{}); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: database %q: %w", name, err)
	}
	return db.WithContext(context.Background()), nil
}

// pingUntilFree opens the first connection. Switching a fresh file to WAL needs
// an exclusive lock that SQLite does not wait for (the busy timeout does not
// apply), so replicas starting together retry for a bounded time.
func pingUntilFree(ctx context.Context, db *sql.DB) error {
	const tries, pause = 100, 20 * time.Millisecond
	var err error
	for range tries {
		if err = db.PingContext(ctx); err == nil || !IsBusy(err) {
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

// Migrate creates or updates the tables of models. When another replica creates
// the same table at the same moment, the loser retries once.
func Migrate(db *gorm.DB, models ...any) error {
	err := db.AutoMigrate(models...)
	if err != nil && strings.Contains(err.Error(), "already exists") {
		err = db.AutoMigrate(models...)
	}
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Close closes the database handle returned by Open. It first stops the state
// store's LastUsed flusher and writes the values still pending (see StateStore).
func Close(db *gorm.DB) error {
	if db == nil {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	// Stop the state store's flusher, write its pending LastUsed values and
	// finalize its statements first.
	ferr := releaseFastPath(sqlDB)
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("store: close: %w", errors.Join(ferr, err))
	}
	if ferr != nil {
		return fmt.Errorf("store: close: %w", ferr)
	}
	return nil
}
