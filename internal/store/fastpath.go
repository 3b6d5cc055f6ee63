package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/detourbot/detour/classify"
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
//
// Write-behind of LastUsed. An Update whose fn changes nothing but LastUsed
// (moving it forward, on a row that already exists) on current cached rows takes
// no lock and writes nothing: the new LastUsed goes into the cache (so this
// process reads it at once) and into f.pending. Pending values are written
// (a) inside the next write transaction of this handle, whatever keys it is for,
// and (b) by a flusher goroutine owned by the fast path, which runs at most once
// per flushEvery (1 s) while something is pending and is stopped, after a last
// flush, by Close. Costs of this trade: a crash (not a Close) loses the LastUsed
// values of up to the last ~1 s, and other replicas (and other handles of this
// process) see a LastUsed up to ~1 s late; LastUsed only orders equally usable
// profiles (P1), it decides nothing. Cooldowns, disables, counters, errors and
// any change other than a forward LastUsed are NEVER deferred: they are written in
// the Update's own transaction (D6). A reload of a row overlays its pending
// LastUsed when that is later than the stored one (and forgets it otherwise), and
// a flush only writes a LastUsed later than the stored one, so LastUsed never
// moves backwards through the write-behind.

// Statements of the fast path, prepared once per connection.
const (
	stBegin = iota
	stCommit
	stRollback
	stStamp
	stSelect
	stUpsert
	stTouch
	numStmts
)

var fastQueries = [numStmts]string{
	stBegin:    "BEGIN IMMEDIATE",
	stCommit:   "COMMIT",
	stRollback: "ROLLBACK",
	stStamp:    "SELECT data_version, total_changes() FROM pragma_data_version",
	stSelect:   selectSQL,
	stUpsert:   upsertSQL,
	stTouch:    touchSQL,
}

// touchSQL writes a pending LastUsed (args: last_used, updated_at, key, last_used)
// unless the stored one is already as late (a text value from an old file is
// always replaced).
const touchSQL = "UPDATE profile_states SET last_used = ?, updated_at = ? WHERE key = ? AND " +
	"(last_used IS NULL OR typeof(last_used) <> 'integer' OR last_used < ?)"

// flushEvery is how often, at most, the flusher writes pending LastUsed values.
const flushEvery = time.Second

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

	// Write-behind of LastUsed (see above), under mu.
	pending    map[string]time.Time // key -> LastUsed not yet in the table
	flushEvery time.Duration        // flusher period (tests may lengthen it)
	flushing   bool                 // a flusher goroutine is running
	closed     bool                 // release has begun: start no flusher
	flushers   sync.WaitGroup       // the flusher goroutine, waited for by release
	ctx        context.Context      // canceled by release: stops the flusher
	cancel     context.CancelFunc

	// Counters for tests and benchmarks, read under mu. deferred counts LastUsed
	// updates written behind, flushed the pending values written (also in writes).
	selects, writes, locks, hits, deferred, flushed int
}

func newFastPath(db *sql.DB) *fastPath {
	f := &fastPath{db: db, rows: make(map[string]failover.ProfileState),
		pending: make(map[string]time.Time), flushEvery: flushEvery}
	f.ctx, f.cancel = context.WithCancel(context.Background())
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
	if lu, ok := f.pending[key]; ok {
		if lu.After(st.LastUsed) {
			st.LastUsed = lu // written behind, not in the table yet
		} else {
			delete(f.pending, key) // the table is already as late
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
		// The stamp is only read here when fn would change nothing (or only
		// LastUsed) on the cached copies; otherwise the transaction reads it anyway.
		if deferred, ok := f.noOpCached(keys, fn, out); ok {
			if err := f.stamp(); err != nil {
				return err
			}
			if f.allCached(keys) { // still current
				if !deferred {
					f.hits++
					return nil
				}
				for i, key := range keys {
					if out[i] != f.rows[key] {
						f.rows[key] = out[i]
						f.pending[key] = out[i].LastUsed
						f.deferred++
					}
				}
				f.startFlusher()
				return nil
			}
		}
		return f.writeTx(ctx, keys, fn, out)
	})
}

