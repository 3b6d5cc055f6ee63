package database

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"

	"github.com/detourbot/detour/internal/store"
)

// The plain words of the storage problems both drivers report.
const (
	problemReadOnly = "the database is read-only"
	problemFull     = "the disk holding the database is full"
	problemDamaged  = "the database file is damaged"
)

// mark returns err as a store.DriverError when a driver's error in it means
// something to detour (a retry may cure it, or the storage itself has a
// problem); any other error is returned as it is.
func mark(err error) error {
	if err == nil {
		return nil
	}
	var de *store.DriverError
	if errors.As(err, &de) {
		return err
	}
	if ro := (*readOnlyError)(nil); errors.As(err, &ro) {
		return &store.DriverError{Err: err, Problem: problemReadOnly}
	}
	retry, problem := sqliteFault(err)
	if !retry && problem == "" {
		retry, problem = postgresFault(err)
	}
	if !retry && problem == "" {
		return err
	}
	return &store.DriverError{Err: err, Retryable: retry, Problem: problem, Damaged: damaged(err)}
}

// postgresFault reads Postgres's SQLSTATE codes: a deadlock (40P01) or a
// serialization failure (40001) may pass when the transaction runs again.
func postgresFault(err error) (retry bool, problem string) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false, ""
	}
	switch {
	case pe.Code == "40P01" || pe.Code == "40001":
		return true, ""
	case pe.Code == "25006":
		return false, problemReadOnly
	case pe.Code == "53100":
		return false, problemFull
	case pe.Code == "53200" || pe.Code == "53300":
		return false, "the database server is out of memory or connections"
	case strings.HasPrefix(pe.Code, "58") || pgDamaged(pe):
		return false, "the database server reports damaged storage"
	}
	return false, ""
}

// damaged reports whether err, a driver's error, says the database's pages
// are damaged: SQLite's corrupt or not-a-database, Postgres's data_corrupted
// (XX001) or index_corrupted (XX002).
func damaged(err error) bool {
	var pe *pgconn.PgError
	return sqliteDamaged(err) || errors.As(err, &pe) && pgDamaged(pe)
}

func pgDamaged(pe *pgconn.PgError) bool { return pe.Code == "XX001" || pe.Code == "XX002" }

// gorm hands every error of a handle to its dialector's Translate (gorm.Config
// TranslateError): these dialectors keep the driver's own translation
// (gorm.ErrDuplicatedKey ...) and mark the rest.

type sqliteDialect struct{ *sqlite.Dialector }

// Translate translates err as gorm's SQLite dialector does, then marks it.
func (d sqliteDialect) Translate(err error) error { return mark(d.Dialector.Translate(err)) }

type postgresDialect struct{ *postgres.Dialector }

// Translate translates err as gorm's Postgres dialector does, then marks it.
func (d postgresDialect) Translate(err error) error { return mark(d.Dialector.Translate(err)) }
