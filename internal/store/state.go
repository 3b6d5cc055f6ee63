package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/redact"
)

// stateRow is one row of profile_states: ids and state only, never a secret.
// Keys are unbounded text.
type stateRow struct {
	Key            string `gorm:"column:key;primaryKey"`
	LastUsed       nanoTime
	LastFailure    nanoTime
	ErrorCount     int `gorm:"not null;default:0"`
	Consecutive    int `gorm:"not null;default:0"`
	CooldownUntil  nanoTime
	CooldownReason string
	CooldownModel  string
	DisabledUntil  nanoTime
	DisabledReason string
	DisableCount   int `gorm:"not null;default:0"`
	RecoveryAt     nanoTime
	LastError      string
	LastProbe      nanoTime
	// UpdatedAt is the Unix nanoseconds of the last write: written, never read
	// (an old SQLite file may hold DATETIME text there).
	UpdatedAt int64 `gorm:"autoUpdateTime:nano;->:false;<-"`
}

// TableName names the table.
func (stateRow) TableName() string { return "profile_states" }

// nanoTime is a time column holding Unix nanoseconds in UTC as an integer
// (bigint on Postgres), NULL for the zero time: exact to the nanosecond and the
// same on both drivers. Times outside the int64 nanosecond range (before 1678,
// after 2262) are clamped to its ends. An SQLite file written before times were
// integers holds DATETIME text in these columns; it still reads, and the next
// write of the row replaces it.
type nanoTime struct{ t time.Time }

// Value stores the time.
func (n nanoTime) Value() (driver.Value, error) {
	if n.t.IsZero() {
		return nil, nil
	}
	return nanos(n.t), nil
}

// Scan reads the time.
func (n *nanoTime) Scan(v any) (err error) {
	n.t, err = decodeTime(v)
	return err
}

// GormDataType makes the column an integer.
func (nanoTime) GormDataType() string { return string(schema.Int) }

// GormDBDataType makes the column a 64-bit integer on every driver.
func (nanoTime) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == postgres {
		return "bigint"
	}
	return "integer"
}

// maxLastError bounds the stored failure preview, in bytes.
const maxLastError = 500

// scrub hides credentials (LastError is already a redacted preview; this is a
// second line of defence so no row ever holds one) and bounds the length.
func scrub(s string) string {
	if s == "" {
		return s
	}
	s = CleanText(redact.Secrets(s))
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

// textTimeFormats are the layouts of DATETIME text an older SQLite file may hold
// (what mattn/go-sqlite3 writes and parses).
var textTimeFormats = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// decodeTime turns a time column's value into a UTC time: an integer is Unix
// nanoseconds, NULL the zero time; DATETIME text (or a time the driver parsed
// from it) comes from a file written before times were integers.
func decodeTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64:
		return time.Unix(0, x).UTC(), nil
	case time.Time:
		if x.IsZero() {
			return time.Time{}, nil
		}
		return x.UTC(), nil
	case string:
		return parseTextTime(x)
	case []byte:
		return parseTextTime(string(x))
	}
	return time.Time{}, fmt.Errorf("unexpected %T in a time column", v)
}

func parseTextTime(s string) (time.Time, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "Z")
	for _, layout := range textTimeFormats {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			if t.IsZero() {
				return time.Time{}, nil
			}
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable time text %q", s)
}

func rowFromState(s failover.ProfileState) stateRow {
	return stateRow{
		Key:            s.Key,
		LastUsed:       nanoTime{s.LastUsed},
		LastFailure:    nanoTime{s.LastFailure},
		ErrorCount:     s.ErrorCount,
		Consecutive:    s.Consecutive,
		CooldownUntil:  nanoTime{s.CooldownUntil},
		CooldownReason: CleanText(string(s.CooldownReason)),
		CooldownModel:  CleanText(s.CooldownModel),
		DisabledUntil:  nanoTime{s.DisabledUntil},
		DisabledReason: CleanText(string(s.DisabledReason)),
		DisableCount:   s.DisableCount,
		RecoveryAt:     nanoTime{s.RecoveryAt},
		LastError:      s.LastError, // scrubbed by stored
		LastProbe:      nanoTime{s.LastProbe},
	}
}

