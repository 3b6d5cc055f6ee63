package store

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/driver/sqlite"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// TestStateStore_D6_TimesAsIntegerNanos: every time column round-trips exactly
// (UTC, nanoseconds) through INTEGER Unix nanoseconds, a zero time is NULL, on
// both paths and across a restart.
// covers D6
func TestStateStore_D6_TimesAsIntegerNanos(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		at   time.Time
	}{
		{"nanoseconds, non-UTC zone", time.Date(2026, 11, 29, 22, 14, 5, 987654321, paris)},
		{"one nanosecond after the epoch", time.Unix(0, 1)},
		{"the epoch itself (not zero)", time.Unix(0, 0)},
		{"before 1970", time.Date(1969, 7, 20, 20, 17, 40, 123, time.UTC)},
		{"zero", time.Time{}},
	}
	for _, mode := range modes {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "d.db")
				st := failover.ProfileState{Key: "k", ErrorCount: 1, LastUsed: tc.at, LastFailure: tc.at,
					CooldownUntil: tc.at, DisabledUntil: tc.at, RecoveryAt: tc.at, LastProbe: tc.at}
				db := openT(t, path)
				s := newStoreMode(t, db, mode)
				if _, err := s.Update(ctx, "k", func(p *failover.ProfileState) { *p = st }); err != nil {
					t.Fatal(err)
				}
				if err := Close(db); err != nil {
					t.Fatal(err)
				}
				db2 := openT(t, path)
				got, err := newStoreMode(t, db2, mode).Get(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				if want := utcState(st); !reflect.DeepEqual(got, want) {
					t.Errorf("after restart:\n got %+v\nwant %+v", got, want)
				}
				if !tc.at.IsZero() && got.LastUsed.Location() != time.UTC {
					t.Errorf("LastUsed in %v, want UTC", got.LastUsed.Location())
				}
				var typ string
				if err := db2.Raw("SELECT typeof(last_probe) FROM profile_states WHERE key = 'k'").Scan(&typ).Error; err != nil {
					t.Fatal(err)
				}
				if want := map[bool]string{true: "null", false: "integer"}[tc.at.IsZero()]; typ != want {
					t.Errorf("last_probe stored as %s, want %s", typ, want)
				}
			})
		}
	}
}

