package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm/logger"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

func fullState(key string, now time.Time) failover.ProfileState {
	return failover.ProfileState{
		Key:            key,
		LastUsed:       now.Add(-time.Minute),
		LastFailure:    now,
		ErrorCount:     3,
		Consecutive:    2,
		CooldownUntil:  now.Add(5*time.Minute + 123456789*time.Nanosecond),
		CooldownReason: classify.ReasonRateLimit,
		CooldownModel:  "openai/gpt-4o-mini",
		DisabledUntil:  now.Add(5 * time.Hour),
		DisabledReason: classify.ReasonBilling,
		DisableCount:   2,
		RecoveryAt:     now.Add(90 * time.Second),
		LastError:      "rate_limit (HTTP 429): Rate limit reached for gpt-4o-mini",
		LastProbe:      now.Add(-30 * time.Second),
	}
}

func utcState(s failover.ProfileState) failover.ProfileState {
	u := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC()
	}
	s.LastUsed, s.LastFailure, s.CooldownUntil = u(s.LastUsed), u(s.LastFailure), u(s.CooldownUntil)
	s.DisabledUntil, s.RecoveryAt, s.LastProbe = u(s.DisabledUntil), u(s.RecoveryAt), u(s.LastProbe)
	return s
}

func TestStateStore_GetMissing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		db, _ := newDB(t, driver)
		got := mustGet(t, newStoreT(t, db), "openai:default")
		if want := (failover.ProfileState{Key: "openai:default"}); got != want {
			t.Fatalf("Get missing = %+v, want %+v", got, want)
		}
	})
}

// TestStateStore_D6_RestartMidCooldown: a restart in the middle of a cooldown
// reloads the state exactly.
// covers D6, M1
func TestStateStore_D6_RestartMidCooldown(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		dsn := testdb.DSN(t, driver)
		paris := time.FixedZone("CET", 3600)
		now := time.Date(2026, 11, 29, 22, 14, 5, 987654321, paris) // non-UTC input, nanoseconds
		states := []failover.ProfileState{
			fullState("openai:default", now),
			{Key: "model:openrouter/meta/llama-3", Consecutive: 1, LastFailure: now}, // mostly zero fields
			{Key: "anthropic:work", CooldownUntil: now.Add(time.Minute), CooldownReason: classify.ReasonOverloaded},
		}
		db, err := database.Open(ctx, driver, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := newStoreT(t, db)
		for _, st := range states {
			got, err := s.Update(ctx, st.Key, func(p *failover.ProfileState) { *p = st })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, utcState(st)) {
				t.Errorf("Update returned %+v, want %+v", got, utcState(st))
			}
		}
		if err := database.Close(db); err != nil {
			t.Fatal(err)
		}

		// "Restart": a new handle on the same database.
		s2 := newStoreT(t, openDriverT(t, driver, dsn))
		for _, st := range states {
			got := mustGet(t, s2, st.Key)
			if want := utcState(st); !reflect.DeepEqual(got, want) {
				t.Errorf("after restart %q:\n got %+v\nwant %+v", st.Key, got, want)
			}
			if !got.CooldownUntil.IsZero() && got.CooldownUntil.Location() != time.UTC {
				t.Errorf("CooldownUntil not in UTC: %v", got.CooldownUntil.Location())
			}
		}
	})
}

// TestStateStore_D6_TimesAsIntegerNanos: every time column round-trips exactly
// (UTC, nanoseconds) through integer Unix nanoseconds, and a zero time is NULL.
// covers D6, M1
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
	testdb.Each(t, func(t *testing.T, driver string) {
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		for i, tc := range tests {
			key := fmt.Sprintf("k%d", i)
			st := failover.ProfileState{Key: key, ErrorCount: 1, LastUsed: tc.at, LastFailure: tc.at,
				CooldownUntil: tc.at, DisabledUntil: tc.at, RecoveryAt: tc.at, LastProbe: tc.at}
			mustUpdate(t, s, key, func(p *failover.ProfileState) { *p = st })
			got := mustGet(t, newStoreT(t, db), key)
			if want := utcState(st); !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, want)
			}
			var raw struct {
				IsNull bool
				N      int64
			}
			if err := db.Raw("SELECT last_probe IS NULL AS is_null, COALESCE(last_probe, 0) AS n FROM profile_states WHERE key = ?", key).Scan(&raw).Error; err != nil {
				t.Fatal(err)
			}
			if raw.IsNull != tc.at.IsZero() || (!raw.IsNull && raw.N != tc.at.UnixNano()) {
				t.Errorf("%s: last_probe stored as null=%v %d, want integer %d", tc.name, raw.IsNull, raw.N, tc.at.UnixNano())
			}
		}
	})
}