func (r stateRow) state() failover.ProfileState {
	return failover.ProfileState{
		Key:            r.Key,
		LastUsed:       r.LastUsed.t,
		LastFailure:    r.LastFailure.t,
		ErrorCount:     r.ErrorCount,
		Consecutive:    r.Consecutive,
		CooldownUntil:  r.CooldownUntil.t,
		CooldownReason: classify.Reason(r.CooldownReason),
		CooldownModel:  r.CooldownModel,
		DisabledUntil:  r.DisabledUntil.t,
		DisabledReason: classify.Reason(r.DisabledReason),
		DisableCount:   r.DisableCount,
		RecoveryAt:     r.RecoveryAt.t,
		LastError:      r.LastError,
		LastProbe:      r.LastProbe.t,
	}
}

// stored returns next as the table will hold it (and give it back): UTC times
// clamped to nanoseconds, clean text, LastError scrubbed. cur is the row's
// current state, whose LastError is already scrubbed.
func stored(cur, next failover.ProfileState) failover.ProfileState {
	lastError := next.LastError
	r := rowFromState(next)
	r.LastError = cur.LastError
	if lastError != cur.LastError {
		r.LastError = scrub(lastError)
	}
	for _, t := range []*nanoTime{&r.LastUsed, &r.LastFailure, &r.CooldownUntil, &r.DisabledUntil, &r.RecoveryAt, &r.LastProbe} {
		if !t.t.IsZero() {
			t.t = time.Unix(0, nanos(t.t)).UTC()
		}
	}
	return r.state()
}

// columns returns the row's columns for an UPDATE of every state column.
func (r stateRow) columns(now time.Time) map[string]any {
	return map[string]any{
		"last_used": r.LastUsed, "last_failure": r.LastFailure,
		"error_count": r.ErrorCount, "consecutive": r.Consecutive,
		"cooldown_until": r.CooldownUntil, "cooldown_reason": r.CooldownReason, "cooldown_model": r.CooldownModel,
		"disabled_until": r.DisabledUntil, "disabled_reason": r.DisabledReason, "disable_count": r.DisableCount,
		"recovery_at": r.RecoveryAt, "last_error": r.LastError, "last_probe": r.LastProbe,
		"updated_at": now.UnixNano(),
	}
}

// StateStore is a failover.StateStore (with failover.BatchGetter and
// failover.BatchUpdater) over the profile_states table. It is safe for
// concurrent use, and every process sharing the database sees each other's
// writes at once: nothing is cached (D6, M2).
//
// An update is one short transaction that reads the rows of its keys with a row
// lock (SELECT ... FOR UPDATE on Postgres; SQLite's BEGIN IMMEDIATE holds the
// database's write lock from the start) in sorted key order, the one lock order
// of every batch, applies fn and writes the rows that changed. A row that does
// not exist cannot be locked: it is created with INSERT ... ON CONFLICT DO
// NOTHING, and when another process created it first the transaction runs again
// and locks it, so concurrent first updates lose nothing. Deadlocks,
// serialization failures and SQLite's busy are retried (Transaction).
type StateStore struct {
	db *gorm.DB
}

var (
	_ failover.StateStore   = (*StateStore)(nil)
	_ failover.BatchGetter  = (*StateStore)(nil)
	_ failover.BatchUpdater = (*StateStore)(nil)
)

// NewStateStore returns a store over db (a handle from internal/database.Open)
// and creates or updates its table (Migrate).
func NewStateStore(db *gorm.DB) (*StateStore, error) {
	if db == nil {
		return nil, errors.New("store: nil database")
	}
	if err := Migrate(context.Background(), db, &stateRow{}); err != nil {
		return nil, err
	}
	return &StateStore{db: db}, nil
}

// Get returns the state of key; a key never written gives the zero state with Key set.
func (s *StateStore) Get(ctx context.Context, key string) (failover.ProfileState, error) {
	st, err := s.GetMany(ctx, []string{key})
	if err != nil {
		return failover.ProfileState{Key: key}, err
	}
	return st[0], nil
}

// GetMany returns the states of keys, in order, read in one statement (so as of
// one moment).
func (s *StateStore) GetMany(ctx context.Context, keys []string) ([]failover.ProfileState, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: get profile states %q: %w", keys, err)
	}
	out := make([]failover.ProfileState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ks := cleanKeys(keys)
	cur, err := readStates(s.db.WithContext(ctx), ks, false)
	if err != nil {
		return nil, fmt.Errorf("store: get profile states %q: %w", keys, err)
	}
	for i, k := range ks {
		out[i] = cur[k].ProfileState
	}
	return out, nil
}