// TestNanos_Clamps: times past the int64 nanosecond range are clamped, not wrapped.
func TestNanos_Clamps(t *testing.T) {
	tests := []struct {
		at   time.Time
		want int64
	}{
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Unix(1, 5), 1_000_000_005},
	}
	for _, tc := range tests {
		if got := nanos(tc.at); got != tc.want {
			t.Errorf("nanos(%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

// TestDecodeTime: integer nanoseconds, NULL, and the DATETIME text (or parsed
// time) of a file written before times were integers; bad values are errors.
func TestDecodeTime(t *testing.T) {
	want := time.Date(2026, 11, 29, 22, 14, 5, 987654321, time.UTC)
	tests := []struct {
		name    string
		in      any
		want    time.Time
		wantErr bool
	}{
		{"integer", want.UnixNano(), want, false},
		{"null", nil, time.Time{}, false},
		{"mattn text", "2026-11-29 22:14:05.987654321+00:00", want, false},
		{"text in another zone", "2026-11-29 23:14:05.987654321+01:00", want, false},
		{"bytes with T and Z", []byte("2026-11-29T22:14:05.987654321Z"), want, false},
		{"parsed time", want.In(time.FixedZone("X", 7200)), want, false},
		{"zero parsed time", time.Time{}, time.Time{}, false},
		{"garbage", "yesterday", time.Time{}, true},
		{"float", 1.5, time.Time{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeTime(tc.in)
			if (err != nil) != tc.wantErr || !got.Equal(tc.want) || (!got.IsZero() && got.Location() != time.UTC) {
				t.Errorf("decodeTime(%v) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestStateStore_OldDatetimeTextFile: a file whose profile_states was created
// with DATETIME text columns opens, its rows read back exactly, and they can be
// updated.
// covers D6
func TestStateStore_OldDatetimeTextFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open(sqlite.DriverName, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE `profile_states` (`key` text,`last_used` datetime,`last_failure` datetime," +
			"`error_count` integer NOT NULL DEFAULT 0,`consecutive` integer NOT NULL DEFAULT 0,`cooldown_until` datetime," +
			"`cooldown_reason` text,`cooldown_model` text,`disabled_until` datetime,`disabled_reason` text," +
			"`disable_count` integer NOT NULL DEFAULT 0,`recovery_at` datetime,`last_error` text,`last_probe` datetime," +
			"`updated_at` datetime,PRIMARY KEY (`key`))",
		"INSERT INTO profile_states (key, last_used, error_count, consecutive, cooldown_until, cooldown_reason, " +
			"cooldown_model, disabled_reason, disable_count, last_error, updated_at) VALUES ('openai:default', " +
			"'2026-11-29 22:14:05.987654321+00:00', 2, 1, '2026-11-29 22:19:05.5+00:00', 'rate_limit', '', '', 0, '', " +
			"'2026-11-29 22:14:05+00:00')",
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	want := failover.ProfileState{Key: "openai:default", ErrorCount: 2, Consecutive: 1,
		LastUsed:       time.Date(2026, 11, 29, 22, 14, 5, 987654321, time.UTC),
		CooldownUntil:  time.Date(2026, 11, 29, 22, 19, 5, 500000000, time.UTC),
		CooldownReason: classify.ReasonRateLimit}
	db := openT(t, path)
	var ddl string
	if err := db.Raw("SELECT sql FROM sqlite_master WHERE name = 'profile_states'").Scan(&ddl).Error; err != nil {
		t.Fatal(err)
	}
	// AutoMigrate retypes the columns (the driver would otherwise read integers
	// in a DATETIME column as seconds); the old text values stay text.
	if !strings.Contains(ddl, "`last_used` integer") || !strings.Contains(ddl, "`cooldown_until` integer") {
		t.Errorf("profile_states after Open: %s; want integer time columns", ddl)
	}
	s := newStoreT(t, db)
	if got := mustGet(t, s, "openai:default"); !reflect.DeepEqual(got, want) {
		t.Errorf("old row:\n got %+v\nwant %+v", got, want)
	}
	got := mustUpdate(t, s, "openai:default", func(p *failover.ProfileState) { p.ErrorCount++ })
	want.ErrorCount = 3
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old row updated:\n got %+v\nwant %+v", got, want)
	}
	if got := mustGet(t, newStoreT(t, openT(t, path)), "openai:default"); !reflect.DeepEqual(got, want) {
		t.Errorf("old row updated, other handle:\n got %+v\nwant %+v", got, want)
	}
}

// lastUsedAt is a success on a clean profile: only LastUsed moves.
func lastUsedAt(at time.Time) func(*failover.ProfileState) {
	return func(p *failover.ProfileState) { p.LastUsed = at }
}

// TestStateStore_P1_LastUsedWriteBehind: an Update that only moves LastUsed
// forward opens no transaction; this handle reads the new value at once, another
// handle (replica) only after a flush; Close flushes.
// covers P1, D6
func TestStateStore_P1_LastUsedWriteBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	dbA := openT(t, path)
	a := newStoreT(t, dbA)
	setFlushEvery(a, time.Hour) // only Close flushes here
	b := newStoreT(t, openT(t, path))
	mustUpdate(t, a, "anthropic:default", lastUsedAt(t0)) // first write: a transaction

	_, w0, l0, _ := counters(a)
	got := mustUpdate(t, a, "anthropic:default", lastUsedAt(t0.Add(time.Minute)))
	if !got.LastUsed.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Update returned LastUsed %v", got.LastUsed)
	}
	if _, w, l, _ := counters(a); w != w0 || l != l0 {
		t.Errorf("LastUsed-only Update: %d transactions, %d rows written; want 0, 0", l-l0, w-w0)
	}
	if d, _, p := writeBehind(a); d != 1 || p != 1 {
		t.Errorf("deferred %d, pending %d; want 1, 1", d, p)
	}
	if got := mustGet(t, a, "anthropic:default"); !got.LastUsed.Equal(t0.Add(time.Minute)) {
		t.Errorf("same handle reads LastUsed %v, want the new one at once", got.LastUsed)
	}
	if got := mustGet(t, b, "anthropic:default"); !got.LastUsed.Equal(t0) {
		t.Errorf("other handle reads LastUsed %v before a flush, want the stored %v", got.LastUsed, t0)
	}
	if err := Close(dbA); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b, "anthropic:default"); !got.LastUsed.Equal(t0.Add(time.Minute)) {
		t.Errorf("other handle reads LastUsed %v after Close, want the flushed value", got.LastUsed)
	}
}

// TestStateStore_D6_WriteBehindOnlyLastUsed: anything but a forward LastUsed on
// an existing row is written in the Update's own transaction.
// covers D6, D1
func TestStateStore_D6_WriteBehindOnlyLastUsed(t *testing.T) {
	tests := []struct {
		name     string
		fn       func(*failover.ProfileState)
		deferred bool
	}{
		{"forward LastUsed only", lastUsedAt(t0.Add(time.Second)), true},
		{"LastUsed backwards", lastUsedAt(t0.Add(-time.Second)), false},
		{"LastUsed and a cooldown", func(p *failover.ProfileState) {
			p.LastUsed = t0.Add(time.Second)
			p.CooldownUntil, p.CooldownReason = t0.Add(time.Minute), classify.ReasonRateLimit
		}, false},
		{"LastUsed and a counter", func(p *failover.ProfileState) { p.LastUsed = t0.Add(time.Second); p.ErrorCount++ }, false},
		{"error text only", func(p *failover.ProfileState) { p.LastError = "overloaded" }, false},
		{"disable", func(p *failover.ProfileState) {
			p.DisabledUntil, p.DisabledReason = t0.Add(time.Hour), classify.ReasonBilling
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStoreT(t, openT(t, filepath.Join(t.TempDir(), "d.db")))
			setFlushEvery(s, time.Hour)
			mustUpdate(t, s, "k", lastUsedAt(t0))
			_, _, l0, _ := counters(s)
			want := mustUpdate(t, s, "k", tc.fn)
			_, _, l, _ := counters(s)
			d, _, p := writeBehind(s)
			if deferred := l == l0 && d == 1 && p == 1; deferred != tc.deferred || (!deferred && (l != l0+1 || p != 0)) {
				t.Errorf("%d transactions, %d deferred, %d pending; want deferred=%v", l-l0, d, p, tc.deferred)
			}
			if got := mustGet(t, s, "k"); got != want {
				t.Errorf("Get = %+v, want %+v", got, want)
			}
		})
	}
	// A first write (no row yet) is never deferred.
	s := newStoreT(t, openT(t, filepath.Join(t.TempDir(), "d.db")))
	mustGet(t, s, "new") // cached as missing
	_, _, l0, _ := counters(s)
	mustUpdate(t, s, "new", lastUsedAt(t0))
	if _, _, l, _ := counters(s); l != l0+1 {
		t.Errorf("first write of a row: %d transactions, want 1", l-l0)
	}
}

// TestStateStore_WriteBehindFlushedByRealChange: a real change of any key on the
// same handle writes the pending LastUsed values in its transaction.
// covers D6
func TestStateStore_WriteBehindFlushedByRealChange(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.db")
	a := newStoreT(t, openT(t, path))
	setFlushEvery(a, time.Hour)
	b := newStoreT(t, openT(t, path))
	mustUpdate(t, a, "anthropic:default", lastUsedAt(t0))
	mustUpdate(t, a, "anthropic:default", lastUsedAt(t0.Add(time.Minute))) // deferred
	_, _, l0, _ := counters(a)
	if _, err := a.UpdateMany(ctx, []string{"openai:default", "model:openai/gpt-4o"}, func(_ int, p *failover.ProfileState) {
		p.ErrorCount++
	}); err != nil {
		t.Fatal(err)
	}
	_, _, l, _ := counters(a)
	if _, f, p := writeBehind(a); l != l0+1 || f != 1 || p != 0 {
		t.Errorf("real change: %d transactions, %d flushed, %d pending; want 1, 1, 0", l-l0, f, p)
	}
	if got := mustGet(t, b, "anthropic:default"); !got.LastUsed.Equal(t0.Add(time.Minute)) {
		t.Errorf("other handle reads LastUsed %v, want the value flushed with the real change", got.LastUsed)
	}
	// A real change of the pending key itself writes its LastUsed with it.
	mustUpdate(t, a, "anthropic:default", lastUsedAt(t0.Add(2*time.Minute))) // deferred
	mustUpdate(t, a, "anthropic:default", func(p *failover.ProfileState) { p.Consecutive = 1 })
	if got := mustGet(t, b, "anthropic:default"); !got.LastUsed.Equal(t0.Add(2*time.Minute)) || got.Consecutive != 1 {
		t.Errorf("other handle reads %+v, want LastUsed %v and Consecutive 1", got, t0.Add(2*time.Minute))
	}
	if _, _, p := writeBehind(a); p != 0 {
		t.Errorf("%d pending after the key's own write, want 0", p)
	}
}

// TestStateStore_D6_WriteBehindMeetsOtherReplica: while a LastUsed is pending on
// A, replica B's commits are seen by A with A's pending LastUsed on top (B's
// cooldown is never hidden), and LastUsed never moves backwards: a later value
// from B wins over A's pending one, before and after the flush.
// covers D6, P1
func TestStateStore_D6_WriteBehindMeetsOtherReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	dbA := openT(t, path)
	a := newStoreT(t, dbA)
	setFlushEvery(a, time.Hour)
	b := newStoreT(t, openT(t, path))
	mustUpdate(t, a, "k", lastUsedAt(t0))
	mustUpdate(t, a, "k", lastUsedAt(t0.Add(time.Minute))) // pending on A

	mustUpdate(t, b, "k", func(p *failover.ProfileState) {
		p.CooldownUntil, p.CooldownReason = t0.Add(time.Hour), classify.ReasonOverloaded
	})
	got := mustGet(t, a, "k")
	if !got.LastUsed.Equal(t0.Add(time.Minute)) || got.CooldownReason != classify.ReasonOverloaded {
		t.Errorf("A reads %+v; want B's cooldown and A's pending LastUsed", got)
	}

	mustUpdate(t, b, "k", lastUsedAt(t0.Add(2*time.Minute)))                   // B is later (B defers it too)
	mustUpdate(t, b, "k", func(p *failover.ProfileState) { p.ErrorCount = 1 }) // ...and commits it
	if got := mustGet(t, a, "k"); !got.LastUsed.Equal(t0.Add(2*time.Minute)) || got.ErrorCount != 1 {
		t.Errorf("A reads %+v; want B's later LastUsed and ErrorCount 1", got)
	}
	if err := Close(dbA); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b, "k"); !got.LastUsed.Equal(t0.Add(2*time.Minute)) ||
		got.CooldownReason != classify.ReasonOverloaded || got.ErrorCount != 1 {
		t.Errorf("after A's Close B reads %+v; want LastUsed %v kept, cooldown and count kept", got, t0.Add(2*time.Minute))
	}
}

// TestStateStore_WriteBehindFlusher: the flusher writes pending values within
// its period with no other write, then stops; Close stops a running flusher and
// no goroutine outlives it.
func TestStateStore_WriteBehindFlusher(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "d.db")
	log, _ := testLogger(t)
	dbA, err := Open(context.Background(), path, log)
	if err != nil {
		t.Fatal(err)
	}
	a := newStoreT(t, dbA)
	setFlushEvery(a, 20*time.Millisecond)
	dbB, err := Open(context.Background(), path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(dbB)
	b := newStoreT(t, dbB)
	mustUpdate(t, a, "k", lastUsedAt(t0))
	mustUpdate(t, a, "k", lastUsedAt(t0.Add(time.Minute)))

	deadline := time.Now().Add(10 * time.Second)
	for !mustGet(t, b, "k").LastUsed.Equal(t0.Add(time.Minute)) {
		if time.Now().After(deadline) {
			t.Fatal("the flusher never wrote the pending LastUsed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		a.fast.mu.Lock()
		running := a.fast.flushing
		a.fast.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flusher kept running with nothing pending")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, f, p := writeBehind(a); f != 1 || p != 0 {
		t.Errorf("flushed %d, pending %d; want 1, 0", f, p)
	}

	// A flusher waiting out a long period is stopped by Close, which flushes.
	setFlushEvery(a, time.Hour)
	mustUpdate(t, a, "k", lastUsedAt(t0.Add(2*time.Minute)))
	a.fast.mu.Lock()
	running := a.fast.flushing
	a.fast.mu.Unlock()
	if !running {
		t.Error("no flusher started for a pending value")
	}
	start := time.Now()
	if err := Close(dbA); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if got := mustGet(t, b, "k"); !got.LastUsed.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("after Close B reads LastUsed %v, want %v", got.LastUsed, t0.Add(2*time.Minute))
	}
}
