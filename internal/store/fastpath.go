package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/detourbot/detour/failover"
)

// The SQLite fast path of StateStore.
//
// It runs driver-level prepared statements on the pool's connection (taken with
// sql.Conn.Raw, so database/sql's per-query bookkeeping is skipped) and keeps an
// in-process cache of profile_states rows. The cache is only trusted while the
// connection's validation stamp is unchanged:
//
//   - PRAGMA data_version changes on a connection when ANOTHER connection (another
//     process, replica or handle on the file) commits; our own commits leave it as is.
//   - total_changes() changes when THIS connection changes any row (another
//     StateStore on the same handle, or raw SQL through gorm), our own writes
//     included; those are accounted for exactly (the upsert's changes count).
//
// Every Get and Update reads the stamp first (one cheap statement). When it moved,
// the whole cache is dropped. Inside Update's BEGIN IMMEDIATE transaction the stamp
// is read again after the write lock is taken: when unchanged the cached row is
// current and the SELECT is skipped. An Update whose fn changes nothing on a
// current cached row returns without taking the write lock at all (linearised at
// the stamp read). A cached row may be newer than its stamp (read after it), never
// older, so a stale read is impossible.

// Statements of the fast path, prepared once per connection.
const (
	stBegin = iota
	stCommit
	stRollback
	stStamp
	stSelect
	stUpsert
	numStmts
)

var fastQueries = [numStmts]string{
	stBegin:    "BEGIN IMMEDIATE",
	stCommit:   "COMMIT",
	stRollback: "ROLLBACK",
	stStamp:    "SELECT data_version, total_changes() FROM pragma_data_version",
	stSelect:   selectSQL,
	stUpsert:   upsertSQL,
}

// maxCached bounds the cache; past it the cache is dropped and refilled.
const maxCached = 4096

// fastPath holds the statements and the cache of one connection. mu is held for
// a whole operation, inside conn.Raw (lock order: pool connection, then mu).
type fastPath struct {
	db *sql.DB

	mu    sync.Mutex
	conn  driver.Conn // the connection stmts and rows belong to; nil = none yet
	stmts [numStmts]driver.Stmt
	valid bool  // dv/tc are a baseline the cache is current at
	dv    int64 // data_version at the baseline
	tc    int64 // total_changes() at the baseline (after our own writes)
	rows  map[string]failover.ProfileState
	args  [15]driver.NamedValue // upsert arguments, reused under mu
	dest  [13]driver.Value      // scan buffer, reused under mu

	// Counters for tests and benchmarks, read under mu.
	selects, writes, locks, hits int
}

func newFastPath(db *sql.DB) *fastPath {
	f := &fastPath{db: db, rows: make(map[string]failover.ProfileState)}
	for i := range f.args {
		f.args[i].Ordinal = i + 1
	}
	return f
}

// errNotDriverConn is returned when the pool hands out something that is not a
// database/sql/driver connection (it cannot happen with mattn/go-sqlite3).
var errNotDriverConn = errors.New("store: unexpected driver connection type")

// do runs op on the pool's connection with the statements prepared and mu held.
// A transaction op leaves open (it never should) is rolled back; if that fails
// the connection is discarded.
func (f *fastPath) do(ctx context.Context, op func() error) error {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		c, ok := dc.(driver.Conn)
		if !ok {
			return errNotDriverConn
		}
		if err := f.attach(c); err != nil {
			return err
		}
		err := op()
		if ac, ok := c.(interface{ AutoCommit() bool }); ok && !ac.AutoCommit() {
			f.valid = false
			if _, rerr := f.exec(context.Background(), stRollback, nil); rerr != nil || !ac.AutoCommit() {
				f.detach()
				return errors.Join(err, rerr, driver.ErrBadConn)
			}
		}
		return err
	})
}