func TestStateStore_UpdateKeepsKeyAndRejectsNil(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		got, err := s.Update(ctx, "a:1", func(p *failover.ProfileState) { p.Key = "b:2"; p.ErrorCount = 1 })
		if err != nil {
			t.Fatal(err)
		}
		if got.Key != "a:1" {
			t.Errorf("Key = %q, want a:1", got.Key)
		}
		if other := mustGet(t, s, "b:2"); other.ErrorCount != 0 {
			t.Errorf("fn changing Key wrote another row: %+v", other)
		}
		if _, err := s.Update(ctx, "a:1", nil); err == nil {
			t.Error("Update with nil fn: want error")
		}
		if _, err := store.NewStateStore(nil); err == nil {
			t.Error("store.NewStateStore(nil): want error")
		}
	})
}

func TestStateStore_CanceledContext(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		if _, err := s.Update(ctx, "k", func(p *failover.ProfileState) { called = true; p.ErrorCount = 9 }); !errors.Is(err, context.Canceled) {
			t.Errorf("Update with canceled ctx: err = %v, want context.Canceled", err)
		}
		if called {
			t.Error("fn ran under a canceled context")
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Errorf("Get with canceled ctx: err = %v, want context.Canceled", err)
		}
		if got := mustGet(t, s, "k"); got.ErrorCount != 0 {
			t.Errorf("canceled update was stored: %+v", got)
		}
	})
}

// TestStateStore_NoSecretInRow: a credential that slips into LastError never
// reaches a row, and the SQL log never carries bound values.
// covers P4
func TestStateStore_NoSecretInRow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		log, buf := testLogger(t)
		db, err := database.Open(ctx, driver, testdb.DSN(t, driver), log)
		if err != nil {
			t.Fatal(err)
		}
		defer database.Close(db)
		db.Logger = db.Logger.LogMode(logger.Info) // log every statement
		s := newStoreT(t, db)
		leaks := []string{
			"invalid api key " + canary,
			"Authorization: Bearer " + canary,
			"GET /v1/models?key=" + canary,
			"slack token xoxb-CANARY-123-456 rejected",
			strings.Repeat("é", 400) + canary,
		}
		for i, msg := range leaks {
			key := fmt.Sprintf("openai:p%d", i)
			got, err := s.Update(ctx, key, func(p *failover.ProfileState) { p.LastError = msg })
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got.LastError, "CANARY") {
				t.Errorf("returned LastError leaks: %q", got.LastError)
			}
			if len(got.LastError) > store.MaxLastError || !utf8.ValidString(got.LastError) {
				t.Errorf("LastError not bounded on a rune: %d bytes", len(got.LastError))
			}
		}
		var dump []string
		if err := db.Raw("SELECT COALESCE(last_error,'') || '|' || key || '|' || COALESCE(cooldown_model,'') FROM profile_states").Scan(&dump).Error; err != nil {
			t.Fatal(err)
		}
		if len(dump) != len(leaks) {
			t.Fatalf("rows = %d, want %d", len(dump), len(leaks))
		}
		for _, row := range dump {
			if strings.Contains(row, "CANARY") {
				t.Errorf("row leaks a secret: %q", row)
			}
		}
		if buf.Len() == 0 {
			t.Fatal("info-level SQL log is empty; the check below would prove nothing")
		}
		if strings.Contains(buf.String(), "CANARY") {
			t.Errorf("SQL log leaks a secret: %s", buf.String())
		}
	})
}

