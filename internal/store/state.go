package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// stateRow is one row of profile_states: ids and state only, never a secret.
// Times are INTEGER Unix nanoseconds in UTC (NULL for a zero time): binding and
// reading an integer is far cheaper than the DATETIME text the SQLite driver
// formats and parses, and it keeps nanoseconds exactly. Times outside the int64
// nanosecond range (before 1678, after 2262) are clamped to its ends. A file
// written before this change holds DATETIME text in these columns: the SQLite
// fast path still decodes it (decodeTime), and the next write of a row replaces it.
type stateRow struct {
	Key            string `gorm:"column:key;primaryKey;size:300"`
	LastUsed       *int64
	LastFailure    *int64
	ErrorCount     int `gorm:"not null;default:0"`
	Consecutive    int `gorm:"not null;default:0"`
	CooldownUntil  *int64
	CooldownReason string `gorm:"size:40"`
	CooldownModel  string `gorm:"size:300"`
	DisabledUntil  *int64
	DisabledReason string `gorm:"size:40"`
	DisableCount   int    `gorm:"not null;default:0"`
	RecoveryAt     *int64
	LastError      string `gorm:"size:600"`
	LastProbe      *int64
	UpdatedAt      int64 `gorm:"autoUpdateTime:nano"` // Unix nanoseconds of the last write
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

// minNano and maxNano are the times int64 Unix nanoseconds can hold.
var (
	minNano = time.Unix(0, math.MinInt64)
	maxNano = time.Unix(0, math.MaxInt64)
)

// nanos returns t as Unix nanoseconds, clamped to the int64 range.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minNano):
		return math.MinInt64
	case t.After(maxNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func toDB(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := nanos(t)
	return &n
}

func fromDB(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(0, *n).UTC()
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
		CooldownReason: classify.Reason(r.CooldownReason),
		CooldownModel:  r.CooldownModel,
		DisabledUntil:  fromDB(r.DisabledUntil),
		DisabledReason: classify.Reason(r.DisabledReason),
		DisableCount:   r.DisableCount,
		RecoveryAt:     fromDB(r.RecoveryAt),
		LastError:      r.LastError,
		LastProbe:      fromDB(r.LastProbe),
	}
}

// StateStore is a failover.StateStore over the profile_states table. It is safe
// for concurrent use, and several processes (replicas) sharing the database file
// always see each other's writes (D6).
//
// On SQLite it runs driver-level prepared statements and keeps an in-process cache
// of rows that is validated on every call by PRAGMA data_version (which moves when
// another connection commits) and total_changes() (which moves when this
// connection writes any row), see fastpath.go: a Get is one cheap statement when
// nothing changed, and an Update is one BEGIN IMMEDIATE transaction with a single
// UPSERT, or nothing at all when fn changes nothing. An Update that only moves
// LastUsed forward on an existing row is written behind: visible at once to this
// handle, written within about a second (or with the handle's next write
// transaction, or by Close), so other replicas see it up to ~1 s late and a crash
// may lose the last second of LastUsed values; nothing else is ever deferred.
// All stores on one handle share one cache. On other databases it goes through gorm with a row lock
// (SELECT ... FOR UPDATE) and caches nothing.
type StateStore struct {
	db    *gorm.DB
	sqlDB *sql.DB   // SQLite fast path; nil = gorm path
	fast  *fastPath // shared by every store on sqlDB
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
		s.sqlDB, s.fast = sqlDB, fastPathFor(sqlDB)
	}
	return s, nil
}

// Get returns the state of key; a key never written gives the zero state with Key set.
func (s *StateStore) Get(ctx context.Context, key string) (failover.ProfileState, error) {
	var (
		st  failover.ProfileState
		err error
	)
	if err = ctx.Err(); err == nil && s.sqlDB != nil {
		st, err = s.fast.get(ctx, key)
	} else if err == nil {
		st, err = s.gormGet(s.db.WithContext(ctx), key, false)
	}
	if err != nil {
		return failover.ProfileState{Key: key}, fmt.Errorf("store: get profile state %q: %w", key, err)
	}
	return st, nil
}

// GetMany returns the states of keys, in order, as of one moment (on SQLite one
// validation of the cache for all of them). The engine can use it to read a
// model's key and its profiles' keys together; like UpdateMany its signature
// uses only failover and builtin types.
func (s *StateStore) GetMany(ctx context.Context, keys []string) ([]failover.ProfileState, error) {
	out := make([]failover.ProfileState, len(keys))
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: get profile states %q: %w", keys, err)
	}
	if len(keys) == 0 {
		return out, nil
	}
	if s.sqlDB != nil {
		if err := s.fast.getMany(ctx, keys, out); err != nil {
			return nil, fmt.Errorf("store: get profile states %q: %w", keys, err)
		}
		return out, nil
	}
	for i, key := range keys {
		st, err := s.gormGet(s.db.WithContext(ctx), key, false)
		if err != nil {
			return nil, fmt.Errorf("store: get profile states %q: %w", keys, err)
		}
		out[i] = st
	}
	return out, nil
}

// busyRetries bounds how often Update retries a transaction that could not take
// the write lock within the busy timeout (another process held it too long).
const busyRetries = 3

// Update applies fn to the current state of key and stores the result, in one
// short write transaction (BEGIN IMMEDIATE), so concurrent updates from any
// goroutine or process are never lost. fn must only change the state it is given
// and be quick: it runs while the database's write lock is held, and may run more
// than once (on a copy of a cached current row, to return without locking or
// writing when it changes nothing, and again when the transaction is retried).
// The Key field is kept. It returns the stored state.
func (s *StateStore) Update(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	if fn == nil {
		return failover.ProfileState{Key: key}, errors.New("store: update profile state: nil function")
	}
	var out failover.ProfileState
	var err error
	for try := 0; ; try++ {
		if err = ctx.Err(); err != nil {
			break
		}
		if s.sqlDB != nil {
			out, err = s.fast.update(ctx, key, fn)
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

// UpdateMany is Update for several keys in ONE write transaction (one lock, one
// commit): fn(i, st) is applied to the current state of keys[i], and the stored
// states are returned in keys' order. A key may appear more than once (fn then
// sees the earlier result). The same rules as Update apply to fn. The engine can
// use it to record a failure of a profile and of its model together; its
// signature uses only failover and builtin types, so the failover package can
// detect it with an interface of its own.
func (s *StateStore) UpdateMany(ctx context.Context, keys []string, fn func(i int, st *failover.ProfileState)) ([]failover.ProfileState, error) {
	if fn == nil {
		return nil, errors.New("store: update profile states: nil function")
	}
	out := make([]failover.ProfileState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	var err error
	for try := 0; ; try++ {
		if err = ctx.Err(); err != nil {
			break
		}
		if s.sqlDB != nil {
			err = s.fast.updateMany(ctx, keys, fn, out)
		} else {
			err = s.gormUpdateMany(ctx, keys, fn, out)
		}
		if err == nil || !IsBusy(err) || try >= busyRetries {
			break
		}
		t := time.NewTimer(time.Duration(try+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("store: update profile states %q: %w", keys, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: update profile states %q: %w", keys, err)
	}
	return out, nil
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

// gormUpdateMany is UpdateMany for databases other than SQLite.
func (s *StateStore) gormUpdateMany(ctx context.Context, keys []string, fn func(int, *failover.ProfileState), out []failover.ProfileState) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i, key := range keys {
			st, err := s.gormGet(tx, key, true)
			if err != nil {
				return err
			}
			fn(i, &st)
			st.Key = key
			row := rowFromState(st)
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
				return err
			}
			out[i] = row.state()
		}
		return nil
	})
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