// noOpCached reports whether every key is cached and fn changes none of them or
// only moves LastUsed forward on an existing row (deferred is then set), filling
// out with the resulting states.
func (f *fastPath) noOpCached(keys []string, fn func(int, *failover.ProfileState), out []failover.ProfileState) (deferred, ok bool) {
	if !f.valid {
		return false, false
	}
	for i, key := range keys {
		cur, ok := f.rows[key]
		if !ok {
			return false, false
		}
		next := cur
		fn(i, &next)
		next.Key = key
		if next != cur {
			if !lastUsedOnly(cur, next) || repeats(keys, i) {
				return false, false
			}
			deferred = true
		}
		out[i] = next
	}
	return deferred, true
}

// lastUsedOnly reports whether next differs from cur only by a later LastUsed,
// on a row that exists (a first write is never deferred).
func lastUsedOnly(cur, next failover.ProfileState) bool {
	if cur == (failover.ProfileState{Key: cur.Key}) || !next.LastUsed.After(cur.LastUsed) {
		return false
	}
	masked := next
	masked.LastUsed = cur.LastUsed
	return masked == cur
}

// repeats reports whether keys[i] appears elsewhere in keys (fn would then have
// to see an earlier deferred result: left to the transaction).
func repeats(keys []string, i int) bool {
	for j, k := range keys {
		if j != i && k == keys[i] {
			return true
		}
	}
	return false
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
		delete(f.pending, key) // written (or replaced by fn's own LastUsed)
	}
	if err := f.flushPending(); err != nil {
		return err
	}
	if _, err := f.exec(context.Background(), stCommit, nil); err != nil {
		return err
	}
	done = true
	return nil
}

// flushPending writes the pending LastUsed values inside writeTx's transaction
// (mu held, write lock held, stamp read). A value is only forgotten once written:
// on an error the transaction is rolled back and the values stay pending.
func (f *fastPath) flushPending() error {
	if len(f.pending) == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	var args [4]driver.NamedValue
	for key, lu := range f.pending {
		n := nanos(lu)
		args = [4]driver.NamedValue{{Ordinal: 1, Value: n}, {Ordinal: 2, Value: now},
			{Ordinal: 3, Value: key}, {Ordinal: 4, Value: n}}
		res, err := f.exec(context.Background(), stTouch, args[:])
		if err != nil {
			return err
		}
		c, err := res.RowsAffected()
		if err != nil {
			return err
		}
		f.tc += c // as in writeTx: only our own changes move total_changes()
		f.writes += int(c)
		f.flushed += int(c)
	}
	clear(f.pending)
	return nil
}

// startFlusher starts the flusher goroutine unless it runs or release began. mu held.
func (f *fastPath) startFlusher() {
	if f.flushing || f.closed || len(f.pending) == 0 {
		return
	}
	f.flushing = true
	f.flushers.Add(1)
	go f.flushLoop(f.flushEvery)
}

// flushLoop is the flusher: every period it writes the pending LastUsed values
// in one write transaction, and it exits when nothing is pending, when a flush
// fails other than with SQLITE_BUSY (the values stay pending for the next write
// transaction or the next flusher), or when release cancels f.ctx.
func (f *fastPath) flushLoop(period time.Duration) {
	defer f.flushers.Done()
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			f.stopFlusher()
			return
		case <-t.C:
		}
		more := false
		err := f.do(f.ctx, func() error {
			if len(f.pending) > 0 {
				if err := f.writeTx(f.ctx, nil, nil, nil); err != nil {
					return err
				}
			}
			more = len(f.pending) > 0
			if !more {
				f.flushing = false // under mu: a later deferral starts a new flusher
			}
			return nil
		})
		if err != nil && !IsBusy(err) {
			f.stopFlusher()
			return
		}
		if err == nil && !more {
			return
		}
		t.Reset(period)
	}
}

