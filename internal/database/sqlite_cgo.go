//go:build cgo

package database

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"syscall"

	"github.com/mattn/go-sqlite3"
)

// Every reference to mattn/go-sqlite3's own names lives in this file: without
// cgo the package has no such names, and sqlite_nocgo.go stands in with a build
// error that says what to install.

// sqliteFault reads SQLite's own error codes: busy or locked may pass when the
// transaction runs again; the others are problems of the storage itself (T7).
func sqliteFault(err error) (retry bool, problem string) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		var sp *sqlite3.Error
		if !errors.As(err, &sp) || sp == nil {
			return false, ""
		}
		se = *sp
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return true, ""
	case sqlite3.ErrReadonly, sqlite3.ErrPerm:
		return false, problemReadOnly
	case sqlite3.ErrFull:
		return false, problemFull
	case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return false, problemDamaged
	case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		switch se.SystemErrno {
		case syscall.EPERM, syscall.EACCES, syscall.EROFS:
			// An immutable file, a file whose mode changed, a file system
			// remounted read-only.
			return false, problemReadOnly
		}
		return false, "the database file cannot be written (input/output error)"
	}
	return false, ""
}

// sqliteDamaged reports whether err is SQLite's corrupt or not-a-database.
func sqliteDamaged(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		var sp *sqlite3.Error
		if !errors.As(err, &sp) || sp == nil {
			return false
		}
		se = *sp
	}
	return se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB
}

// sqliteConnector returns the connector of one SQLite handle (see connector).
func sqliteConnector(dsn, journal string, guard *writeGuard) driver.Connector {
	return &connector{dsn: dsn, journal: journal, guard: guard}
}

// connector opens the SQLite connections of one handle (database/sql's
// driver.Connector), with what mattn/go-sqlite3's own DSN handling cannot do.
type connector struct {
	dsn string // what mattn/go-sqlite3 opens
	// journal, when set, is the journal mode to enter after the connection is
	// open: in exclusive locking mode WAL must be entered after the locking mode
	// is set, or the WAL index is shared memory after all (mattn sets the
	// journal mode first).
	journal string
	// guard, when set, runs before SQLite touches the database: see writeGuard.
	guard *writeGuard
}

func (c *connector) Driver() driver.Driver { return &sqlite3.SQLiteDriver{} }

// Connect opens one connection.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := c.guard.check(); err != nil { // opening reads the database
		return nil, err
	}
	conn, err := (&sqlite3.SQLiteDriver{}).Open(c.dsn)
	if err != nil {
		return nil, err
	}
	sc := conn.(*sqlite3.SQLiteConn)
	if c.journal != "" {
		if _, err := sc.ExecContext(ctx, "PRAGMA journal_mode = "+c.journal, nil); err != nil {
			_ = sc.Close()
			return nil, fmt.Errorf("set journal mode %s: %w", c.journal, err)
		}
	}
	if c.guard == nil {
		return sc, nil
	}
	return &guardedConn{SQLiteConn: sc, guard: c.guard}, nil
}

// guardedConn is a connection whose every transaction and statement first asks
// its guard whether the database's files can still be written. The other
// methods of mattn's connection are promoted unchanged.
type guardedConn struct {
	*sqlite3.SQLiteConn
	guard *writeGuard
}

func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.guard.check(); err != nil {
		return nil, err
	}
	return c.SQLiteConn.BeginTx(ctx, opts)
}

func (c *guardedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.guard.check(); err != nil {
		return nil, err
	}
	return c.SQLiteConn.ExecContext(ctx, query, args)
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.guard.check(); err != nil {
		return nil, err
	}
	return c.SQLiteConn.QueryContext(ctx, query, args)
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.guard.check(); err != nil {
		return nil, err
	}
	return c.SQLiteConn.PrepareContext(ctx, query)
}

func (c *guardedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *guardedConn) Close() error {
	if err := c.guard.check(); err != nil {
		// Closing checkpoints the WAL through the shared memory: leave the
		// connection to the process's exit rather than fault on it.
		return err
	}
	return c.SQLiteConn.Close()
}
