package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"
)

// retryTries bounds how often Transaction runs fn. Waits grow from about 10 ms
// to at most 400 ms with full jitter, so two transactions that collided do not
// collide again in step.
const (
	retryTries   = 8
	retryBase    = 10 * time.Millisecond
	retryMaxWait = 400 * time.Millisecond
)

// errConflict marks a collision with another process that running again
// resolves (M2, M4): a row another process created while this transaction meant
// to create it (the retry finds and locks it), or a table created between a
// replica's look and its CREATE.
var errConflict = errors.New("store: concurrent change, retried")

// Transaction runs fn in one transaction of db and retries it, a bounded number
// of times with a jittered pause, when the database says it may succeed if run
// again: a deadlock (Postgres 40P01), a serialization failure (40001), SQLite's
// busy or locked, or a row another process created meanwhile (M2). fn may
// therefore run more than once: it must only touch the database through tx and
// keep no other effect until it returns nil. A transaction that keeps failing
// returns the last error.
func Transaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return retry(ctx, func() error { return db.WithContext(ctx).Transaction(fn) })
}

// retry runs op until it succeeds, fails with an error IsRetryable does not
// accept, ctx ends, or retryTries runs were made; between runs it waits a
// jittered, growing pause. It returns op's last error (joined with ctx's when
// ctx ended during a pause).
func retry(ctx context.Context, op func() error) error {
	var err error
	for try := 0; ; try++ {
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				return cerr
			}
			return errors.Join(err, cerr)
		}
		if err = op(); err == nil || !IsRetryable(err) || try == retryTries-1 {
			return err
		}
		if !sleep(ctx, backoff(try)) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// backoff is the pause before run try+2: full jitter over an exponential ceiling.
func backoff(try int) time.Duration {
	ceiling := min(retryBase<<try, retryMaxWait)
	return ceiling/2 + rand.N(ceiling/2+1)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// DriverError is a driver's error as the package that opened the database
// (internal/database) reads it: whether running the same transaction again may
// cure it, and the plain words of a problem of the storage itself. Its text is
// the driver's own.
type DriverError struct {
	Err error
	// Retryable: a deadlock, a serialization failure, SQLite's busy or locked.
	Retryable bool
	// Problem says why writes fail until someone fixes the storage ("the
	// database is read-only", "the disk holding the database is full", "the
	// database file is damaged"); "" for none.
	Problem string
	// Damaged: the database's own pages are damaged (SQLite's corrupt or
	// not-a-database, Postgres's data_corrupted or index_corrupted). Unlike a
	// full disk or a read-only file, it does not pass by itself: it takes a
	// restore.
	Damaged bool
}

func (e *DriverError) Error() string { return e.Err.Error() }

// Unwrap returns the driver's error.
func (e *DriverError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is a failure that running the same
// transaction again may cure (see Transaction).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var de *DriverError
	return errors.Is(err, errConflict) || errors.As(err, &de) && de.Retryable
}

// Problem says in a few words why a write to the database failed when the cause
// is the storage itself and retrying will not help until someone fixes it
// ("the database is read-only", "the disk holding the database is full", "the
// database file is damaged"); "" for any other error. Callers show it to users
// and operators instead of a raw driver error (T7).
func Problem(err error) string {
	var de *DriverError
	if errors.As(err, &de) {
		return de.Problem
	}
	return ""
}

// Damaged reports whether err says the database's pages are damaged (see
// DriverError.Damaged).
func Damaged(err error) bool {
	var de *DriverError
	return errors.As(err, &de) && de.Damaged
}

// Explain puts Problem's plain words in front of a storage failure.
func Explain(err error) error {
	if p := Problem(err); p != "" {
		return fmt.Errorf("%s: %w", p, err)
	}
	return err
}
