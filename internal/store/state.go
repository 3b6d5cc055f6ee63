package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/detourbot/detour/failover"
)

// stateRow is one row of profile_states: ids and state only, never a secret.
// Zero times are stored as NULL, others in UTC.
type stateRow struct {
	Key            string `gorm:"column:key;primaryKey;size:300"`
	LastUsed       *time.Time
	LastFailure    *time.Time
	ErrorCount     int `gorm:"not null;default:0"`
	Consecutive    int `gorm:"not null;default:0"`
	CooldownUntil  *time.Time
	CooldownReason string `gorm:"size:40"`
	CooldownModel  string `gorm:"size:300"`
	DisabledUntil  *time.Time
	DisabledReason string `gorm:"size:40"`
	DisableCount   int    `gorm:"not null;default:0"`
	RecoveryAt     *time.Time
	LastError      string `gorm:"size:600"`
	LastProbe      *time.Time
	UpdatedAt      time.Time
}

// TableName names the table.
func (stateRow) TableName() string { return "profile_states" }

// maxLastError bounds the stored failure preview, in bytes.
const maxLastError = 500

// secretPattern matches things that look like credentials; LastError is already a
// redacted preview, this is a second line of defence so no row ever holds one.
var secretPattern = regexp.MustCompile(`(?i)(\bsk-[a-z0-9_\-]{4,}|\bxox[a-z]-[a-z0-9\-]+|\bxapp-[a-z0-9\-]+|\bAIza[0-9a-z_\-]{10,}|\bbearer\s+[^\s"',]+|\b(?:api[_-]?key|access[_-]?token|token|key)=[^&\s"',]+)`)

