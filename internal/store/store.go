// Package store opens detour's database and keeps the failover engine's durable
// profile state in it (D6: cooldowns and usage survive restarts and are shared
// by every session and every replica that shares the database).
//
// Two drivers, one code path (M1): SQLite (the default, embedded; cgo through
// mattn/go-sqlite3) and PostgreSQL (gorm.io/driver/postgres, pgx), both through
// gorm. Everything above the connection is the same on both: the tables, the
// statements, the text cleaning (CleanText: no NUL or invalid UTF-8 reaches a
// column), migrations under one lock (Migrate, M4) and short transactions retried
// on deadlocks, serialization failures and SQLite's busy (Transaction, M2).
//
// SQLite runs with WAL, a 5 s busy timeout, BEGIN IMMEDIATE transactions,
// foreign keys and synchronous=NORMAL over one connection; its file and WAL/SHM
// are created 0600 (their folder 0700), and Open refuses a file it cannot write
// or that fails PRAGMA quick_check (T7). Nothing slow ever runs while a
// transaction is open.
package store

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
// DriverPostgres) and migrates the store's own table. For SQLite, dsn is a plain
// path such as "detour.db" or a full "file:" DSN (see DSN); for Postgres, a
// "postgres://" URL or a "host=... dbname=..." keyword string. Constraint errors
// are translated (gorm.ErrDuplicatedKey ...), SQL is logged through log at warn
// level without bound values, and every string written is cleaned (CleanText).
// Errors name the SQLite path or the Postgres DSN with its password hidden, never
// DSN parameters. ctx bounds the opening only. Close the handle with Close.
func Open(ctx context.Context, driver, dsn string, log *slog.Logger) (*gorm.DB, error) {
	if log == nil {
		log = slog.Default()
	}
	var (
		db   *gorm.DB
		name string
		err  error
	)
	switch strings.ToLower(strings.TrimSpace(driver)) {
	case "", DriverSQLite:
		db, name, err = openSQLite(ctx, dsn, log)
	case DriverPostgres, "postgresql":
		db, name, err = openPostgres(ctx, dsn, log)
	default:
		return nil, fmt.Errorf("store: unknown database driver %q: want %s or %s", driver, DriverSQLite, DriverPostgres)
	}
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db, &stateRow{}); err != nil {
		_ = Close(db)
		return nil, fmt.Errorf("store: database %q: %w", name, explain(err))
	}
	return db, nil
}

// gormConfig is the gorm configuration of every handle.
func gormConfig(log *slog.Logger) *gorm.Config {
	return &gorm.Config{
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

// explain puts Problem's plain words in front of a storage failure.
func explain(err error) error {
	if p := Problem(err); p != "" {
		return fmt.Errorf("%s: %w", p, err)
	}
	return err
}

// Close closes a database handle returned by Open.
func Close(db *gorm.DB) error {
	if db == nil {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// migrateLock is the Postgres advisory lock key every detour process takes
// around its migrations ("detour" in ASCII, then 1), so all of them agree.
const migrateLock int64 = 0x646574_6f7572_01

// Migrate creates or updates the tables of models, once even when several
// processes start together on one database (M4): on Postgres under a
// transaction-scoped advisory lock (the others wait, then find the tables made),
// on SQLite inside one BEGIN IMMEDIATE transaction (the database's write lock).
// A collision the lock cannot rule out (SQLite busy beyond its timeout, a table
// created between a replica's look and its CREATE) is retried.
func Migrate(ctx context.Context, db *gorm.DB, models ...any) error {
	err := retry(ctx, func() error {
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if tx.Dialector.Name() == DriverPostgres {
				// Waiting here while another replica migrates is expected: not a slow query.
				quiet := tx.Session(&gorm.Session{Logger: tx.Logger.LogMode(logger.Error)})
				if err := quiet.Exec("SELECT pg_advisory_xact_lock(?)", migrateLock).Error; err != nil {
					return err
				}
			}
			return tx.AutoMigrate(models...)
		})
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return errors.Join(errConflict, err) // retryable: the next look sees it
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}