// Update applies fn to the current state of key and stores the result, so
// concurrent updates from any goroutine or process are never lost. fn must only
// change the state it is given and be quick (it runs while the row is locked),
// and may run more than once: first on a plain read, to return without locking
// or writing when it changes nothing, then inside the transaction, again when
// that is retried. The Key field is kept. It returns the stored state.
func (s *StateStore) Update(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	if fn == nil {
		return failover.ProfileState{Key: key}, errors.New("store: update profile state: nil function")
	}
	out, err := s.UpdateMany(ctx, []string{key}, func(_ int, st *failover.ProfileState) { fn(st) })
	if err != nil {
		return failover.ProfileState{Key: key}, err
	}
	return out[0], nil
}

// UpdateMany is Update for several keys in ONE transaction (one commit): fn(i,
// st) is applied, in index order, to the current state of keys[i], and the
// stored states are returned in keys' order. A key may appear more than once (fn
// then sees the earlier result). The same rules as Update apply to fn. Rows are
// locked in sorted key order whatever the order of keys, so two batches never
// wait for each other in a cycle.
func (s *StateStore) UpdateMany(ctx context.Context, keys []string, fn func(i int, st *failover.ProfileState)) ([]failover.ProfileState, error) {
	if fn == nil {
		return nil, errors.New("store: update profile states: nil function")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: update profile states %q: %w", keys, err)
	}
	if len(keys) == 0 {
		return []failover.ProfileState{}, nil
	}
	ks := cleanKeys(keys)
	// Most updates of a busy bot change nothing (a success on a clean profile):
	// a plain read shows it without a lock or a write transaction.
	cur, err := readStates(s.db.WithContext(ctx), ks, false)
	if err != nil {
		return nil, fmt.Errorf("store: update profile states %q: %w", keys, err)
	}
	out, next := apply(ks, cur, fn)
	if !changed(cur, next) {
		return out, nil
	}
	err = Transaction(ctx, s.db, func(tx *gorm.DB) error {
		cur, err := readStates(tx, ks, true)
		if err != nil {
			return err
		}
		out, next = apply(ks, cur, fn)
		now := time.Now()
		for _, k := range sortedKeys(ks) {
			if next[k] == cur[k] {
				continue
			}
			row := rowFromState(next[k].ProfileState)
			if cur[k].exists {
				if err := tx.Model(&stateRow{}).Where(map[string]any{"key": k}).Updates(row.columns(now)).Error; err != nil {
					return err
				}
				continue
			}
			res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return errConflict // another process created it: run again and lock it
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: update profile states %q: %w", keys, Explain(err))
	}
	return out, nil
}

// current is a row's state as read, and whether the row exists.
type current struct {
	failover.ProfileState
	exists bool
}

// readStates reads the rows of keys (distinct), locking them when lock is set,
// in sorted key order. Missing keys get the zero state with Key set.
func readStates(tx *gorm.DB, keys []string, lock bool) (map[string]current, error) {
	ks := sortedKeys(keys)
	// Byte order on both drivers (SQLite's default; Postgres's "C" collation),
	// the order sortedKeys gives the inserts.
	order := `"key"`
	if tx.Dialector.Name() == postgres {
		order += ` COLLATE "C"`
	}
	q := tx.Where(map[string]any{"key": ks}).Order(order)
	if lock {
		q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
	}
	var rows []stateRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]current, len(ks))
	for _, k := range ks {
		out[k] = current{ProfileState: failover.ProfileState{Key: k}}
	}
	for _, r := range rows {
		out[r.Key] = current{ProfileState: r.state(), exists: true}
	}
	return out, nil
}

// apply runs fn over the states of keys in index order and returns the states
// fn produced (as they will be stored) by index and by key.
func apply(keys []string, cur map[string]current, fn func(int, *failover.ProfileState)) ([]failover.ProfileState, map[string]current) {
	next := make(map[string]current, len(cur))
	for k, c := range cur {
		next[k] = c
	}
	out := make([]failover.ProfileState, len(keys))
	for i, k := range keys {
		c := next[k]
		st := c.ProfileState
		fn(i, &st)
		st.Key = k
		c.ProfileState = stored(c.ProfileState, st)
		next[k] = c
		out[i] = c.ProfileState
	}
	return out, next
}

func changed(cur, next map[string]current) bool {
	for k, c := range next {
		if cur[k] != c {
			return true
		}
	}
	return false
}

func cleanKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = CleanText(k)
	}
	return out
}

// sortedKeys returns the distinct keys in sorted order: the one lock order.
func sortedKeys(keys []string) []string {
	ks := slices.Clone(keys)
	slices.Sort(ks)
	return slices.Compact(ks)
}
