// Package store is what every table of detour's database shares, on any driver,
// and the failover engine's durable profile state (D6: cooldowns and usage
// survive restarts and are shared by every session and every replica that
// shares the database).
//
// It links no database driver (internal/database opens the database and holds
// them), so the code above the connection builds without cgo. What it gives:
// the text cleaning (CleanText: no NUL or invalid UTF-8 reaches a column),
// migrations under one lock (Migrate, M4), short transactions retried on
// deadlocks, serialization failures and SQLite's busy (Transaction, M2), and the
// plain words of a storage problem (Problem, T7). The last two read the marks
// internal/database puts on its drivers' errors (DriverError).
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// postgres is the name gorm's Postgres dialector gives itself.
const postgres = "postgres"

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
			if tx.Dialector.Name() == postgres {
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
		return fmt.Errorf("store: migrate: %w", Explain(err))
	}
	return nil
}