// TestStateStore_M1_DirtyTextAndLongKeys: NUL bytes and invalid UTF-8 in a
// provider's error, a model name or a key are stored (cleaned), never a failed
// write; keys far beyond 255 bytes work.
// covers M1
func TestStateStore_M1_DirtyTextAndLongKeys(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		long := "model:openrouter/" + strings.Repeat("very-long-model-name/", 60) // ~1.3 KB
		tests := []struct {
			name, key, lastError, model string
		}{
			{"NUL in the error", "openai:nul", "upstream said \x00\x00 then stopped", "openai/gpt\x00x"},
			{"invalid UTF-8 in the error", "openai:utf8", "bad bytes \xff\xfe\xc3\x28 here", "openai/\xffmodel"},
			{"dirty key", "openai:\x00weird\xff", "rate limited", ""},
			{"key over 255 bytes", long, "rate limited", long},
		}
		for _, tc := range tests {
			got, err := s.Update(context.Background(), tc.key, func(p *failover.ProfileState) {
				p.ErrorCount++
				p.LastError = tc.lastError
				p.CooldownModel = tc.model
				p.CooldownReason = classify.ReasonRateLimit
			})
			if err != nil {
				t.Fatalf("%s: Update: %v", tc.name, err)
			}
			again := mustGet(t, newStoreT(t, db), tc.key)
			for _, v := range []string{got.Key, got.LastError, got.CooldownModel, again.LastError, again.CooldownModel} {
				if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
					t.Errorf("%s: stored text %q is not clean UTF-8", tc.name, v)
				}
			}
			if again.ErrorCount != 1 || again.LastError != got.LastError || again.CooldownModel != got.CooldownModel {
				t.Errorf("%s: read back %+v, want what Update returned %+v", tc.name, again, got)
			}
			if got.LastError != store.CleanText(tc.lastError) || got.CooldownModel != store.CleanText(tc.model) {
				t.Errorf("%s: stored %q / %q, want the cleaned text", tc.name, got.LastError, got.CooldownModel)
			}
		}
	})
}

// TestStateStore_M2_ConcurrentUpdates: 200 goroutines increment a few keys that
// do not exist yet (the first updates race to create each row): no increment is
// lost, no error.
// covers D6, M2
func TestStateStore_M2_ConcurrentUpdates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		keys := []string{"openai:a", "openai:b", "model:openai/gpt-4o"}
		const workers = 200
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Update(ctx, keys[i%len(keys)], func(p *failover.ProfileState) { p.ErrorCount++ }); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Update: %v", err)
		}
		total := 0
		for i, k := range keys {
			want := workers / len(keys)
			if i < workers%len(keys) {
				want++
			}
			if got := mustGet(t, s, k); got.ErrorCount != want {
				t.Errorf("%s ErrorCount = %d, want %d", k, got.ErrorCount, want)
			}
			total += mustGet(t, s, k).ErrorCount
		}
		if total != workers {
			t.Errorf("total = %d, want %d (lost updates)", total, workers)
		}
	})
}

// TestStateStore_M2_Replicas: several handles on one database (replicas)
// increment the same new key and a batch of keys in opposite orders at once: no
// lost update, no deadlock error, and each sees the other's writes at once.
// covers D6, M2
func TestStateStore_M2_Replicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		dsn := testdb.DSN(t, driver)
		reps := []*store.StateStore{newStoreT(t, openDriverT(t, driver, dsn)), newStoreT(t, openDriverT(t, driver, dsn)),
			newStoreT(t, openDriverT(t, driver, dsn))}
		const perReplica = 60
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(reps)*perReplica)
		for r, s := range reps {
			for i := range perReplica {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Update(ctx, "openai:shared", func(p *failover.ProfileState) {
						p.ErrorCount++
						p.CooldownReason = classify.ReasonRateLimit
					}); err != nil {
						errs <- err
					}
					// Batches name the same keys in opposite orders.
					keys := []string{"openai:x", "model:openai/x", "openai:y"}
					if (r+i)%2 == 1 {
						keys = []string{"openai:y", "model:openai/x", "openai:x"}
					}
					if _, err := s.UpdateMany(ctx, keys, func(_ int, p *failover.ProfileState) { p.Consecutive++ }); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("update: %v", err)
		}
		n := len(reps) * perReplica
		for i, s := range reps {
			if got := mustGet(t, s, "openai:shared"); got.ErrorCount != n {
				t.Errorf("replica %d sees ErrorCount = %d, want %d", i, got.ErrorCount, n)
			}
			for _, k := range []string{"openai:x", "model:openai/x", "openai:y"} {
				if got := mustGet(t, s, k); got.Consecutive != n {
					t.Errorf("replica %d sees %s Consecutive = %d, want %d", i, k, got.Consecutive, n)
				}
			}
		}
		// A write on one replica is visible on another at once (no cache).
		mustUpdate(t, reps[0], "openai:shared", func(p *failover.ProfileState) { p.CooldownModel = "openai/o3" })
		if got := mustGet(t, reps[2], "openai:shared"); got.CooldownModel != "openai/o3" {
			t.Errorf("replica 2 does not see replica 0's write: %+v", got)
		}
	})
}

