// Package database opens detour's database and holds its drivers: SQLite (the
// default, embedded; cgo through mattn/go-sqlite3) and PostgreSQL
// (gorm.io/driver/postgres, pgx), both through gorm (M1). It is the only package
// that links a driver, so the code above the connection (internal/store,
// sessions) builds without cgo.
//
// Every handle Open returns cleans the text it writes (store.CleanText: no NUL
// or invalid UTF-8 reaches a column) and marks its drivers' errors with what
// they mean for detour (store.DriverError: retry the transaction, or a storage
// problem in plain words), so store.Transaction and store.Problem read them
// without knowing the driver.
//
// SQLite runs with WAL, a 5 s busy timeout, BEGIN IMMEDIATE transactions,
// foreign keys and synchronous=NORMAL over one connection; its file and WAL/SHM
// are created 0600 (their folder 0700), and Open refuses a file it cannot write
// or that fails PRAGMA quick_check (T7). Nothing slow ever runs while a
// transaction is open.
package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Driver names, as in the config's storage.driver.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Open opens the database of driver (DriverSQLite, the default when empty, or
// DriverPostgres). For SQLite, dsn is a plain path such as "detour.db" or a full
// "file:" DSN (see DSN); for Postgres, a "postgres://" URL or a "host=...
// dbname=..." keyword string. Constraint errors are translated
// (gorm.ErrDuplicatedKey ...) and every driver error is marked
// (store.DriverError), SQL is logged through log at warn level without bound
// values, and every string written is cleaned (store.CleanText). Errors name the
// SQLite path or the Postgres DSN with its password hidden, never DSN
// parameters. ctx bounds the opening only. Tables are made by their owners
// (store.NewStateStore, sessions.NewRouter) with store.Migrate. Close the handle
// with Close.
func Open(ctx context.Context, driver, dsn string, log *slog.Logger) (*gorm.DB, error) {
	if log == nil {
		log = slog.Default()
	}
	switch strings.ToLower(strings.TrimSpace(driver)) {
	case "", DriverSQLite:
		db, _, err := openSQLite(ctx, dsn, log)
		return db, err
	case DriverPostgres, "postgresql":
		db, _, err := openPostgres(ctx, dsn, log)
		return db, err
	default:
		return nil, fmt.Errorf("database: unknown database driver %q: want %s or %s", driver, DriverSQLite, DriverPostgres)
	}
}

// gormConfig is the gorm configuration of every handle.
func gormConfig(log *slog.Logger) *gorm.Config {
	return &gorm.Config{
		// Through the dialects' Translate, which also marks driver errors.
		TranslateError: true,
		// Open pings with its own context (and SQLite with its own retries).
		DisableAutomaticPing: true,
		// gorm's prepared-statement cache starts a cleanup goroutine that never
		// exits unless the TTL is its own "no eviction" value (10 years); callers
		// that enable PrepareStmt would otherwise leak one per handle.
		PrepareStmtTTL: 10 * 365 * 24 * time.Hour,
		Logger: sqlLogger{Interface: logger.NewSlogLogger(log, logger.Config{
			LogLevel:                  logger.Warn,
			SlowThreshold:             slowSQL,
			IgnoreRecordNotFoundError: true,
			ParameterizedQueries:      true, // never log bound values
		}), level: logger.Warn},
		NowFunc: func() time.Time { return time.Now().UTC() },
	}
}

// slowSQL is the duration past which a statement is logged at warn level.
const slowSQL = time.Second

// sqlLogger is gorm's slog logger, asked to trace a statement only when it will
// log it: gorm's own builds the statement's text for every statement first,
// which costs a busy bot more than the statement itself.
type sqlLogger struct {
	logger.Interface
	level logger.LogLevel
}

// LogMode returns the logger at level.
func (l sqlLogger) LogMode(level logger.LogLevel) logger.Interface {
	return sqlLogger{Interface: l.Interface.LogMode(level), level: level}
}

// Trace logs a statement that failed, was slow, or any at info level.
func (l sqlLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	failed := err != nil && !errors.Is(err, gorm.ErrRecordNotFound)
	if l.level >= logger.Info || failed && l.level >= logger.Error || l.level >= logger.Warn && time.Since(begin) > slowSQL {
		l.Interface.Trace(ctx, begin, fc, err)
	}
}

// finish applies what every handle shares after gorm.Open.
func finish(db *gorm.DB) error {
	return registerCleaner(db)
}

// Close closes a database handle returned by Open.
func Close(db *gorm.DB) error {
	if db == nil {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("database: close: %w", err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("database: close: %w", err)
	}
	return nil
}
