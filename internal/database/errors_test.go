package database

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/detourbot/detour/internal/store"
)

// TestMark: the drivers' errors are marked with what they mean for detour, so
// store.Transaction retries the right ones and store.Problem words the rest.
// covers M2, T7
func TestMark(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		retry   bool
		problem string
	}{
		{"nil", nil, false, ""},
		{"deadlock", fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40P01"}), true, ""},
		{"serialization", &pgconn.PgError{Code: "40001"}, true, ""},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false, ""},
		{"postgres read-only", &pgconn.PgError{Code: "25006"}, false, problemReadOnly},
		{"postgres disk full", &pgconn.PgError{Code: "53100"}, false, problemFull},
		{"postgres out of connections", &pgconn.PgError{Code: "53300"}, false, "the database server is out of memory or connections"},
		{"postgres damaged", &pgconn.PgError{Code: "XX001"}, false, "the database server reports damaged storage"},
		{"sqlite busy", sqlite3.Error{Code: sqlite3.ErrBusy}, true, ""},
		{"sqlite locked", &sqlite3.Error{Code: sqlite3.ErrLocked}, true, ""},
		{"sqlite full", sqlite3.Error{Code: sqlite3.ErrFull}, false, problemFull},
		{"sqlite read-only", sqlite3.Error{Code: sqlite3.ErrReadonly}, false, problemReadOnly},
		{"sqlite corrupt", &sqlite3.Error{Code: sqlite3.ErrCorrupt}, false, problemDamaged},
		{"sqlite not a database", sqlite3.Error{Code: sqlite3.ErrNotADB}, false, problemDamaged},
		{"postgres index damaged", &pgconn.PgError{Code: "XX002"}, false, "the database server reports damaged storage"},
		{"postgres io error", &pgconn.PgError{Code: "58030"}, false, "the database server reports damaged storage"},
		{"other", errors.New("boom"), false, ""},
	}
	for _, tc := range tests {
		got := mark(tc.err)
		if retry := store.IsRetryable(got); retry != tc.retry {
			t.Errorf("%s: IsRetryable = %v, want %v", tc.name, retry, tc.retry)
		}
		if p := store.Problem(got); p != tc.problem {
			t.Errorf("%s: Problem = %q, want %q", tc.name, p, tc.problem)
		}
		if d := store.Damaged(got); d != (tc.problem == problemDamaged || strings.Contains(tc.name, "damaged")) {
			t.Errorf("%s: Damaged = %v", tc.name, d)
		}
		if tc.err != nil && got.Error() != tc.err.Error() {
			t.Errorf("%s: the text changed: %q, want the driver's %q", tc.name, got, tc.err)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: the driver's error is lost: %v", tc.name, got)
		}
		if again := mark(got); again != got {
			t.Errorf("%s: marked twice", tc.name)
		}
	}
	// gorm's own translation comes first: a duplicate key stays gorm's.
	d := sqliteDialect{&sqlite.Dialector{}}
	if err := d.Translate(sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}); !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Errorf("a unique violation translates to %v, want gorm.ErrDuplicatedKey", err)
	}
}