// TestStateStore_D6_ReadYourWrites: 200 goroutines over two replicas: each
// increments a shared key on one replica and reads it on the other; the read
// shows at least its own write, and no increment is lost.
// covers D6, M2
func TestStateStore_D6_ReadYourWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dsn := testdb.DSN(t, driver)
		reps := []*store.StateStore{newStoreT(t, openDriverT(t, driver, dsn)), newStoreT(t, openDriverT(t, driver, dsn))}
		keys := []string{"openai:a", "model:openai/gpt-4o"}
		const workers, rounds = 200, 3
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, r := reps[i%2], reps[(i+1)%2]
				key := keys[(i/2)%len(keys)]
				for range rounds {
					got, err := w.Update(ctx, key, func(p *failover.ProfileState) { p.ErrorCount++ })
					if err != nil {
						errs <- err
						return
					}
					// A no-op on whatever is current must neither fail nor lower it.
					if _, err := r.Update(ctx, key, func(*failover.ProfileState) {}); err != nil {
						errs <- err
						return
					}
					seen, err := r.Get(ctx, key)
					if err != nil {
						errs <- err
						return
					}
					if seen.ErrorCount < got.ErrorCount {
						errs <- fmt.Errorf("stale read of %s: %d after own write of %d", key, seen.ErrorCount, got.ErrorCount)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, key := range keys {
			for i, s := range reps {
				if got := mustGet(t, s, key); got.ErrorCount != workers*rounds/len(keys) {
					t.Errorf("replica %d: %s ErrorCount = %d, want %d", i, key, got.ErrorCount, workers*rounds/len(keys))
				}
			}
		}
	})
}

// TestStateStore_UpdateMany: several keys in one transaction; a repeated key
// sees its earlier result; a batch on replica A is seen by replica B; GetMany
// keeps the order of its keys.
// covers D6
func TestStateStore_UpdateMany(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		dsn := testdb.DSN(t, driver)
		a := newStoreT(t, openDriverT(t, driver, dsn))
		b := newStoreT(t, openDriverT(t, driver, dsn))
		keys := []string{"openai:a", "model:openai/gpt-4o", "openai:a"}
		for round := 1; round <= 3; round++ {
			got, err := a.UpdateMany(ctx, keys, func(i int, p *failover.ProfileState) {
				p.ErrorCount++
				p.LastError = fmt.Sprintf("%s %d", canary, i)
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got[0].ErrorCount != 2*round-1 || got[1].ErrorCount != round || got[2].ErrorCount != 2*round {
				t.Fatalf("round %d: UpdateMany = %+v", round, got)
			}
			for _, st := range got {
				if strings.Contains(st.LastError, "CANARY") {
					t.Errorf("LastError leaks: %q", st.LastError)
				}
			}
		}
		if got := mustGet(t, b, "openai:a"); got.ErrorCount != 6 {
			t.Errorf("replica B reads openai:a = %d, want 6", got.ErrorCount)
		}
		many, err := b.GetMany(ctx, []string{"model:openai/gpt-4o", "absent", "openai:a"})
		if err != nil || len(many) != 3 || many[0].ErrorCount != 3 || many[1] != (failover.ProfileState{Key: "absent"}) || many[2].ErrorCount != 6 {
			t.Errorf("GetMany = %+v, %v", many, err)
		}
		if _, err := a.UpdateMany(ctx, keys, nil); err == nil {
			t.Error("UpdateMany with nil fn: want error")
		}
		if got, err := a.UpdateMany(ctx, nil, func(int, *failover.ProfileState) {}); err != nil || len(got) != 0 {
			t.Errorf("UpdateMany with no keys = %v, %v", got, err)
		}
		got, err := a.UpdateMany(ctx, keys[:2], func(int, *failover.ProfileState) {})
		if err != nil || got[0].ErrorCount != 6 || got[1].ErrorCount != 3 {
			t.Fatalf("no-op batch = %+v, %v", got, err)
		}
	})
}