// attach makes c the connection of the statements and the cache. The pool has one
// connection, so this prepares once; a replaced connection starts a fresh cache.
// (The statements are kept between Raw calls; they are only used again on the
// very same connection, which they keep reachable.)
func (f *fastPath) attach(c driver.Conn) error {
	if f.conn == c {
		return nil
	}
	f.detach()
	var stmts [numStmts]driver.Stmt
	for i, q := range fastQueries {
		var (
			st  driver.Stmt
			err error
		)
		if pc, ok := c.(driver.ConnPrepareContext); ok {
			st, err = pc.PrepareContext(context.Background(), q)
		} else {
			st, err = c.Prepare(q)
		}
		if err != nil {
			for _, p := range stmts[:i] {
				_ = p.Close()
			}
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		stmts[i] = st
	}
	f.conn, f.stmts = c, stmts
	return nil
}

// detach closes the statements and forgets the connection and the cache.
func (f *fastPath) detach() {
	for i, st := range f.stmts {
		if st != nil {
			_ = st.Close() // the connection may already be closed
		}
		f.stmts[i] = nil
	}
	f.conn = nil
	f.valid = false
	clear(f.rows)
}

func (f *fastPath) exec(ctx context.Context, i int, args []driver.NamedValue) (driver.Result, error) {
	st := f.stmts[i]
	if ec, ok := st.(driver.StmtExecContext); ok {
		return ec.ExecContext(ctx, args)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return st.Exec(values(args)) //nolint:staticcheck // drivers without ExecContext
}

// queryRow runs statement i and reads its first row into dest; found is false
// when there is none.
func (f *fastPath) queryRow(i int, args []driver.NamedValue, dest []driver.Value) (found bool, err error) {
	st := f.stmts[i]
	var rows driver.Rows
	if qc, ok := st.(driver.StmtQueryContext); ok {
		// Background: these statements never wait (WAL readers do not block, and
		// inside Update the write lock is already held), and a cancellable context
		// costs mattn a goroutine per call.
		rows, err = qc.QueryContext(context.Background(), args)
	} else {
		rows, err = st.Query(values(args)) //nolint:staticcheck // drivers without QueryContext
	}
	if err != nil {
		return false, err
	}
	err = rows.Next(dest)
	cerr := rows.Close()
	if errors.Is(err, io.EOF) {
		return false, cerr
	}
	if err != nil {
		return false, err
	}
	return true, cerr
}

func values(args []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(args))
	for i, a := range args {
		v[i] = a.Value
	}
	return v
}

// stamp reads the connection's validation stamp and drops the cache when it moved.
func (f *fastPath) stamp() error {
	var d [2]driver.Value
	found, err := f.queryRow(stStamp, nil, d[:])
	if err != nil {
		return fmt.Errorf("read data_version: %w", err)
	}
	dv, ok1 := d[0].(int64)
	tc, ok2 := d[1].(int64)
	if !found || !ok1 || !ok2 {
		f.valid = false
		clear(f.rows)
		return fmt.Errorf("read data_version: unexpected result %v", d)
	}
	if f.valid && dv == f.dv && tc == f.tc {
		return nil
	}
	clear(f.rows)
	f.valid, f.dv, f.tc = true, dv, tc
	return nil
}

// load returns key's state from the cache or the table (caching it). Call after stamp.
func (f *fastPath) load(key string) (failover.ProfileState, error) {
	if st, ok := f.rows[key]; ok {
		f.hits++
		return st, nil
	}
	f.selects++
	args := [1]driver.NamedValue{{Ordinal: 1, Value: key}}
	found, err := f.queryRow(stSelect, args[:], f.dest[:])
	if err != nil {
		return failover.ProfileState{Key: key}, err
	}
	st := failover.ProfileState{Key: key}
	if found {
		if st, err = decodeRow(key, f.dest[:]); err != nil {
			return failover.ProfileState{Key: key}, err
		}
	}
	f.put(key, st)
	return st, nil
}

func (f *fastPath) put(key string, st failover.ProfileState) {
	if len(f.rows) >= maxCached {
		clear(f.rows)
	}
	f.rows[key] = st
}

// get is StateStore.Get on SQLite.
func (f *fastPath) get(ctx context.Context, key string) (st failover.ProfileState, err error) {
	err = f.do(ctx, func() error {
		if err := f.stamp(); err != nil {
			return err
		}
		st, err = f.load(key)
		return err
	})
	return st, err
}

// getMany is StateStore.GetMany on SQLite: one stamp for all keys.
func (f *fastPath) getMany(ctx context.Context, keys []string, out []failover.ProfileState) error {
	return f.do(ctx, func() error {
		if err := f.stamp(); err != nil {
			return err
		}
		for i, key := range keys {
			st, err := f.load(key)
			if err != nil {
				return err
			}
			out[i] = st
		}
		return nil
	})
}

// update is one try of StateStore.Update on SQLite.
func (f *fastPath) update(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	keys := [1]string{key}
	var out [1]failover.ProfileState
	err := f.updateMany(ctx, keys[:], func(_ int, st *failover.ProfileState) { fn(st) }, out[:])
	return out[0], err
}

// updateMany is one try of StateStore.UpdateMany on SQLite: out[i] receives the
// state of keys[i]. It returns without locking when fn changes nothing on current
// cached rows; otherwise it runs one BEGIN IMMEDIATE transaction for all keys.
func (f *fastPath) updateMany(ctx context.Context, keys []string, fn func(int, *failover.ProfileState), out []failover.ProfileState) error {
	return f.do(ctx, func() error {
		// The stamp is only read here when fn would change nothing on the cached
		// copies; otherwise the transaction reads it anyway.
		if f.noOpCached(keys, fn, out) {
			if err := f.stamp(); err != nil {
				return err
			}
			if f.allCached(keys) { // still current
				f.hits++
				return nil
			}
		}
		return f.writeTx(ctx, keys, fn, out)
	})
}

// noOpCached reports whether every key is cached and fn changes none of them,
// filling out with the cached states.
func (f *fastPath) noOpCached(keys []string, fn func(int, *failover.ProfileState), out []failover.ProfileState) bool {
	if !f.valid {
		return false
	}
	for i, key := range keys {
		cur, ok := f.rows[key]
		if !ok {
			return false
		}
		next := cur
		fn(i, &next)
		next.Key = key
		if next != cur {
			return false
		}
		out[i] = cur
	}
	return true
}

func (f *fastPath) allCached(keys []string) bool {
	for _, key := range keys {
		if _, ok := f.rows[key]; !ok {
			return false
		}
	}
	return true
}

// writeTx is the read-modify-write transaction of updateMany. mu is held.
func (f *fastPath) writeTx(ctx context.Context, keys []string, fn func(int, *failover.ProfileState), out []failover.ProfileState) (err error) {
	// BEGIN IMMEDIATE may wait up to the busy timeout for another writer. It runs
	// under context.Background: with a cancellable context mattn starts a goroutine
	// per statement (a large share of the cost here), and its interrupt does not
	// cut SQLite's busy wait short anyway. The context is checked before.
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := f.exec(context.Background(), stBegin, nil); err != nil {
		return err
	}
	f.locks++
	done := false
	defer func() {
		if !done {
			f.valid = false
			clear(f.rows)
			_, _ = f.exec(context.Background(), stRollback, nil)
		}
	}()
	// The write lock is held: the stamp cannot move until COMMIT except by our
	// own upserts, so an unchanged stamp means the cached rows are current.
	if err := f.stamp(); err != nil {
		return err
	}
	for i, key := range keys {
		cur, err := f.load(key)
		if err != nil {
			return err
		}
		next := cur
		fn(i, &next)
		next.Key = key
		if next == cur {
			out[i] = cur
			continue
		}
		stored, n, err := f.upsert(cur, next)
		if err != nil {
			return err
		}
		// Our own commit leaves data_version alone and adds exactly n to
		// total_changes(); nobody else can write in between (we hold the lock).
		// On a failure before COMMIT the deferred rollback drops the cache.
		f.tc += n
		f.put(key, stored)
		out[i] = stored
		f.writes++
	}
	if _, err := f.exec(context.Background(), stCommit, nil); err != nil {
		return err
	}
	done = true
	return nil
}

// upsert writes next (cur is the row's current state) and returns the stored
// state and the number of changed rows.
func (f *fastPath) upsert(cur, next failover.ProfileState) (failover.ProfileState, int64, error) {
	// cur came from the table, so its LastError is already scrubbed: skip the
	// regular expression when fn kept it.
	lastError := next.LastError
	next.LastError = ""
	r := rowFromState(next)
	r.LastError = cur.LastError
	if lastError != cur.LastError {
		r.LastError = scrub(lastError)
	}
	a := &f.args
	a[0].Value = r.Key
	a[1].Value, a[2].Value = dbTime(r.LastUsed), dbTime(r.LastFailure)
	a[3].Value, a[4].Value = int64(r.ErrorCount), int64(r.Consecutive)
	a[5].Value, a[6].Value, a[7].Value = dbTime(r.CooldownUntil), r.CooldownReason, r.CooldownModel
	a[8].Value, a[9].Value, a[10].Value = dbTime(r.DisabledUntil), r.DisabledReason, int64(r.DisableCount)
	a[11].Value, a[12].Value, a[13].Value = dbTime(r.RecoveryAt), r.LastError, dbTime(r.LastProbe)
	a[14].Value = time.Now().UTC()
	res, err := f.exec(context.Background(), stUpsert, a[:])
	clear(a[:]) // keep no strings alive
	for i := range a {
		a[i].Ordinal = i + 1
	}
	if err != nil {
		return failover.ProfileState{Key: r.Key}, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return failover.ProfileState{Key: r.Key}, 0, err
	}
	return r.state(), n, nil
}

func dbTime(t *time.Time) driver.Value {
	if t == nil {
		return nil
	}
	return *t
}

// decodeRow turns a selectSQL row (driver values) into a state.
func decodeRow(key string, v []driver.Value) (failover.ProfileState, error) {
	var (
		r   = stateRow{Key: key}
		bad error
	)
	tm := func(i int) *time.Time {
		switch x := v[i].(type) {
		case nil:
			return nil
		case time.Time:
			return &x
		default:
			bad = fmt.Errorf("column %s: unexpected %T", stateColumns[i], v[i])
			return nil
		}
	}
	num := func(i int) int {
		switch x := v[i].(type) {
		case nil:
			return 0
		case int64:
			return int(x)
		default:
			bad = fmt.Errorf("column %s: unexpected %T", stateColumns[i], v[i])
			return 0
		}
	}
	str := func(i int) string {
		switch x := v[i].(type) {
		case nil:
			return ""
		case string:
			return x
		case []byte:
			return string(x)
		default:
			bad = fmt.Errorf("column %s: unexpected %T", stateColumns[i], v[i])
			return ""
		}
	}
	r.LastUsed, r.LastFailure = tm(0), tm(1)
	r.ErrorCount, r.Consecutive = num(2), num(3)
	r.CooldownUntil, r.CooldownReason, r.CooldownModel = tm(4), str(5), str(6)
	r.DisabledUntil, r.DisabledReason, r.DisableCount = tm(7), str(8), num(9)
	r.RecoveryAt, r.LastError, r.LastProbe = tm(10), str(11), tm(12)
	if bad != nil {
		return failover.ProfileState{Key: key}, bad
	}
	return r.state(), nil
}

// shared holds the fast path of every SQLite handle that has a StateStore, so
// stores on one handle share one cache and Close can finalize the statements.
var shared struct {
	mu sync.Mutex
	m  map[*sql.DB]*fastPath
}

// fastPathFor returns the fast path of db, creating it on first use.
func fastPathFor(db *sql.DB) *fastPath {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if f, ok := shared.m[db]; ok {
		return f
	}
	if shared.m == nil {
		shared.m = make(map[*sql.DB]*fastPath)
	}
	f := newFastPath(db)
	shared.m[db] = f
	return f
}

// releaseFastPath finalizes the statements of db's fast path, if any, so closing
// the connection frees it at once. It gives up after a few seconds when the
// connection is held elsewhere (the statements are then freed with it later).
func releaseFastPath(db *sql.DB) {
	shared.mu.Lock()
	f, ok := shared.m[db]
	delete(shared.m, db)
	shared.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.Raw(func(dc any) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if c, ok := dc.(driver.Conn); ok && c == f.conn {
			f.detach()
		} else {
			f.conn, f.stmts, f.valid = nil, [numStmts]driver.Stmt{}, false
			clear(f.rows)
		}
		return nil
	})
}