// scrub removes credential-looking text and bounds the length.
func scrub(s string) string {
	if s == "" {
		return s
	}
	s = secretPattern.ReplaceAllString(s, "[redacted]")
	if len(s) > maxLastError {
		cut := maxLastError
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

func toDB(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC().Round(0) // drop the monotonic reading; keep nanoseconds
	return &u
}

func fromDB(t *time.Time) time.Time {
	if t == nil || t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func rowFromState(s failover.ProfileState) stateRow {
	return stateRow{
		Key:            s.Key,
		LastUsed:       toDB(s.LastUsed),
		LastFailure:    toDB(s.LastFailure),
		ErrorCount:     s.ErrorCount,
		Consecutive:    s.Consecutive,
		CooldownUntil:  toDB(s.CooldownUntil),
		CooldownReason: string(s.CooldownReason),
		CooldownModel:  s.CooldownModel,
		DisabledUntil:  toDB(s.DisabledUntil),
		DisabledReason: string(s.DisabledReason),
		DisableCount:   s.DisableCount,
		RecoveryAt:     toDB(s.RecoveryAt),
		LastError:      scrub(s.LastError),
		LastProbe:      toDB(s.LastProbe),
	}
}

func (r stateRow) state() failover.ProfileState {
	return failover.ProfileState{
		Key:            r.Key,
		LastUsed:       fromDB(r.LastUsed),
		LastFailure:    fromDB(r.LastFailure),
		ErrorCount:     r.ErrorCount,
		Consecutive:    r.Consecutive,
		CooldownUntil:  fromDB(r.CooldownUntil),
		CooldownReason: failover.Reason(r.CooldownReason),
		CooldownModel:  r.CooldownModel,
		DisabledUntil:  fromDB(r.DisabledUntil),
		DisabledReason: failover.Reason(r.DisabledReason),
		DisableCount:   r.DisableCount,
		RecoveryAt:     fromDB(r.RecoveryAt),
		LastError:      r.LastError,
		LastProbe:      fromDB(r.LastProbe),
	}
}

// StateStore is a failover.StateStore over the profile_states table. It keeps no
// in-process cache, so several processes (replicas) sharing the database always
// see each other's writes. It is safe for concurrent use.
//
// On SQLite it runs two prepared statements in a BEGIN IMMEDIATE transaction;
// on other databases it goes through gorm with a row lock (SELECT ... FOR UPDATE).
type StateStore struct {
	db     *gorm.DB
	sqlDB  *sql.DB   // SQLite fast path; nil = gorm path
	get    *sql.Stmt // selectSQL
	upsert *sql.Stmt // upsertSQL
}

var _ failover.StateStore = (*StateStore)(nil)

// stateColumns are the columns read and written, in ProfileState order after key.
var stateColumns = []string{
	"last_used", "last_failure", "error_count", "consecutive",
	"cooldown_until", "cooldown_reason", "cooldown_model",
	"disabled_until", "disabled_reason", "disable_count",
	"recovery_at", "last_error", "last_probe",
}

var (
	selectSQL = "SELECT " + strings.Join(stateColumns, ", ") + " FROM profile_states WHERE key = ?"
	upsertSQL = func() string {
		cols := append([]string{"key"}, stateColumns...)
		cols = append(cols, "updated_at")
		set := make([]string, 0, len(cols)-1)
		for _, c := range cols[1:] {
			set = append(set, c+" = excluded."+c)
		}
		return "INSERT INTO profile_states (" + strings.Join(cols, ", ") + ") VALUES (" +
			strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ") ON CONFLICT(key) DO UPDATE SET " +
			strings.Join(set, ", ")
	}()
)

// NewStateStore returns a store over db (from Open) and migrates its table.
func NewStateStore(db *gorm.DB) (*StateStore, error) {
	if db == nil {
		return nil, errors.New("store: nil database")
	}
	if err := Migrate(db, &stateRow{}); err != nil {
		return nil, err
	}
	s := &StateStore{db: db}
	if db.Dialector.Name() == "sqlite" {
		sqlDB, err := db.DB()
		if err != nil {
			return nil, fmt.Errorf("store: state store: %w", err)
		}
		if s.get, err = sqlDB.Prepare(selectSQL); err != nil {
			return nil, fmt.Errorf("store: state store: prepare select: %w", err)
		}
		if s.upsert, err = sqlDB.Prepare(upsertSQL); err != nil {
			_ = s.get.Close()
			return nil, fmt.Errorf("store: state store: prepare upsert: %w", err)
		}
		s.sqlDB = sqlDB
	}
	return s, nil
}

// Get returns the state of key; a key never written gives the zero state with Key set.
func (s *StateStore) Get(ctx context.Context, key string) (failover.ProfileState, error) {
	var (
		st  failover.ProfileState
		err error
	)
	if s.sqlDB != nil {
		st, err = scanState(s.get.QueryRowContext(ctx, key), key)
	} else {
		st, err = s.gormGet(s.db.WithContext(ctx), key, false)
	}
	if err != nil {
		return failover.ProfileState{Key: key}, fmt.Errorf("store: get profile state %q: %w", key, err)
	}
	return st, nil
}

// busyRetries bounds how often Update retries a transaction that could not take
// the write lock within the busy timeout (another process held it too long).
const busyRetries = 3

// Update applies fn to the current state of key and stores the result, in one
// short write transaction (BEGIN IMMEDIATE), so concurrent updates from any
// goroutine or process are never lost. fn must only change the state it is given:
// it runs while the database's write lock is held, and may run again if the
// transaction is retried. The Key field is kept. It returns the stored state.
func (s *StateStore) Update(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	if fn == nil {
		return failover.ProfileState{Key: key}, errors.New("store: update profile state: nil function")
	}
	var out failover.ProfileState
	var err error
	for try := 0; ; try++ {
		if s.sqlDB != nil {
			out, err = s.sqliteUpdate(ctx, key, fn)
		} else {
			out, err = s.gormUpdate(ctx, key, fn)
		}
		if err == nil || !IsBusy(err) || try >= busyRetries {
			break
		}
		t := time.NewTimer(time.Duration(try+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return failover.ProfileState{Key: key}, fmt.Errorf("store: update profile state %q: %w", key, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
	if err != nil {
		return failover.ProfileState{Key: key}, fmt.Errorf("store: update profile state %q: %w", key, err)
	}
	return out, nil
}

func (s *StateStore) sqliteUpdate(ctx context.Context, key string, fn func(*failover.ProfileState)) (out failover.ProfileState, err error) {
	tx, err := s.sqlDB.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		return out, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	st, err := scanState(tx.StmtContext(ctx, s.get).QueryRowContext(ctx, key), key)
	if err != nil {
		return out, err
	}
	before := st
	fn(&st)
	st.Key = key
	if st == before {
		// Nothing changed: end the transaction without writing.
		if err = tx.Commit(); err != nil {
			return out, err
		}
		return st, nil
	}
	r := rowFromState(st)
	_, err = tx.StmtContext(ctx, s.upsert).ExecContext(ctx, r.Key,
		nullTime(r.LastUsed), nullTime(r.LastFailure), r.ErrorCount, r.Consecutive,
		nullTime(r.CooldownUntil), r.CooldownReason, r.CooldownModel,
		nullTime(r.DisabledUntil), r.DisabledReason, r.DisableCount,
		nullTime(r.RecoveryAt), r.LastError, nullTime(r.LastProbe),
		time.Now().UTC())
	if err != nil {
		return out, err
	}
	if err = tx.Commit(); err != nil {
		return out, err
	}
	return r.state(), nil
}

func nullTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: *t, Valid: true}
}

// scanState reads one selectSQL row; no row gives the zero state with Key set.
func scanState(row *sql.Row, key string) (failover.ProfileState, error) {
	var (
		r                                             stateRow
		lu, lf, cu, du, ra, lp                        sql.NullTime
		cooldownReason, cooldownModel, disabledReason sql.NullString
		lastError                                     sql.NullString
	)
	err := row.Scan(&lu, &lf, &r.ErrorCount, &r.Consecutive, &cu, &cooldownReason, &cooldownModel,
		&du, &disabledReason, &r.DisableCount, &ra, &lastError, &lp)
	if errors.Is(err, sql.ErrNoRows) {
		return failover.ProfileState{Key: key}, nil
	}
	if err != nil {
		return failover.ProfileState{Key: key}, err
	}
	ptr := func(n sql.NullTime) *time.Time {
		if !n.Valid {
			return nil
		}
		return &n.Time
	}
	r.Key = key
	r.LastUsed, r.LastFailure, r.CooldownUntil = ptr(lu), ptr(lf), ptr(cu)
	r.DisabledUntil, r.RecoveryAt, r.LastProbe = ptr(du), ptr(ra), ptr(lp)
	r.CooldownReason, r.CooldownModel = cooldownReason.String, cooldownModel.String
	r.DisabledReason, r.LastError = disabledReason.String, lastError.String
	return r.state(), nil
}

// gormGet reads key through gorm, with a row lock when lock is set.
func (s *StateStore) gormGet(tx *gorm.DB, key string, lock bool) (failover.ProfileState, error) {
	if lock {
		tx = tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
	}
	var rows []stateRow
	if err := tx.Where(map[string]any{"key": key}).Limit(1).Find(&rows).Error; err != nil {
		return failover.ProfileState{Key: key}, err
	}
	if len(rows) == 0 {
		return failover.ProfileState{Key: key}, nil
	}
	return rows[0].state(), nil
}

// gormUpdate is Update for databases other than SQLite. A row that does not exist
// yet cannot be locked, so two first writers may race; the upsert keeps the later one.
func (s *StateStore) gormUpdate(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	var out failover.ProfileState
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		st, err := s.gormGet(tx, key, true)
		if err != nil {
			return err
		}
		fn(&st)
		st.Key = key
		row := rowFromState(st)
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
			return err
		}
		out = row.state()
		return nil
	})
	return out, err
}