func (f *fastPath) stopFlusher() {
	f.mu.Lock()
	f.flushing = false
	f.mu.Unlock()
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
	a[1].Value, a[2].Value = dbNanos(r.LastUsed), dbNanos(r.LastFailure)
	a[3].Value, a[4].Value = int64(r.ErrorCount), int64(r.Consecutive)
	a[5].Value, a[6].Value, a[7].Value = dbNanos(r.CooldownUntil), r.CooldownReason, r.CooldownModel
	a[8].Value, a[9].Value, a[10].Value = dbNanos(r.DisabledUntil), r.DisabledReason, int64(r.DisableCount)
	a[11].Value, a[12].Value, a[13].Value = dbNanos(r.RecoveryAt), r.LastError, dbNanos(r.LastProbe)
	a[14].Value = time.Now().UnixNano()
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

func dbNanos(n *int64) driver.Value {
	if n == nil {
		return nil
	}
	return *n
}

// textTimeFormats are the layouts of DATETIME text an older file may hold (what
// mattn/go-sqlite3 writes and parses).
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

// decodeTime turns a time column's driver value into a UTC time: an integer is
// Unix nanoseconds, NULL the zero time; DATETIME text (or a time the driver
// parsed from it) comes from a file written before times were integers.
func decodeTime(v driver.Value) (time.Time, error) {
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
	return time.Time{}, fmt.Errorf("unexpected %T", v)
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

// decodeRow turns a selectSQL row (driver values) into a state.
func decodeRow(key string, v []driver.Value) (failover.ProfileState, error) {
	var bad error
	tm := func(i int) time.Time {
		t, err := decodeTime(v[i])
		if err != nil && bad == nil {
			bad = fmt.Errorf("column %s: %w", stateColumns[i], err)
		}
		return t
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
	st := failover.ProfileState{
		Key:            key,
		LastUsed:       tm(0),
		LastFailure:    tm(1),
		ErrorCount:     num(2),
		Consecutive:    num(3),
		CooldownUntil:  tm(4),
		CooldownReason: classify.Reason(str(5)),
		CooldownModel:  str(6),
		DisabledUntil:  tm(7),
		DisabledReason: classify.Reason(str(8)),
		DisableCount:   num(9),
		RecoveryAt:     tm(10),
		LastError:      str(11),
		LastProbe:      tm(12),
	}
	if bad != nil {
		return failover.ProfileState{Key: key}, bad
	}
	return st, nil
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

// releaseFastPath stops db's flusher, writes the LastUsed values still pending
// and finalizes the statements of db's fast path, if any, so closing the
// connection frees it at once. It gives up after a few seconds when the
// connection is held elsewhere (the statements are then freed with it later, and
// pending values are lost). It returns the error of the last flush.
func releaseFastPath(db *sql.DB) error {
	shared.mu.Lock()
	f, ok := shared.m[db]
	delete(shared.m, db)
	shared.mu.Unlock()
	if !ok {
		return nil
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.flushers.Wait() // no goroutine outlives Close
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil // already closed: nothing can be written
	}
	defer conn.Close()
	var flushErr error
	_ = conn.Raw(func(dc any) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		c, ok := dc.(driver.Conn)
		switch {
		case ok && (c == f.conn || len(f.pending) > 0):
			if len(f.pending) > 0 {
				if flushErr = f.attach(c); flushErr == nil {
					flushErr = f.writeTx(ctx, nil, nil, nil)
				}
			}
			f.detach()
		default:
			f.conn, f.stmts, f.valid = nil, [numStmts]driver.Stmt{}, false
			clear(f.rows)
		}
		return nil
	})
	if flushErr != nil {
		return fmt.Errorf("write pending LastUsed: %w", flushErr)
	}
	return nil
}