// TestStateStore_NoOpUpdateWritesNothing: an Update that changes nothing
// rewrites no row, and on a missing key creates none.
func TestStateStore_NoOpUpdateWritesNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		db, _ := newDB(t, driver)
		s := newStoreT(t, db)
		mustUpdate(t, s, "k", func(p *failover.ProfileState) { p.ErrorCount = 1 })
		var before, after int64
		if err := db.Raw("SELECT updated_at FROM profile_states WHERE key = ?", "k").Scan(&before).Error; err != nil {
			t.Fatal(err)
		}
		got, err := s.Update(ctx, "k", func(p *failover.ProfileState) {})
		if err != nil || got.ErrorCount != 1 || got.Key != "k" {
			t.Fatalf("no-op Update = %+v, %v", got, err)
		}
		if err := db.Raw("SELECT updated_at FROM profile_states WHERE key = ?", "k").Scan(&after).Error; err != nil {
			t.Fatal(err)
		}
		if after != before || before == 0 {
			t.Errorf("no-op Update rewrote the row: updated_at %v -> %v", before, after)
		}
		mustUpdate(t, s, "absent", func(p *failover.ProfileState) {})
		var n int64
		db.Raw("SELECT COUNT(*) FROM profile_states").Scan(&n)
		if n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})
}

// TestStateStore_SeesRawWrites: nothing is cached: a write through another
// statement on the same handle is read at once.
func TestStateStore_SeesRawWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		db, _ := newDB(t, driver)
		s1, s2 := newStoreT(t, db), newStoreT(t, db)
		const k = "anthropic:default"
		mustUpdate(t, s1, k, func(p *failover.ProfileState) { p.ErrorCount = 1 })
		mustUpdate(t, s2, k, func(p *failover.ProfileState) { p.ErrorCount = 2 })
		if got := mustGet(t, s1, k); got.ErrorCount != 2 {
			t.Errorf("s1 reads %d after s2's write, want 2", got.ErrorCount)
		}
		if err := db.Exec("UPDATE profile_states SET error_count = 7 WHERE key = ?", k).Error; err != nil {
			t.Fatal(err)
		}
		if got := mustUpdate(t, s2, k, func(p *failover.ProfileState) { p.ErrorCount++ }); got.ErrorCount != 8 {
			t.Errorf("increment after a raw write gave %d, want 8", got.ErrorCount)
		}
		if err := db.Exec("DELETE FROM profile_states").Error; err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s1, k); got.ErrorCount != 0 {
			t.Errorf("s1 reads %d after the row was deleted, want 0", got.ErrorCount)
		}
	})
}

// TestStateStore_ClosedHandle: after database.Close the store fails cleanly.
func TestStateStore_ClosedHandle(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		log, _ := testLogger(t)
		db, err := database.Open(context.Background(), driver, testdb.DSN(t, driver), log)
		if err != nil {
			t.Fatal(err)
		}
		s := newStoreT(t, db)
		mustUpdate(t, s, "k", func(p *failover.ProfileState) { p.ErrorCount = 1 })
		if err := database.Close(db); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(context.Background(), "k"); err == nil {
			t.Error("Get on a closed handle: want an error")
		}
		if _, err := s.Update(context.Background(), "k", func(p *failover.ProfileState) {}); err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("Update on a closed handle: err = %v, want a database error", err)
		}
	})
}

// BenchmarkStateStoreUpdate measures one Update that changes the row (a
// read-modify-write transaction).
func BenchmarkStateStoreUpdate(b *testing.B) {
	for _, driver := range testdb.Drivers {
		b.Run(driver, func(b *testing.B) {
			db, _ := newDB(b, driver)
			s := newStoreT(b, db)
			ctx := context.Background()
			keys := []string{"openai:a", "openai:b", "anthropic:c"}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[i%len(keys)]
				i++
				if _, err := s.Update(ctx, k, func(p *failover.ProfileState) {
					p.ErrorCount++
					p.LastFailure = t0
					p.CooldownUntil = t0.Add(time.Minute)
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateStoreGet measures one Get.
func BenchmarkStateStoreGet(b *testing.B) {
	for _, driver := range testdb.Drivers {
		b.Run(driver, func(b *testing.B) {
			db, _ := newDB(b, driver)
			s := newStoreT(b, db)
			ctx := context.Background()
			if _, err := s.Update(ctx, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 }); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, "openai:a"); err != nil {
					b.Fatal(err)
				}
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
	s := newStoreT(t, db)
	var ddl string
	if err := db.Raw("SELECT sql FROM sqlite_master WHERE name = 'profile_states'").Scan(&ddl).Error; err != nil {
		t.Fatal(err)
	}
	// AutoMigrate retypes the columns (the driver would otherwise read integers
	// in a DATETIME column as seconds); the old text values stay text.
	if !strings.Contains(ddl, "`last_used` integer") || !strings.Contains(ddl, "`cooldown_until` integer") {
		t.Errorf("profile_states after NewStateStore: %s; want integer time columns", ddl)
	}
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
