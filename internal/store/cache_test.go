package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
)

// counters returns the fast path's statement counters of s.
func counters(s *StateStore) (selects, writes, locks, hits int) {
	f := s.fast
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.selects, f.writes, f.locks, f.hits
}

// writeBehind returns the fast path's LastUsed write-behind counters of s and
// the number of values pending.
func writeBehind(s *StateStore) (deferred, flushed, pending int) {
	f := s.fast
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deferred, f.flushed, len(f.pending)
}

// setFlushEvery changes the flusher period of s's handle (for flushers started later).
func setFlushEvery(s *StateStore, d time.Duration) {
	f := s.fast
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushEvery = d
}

func mustUpdate(t *testing.T, s *StateStore, key string, fn func(*failover.ProfileState)) failover.ProfileState {
	t.Helper()
	got, err := s.Update(context.Background(), key, fn)
	if err != nil {
		t.Fatalf("Update(%q): %v", key, err)
	}
	return got
}

func mustGet(t *testing.T, s *StateStore, key string) failover.ProfileState {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return got
}

// TestStateStore_D6_CacheSeesOtherReplica: replica A caches a row; replica B (a
// second handle on the file, as another process would be) commits a change; A's
// next Get and Update see it, including an Update whose fn would be a no-op on
// A's stale cached copy. A's own commits keep its cache (no re-read).
// covers D6
func TestStateStore_D6_CacheSeesOtherReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a := newStoreT(t, openT(t, path))
	b := newStoreT(t, openT(t, path))
	const k = "openai:shared"

	mustUpdate(t, a, k, func(p *failover.ProfileState) { p.ErrorCount = 1 })
	sel0, _, _, _ := counters(a)
	if got := mustGet(t, a, k); got.ErrorCount != 1 {
		t.Fatalf("A reads %d, want 1", got.ErrorCount)
	}
	if sel, _, _, _ := counters(a); sel != sel0 {
		t.Errorf("Get after A's own write ran %d SELECTs, want 0 (own commits must not drop the cache)", sel-sel0)
	}

	// B writes: A's next Get must re-read.
	mustUpdate(t, b, k, func(p *failover.ProfileState) { p.ErrorCount = 5; p.CooldownModel = "openai/o3" })
	if got := mustGet(t, a, k); got.ErrorCount != 5 || got.CooldownModel != "openai/o3" {
		t.Fatalf("A reads %+v after B's commit, want ErrorCount 5 (stale cache)", got)
	}
	if sel, _, _, _ := counters(a); sel != sel0+1 {
		t.Errorf("A ran %d SELECTs after B's commit, want 1", sel-sel0)
	}

	// B writes again: A's read-modify-write starts from B's value.
	mustUpdate(t, b, k, func(p *failover.ProfileState) { p.ErrorCount = 10 })
	if got := mustUpdate(t, a, k, func(p *failover.ProfileState) { p.ErrorCount++ }); got.ErrorCount != 11 {
		t.Fatalf("A's increment gave %d, want 11 (lost B's update)", got.ErrorCount)
	}

	// A has 11 cached; B sets 0; A sets 11 again: a no-op on A's stale copy but
	// a real change of the row, so it must be written.
	mustUpdate(t, b, k, func(p *failover.ProfileState) { p.ErrorCount = 0 })
	mustUpdate(t, a, k, func(p *failover.ProfileState) { p.ErrorCount = 11 })
	if got := mustGet(t, b, k); got.ErrorCount != 11 {
		t.Errorf("B reads %d, want 11: A skipped a write on a stale cached row", got.ErrorCount)
	}

	// A write of another key by B also invalidates (data_version is per file).
	mustUpdate(t, a, "openai:other", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	mustUpdate(t, b, "openai:other", func(p *failover.ProfileState) { p.ErrorCount = 2 })
	if got := mustGet(t, a, "openai:other"); got.ErrorCount != 2 {
		t.Errorf("A reads %d for openai:other, want 2", got.ErrorCount)
	}
}

// TestStateStore_CacheSameHandle: two stores on one handle share the cache, and a
// raw write through gorm on the same connection (which data_version does not
// see) is still noticed through total_changes().
func TestStateStore_CacheSameHandle(t *testing.T) {
	db := openT(t, filepath.Join(t.TempDir(), "d.db"))
	s1, s2 := newStoreT(t, db), newStoreT(t, db)
	const k = "anthropic:default"
	mustUpdate(t, s1, k, func(p *failover.ProfileState) { p.ErrorCount = 1 })
	mustGet(t, s1, k) // cached
	mustUpdate(t, s2, k, func(p *failover.ProfileState) { p.ErrorCount = 2 })
	if got := mustGet(t, s1, k); got.ErrorCount != 2 {
		t.Errorf("s1 reads %d after s2's write on the same handle, want 2", got.ErrorCount)
	}
	if err := db.Exec("UPDATE profile_states SET error_count = 7 WHERE key = ?", k).Error; err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s1, k); got.ErrorCount != 7 {
		t.Errorf("s1 reads %d after a raw write on the same connection, want 7", got.ErrorCount)
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
}

// TestStateStore_NoOpSkipsLock: an Update that changes nothing on a current cached
// row takes no write lock: it returns at once while another replica holds the
// lock, and neither locks nor writes; a real change still waits for the lock.
func TestStateStore_NoOpSkipsLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.db")
	// A short busy timeout: the lock-taking Update below gives up quickly.
	a := newStoreT(t, openT(t, "file:"+path+"?_busy_timeout=100"))
	now := t0
	success := func(p *failover.ProfileState) { // a success on a clean profile
		p.LastUsed = now
		p.ErrorCount, p.Consecutive = 0, 0
		p.CooldownUntil, p.CooldownReason, p.CooldownModel = time.Time{}, "", ""
	}
	mustUpdate(t, a, "openai:a", success)
	_, w0, l0, _ := counters(a)

	// Replica B holds the write lock.
	other := openT(t, path)
	sqlDB, err := other.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	got, err := a.Update(ctx, "openai:a", success)
	if err != nil || !got.LastUsed.Equal(now) {
		t.Fatalf("no-op Update = %+v, %v", got, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("no-op Update took %v while another replica held the lock; want no lock", d)
	}
	if _, w, l, _ := counters(a); w != w0 || l != l0 {
		t.Errorf("no-op Update: %d writes, %d locks; want 0, 0", w-w0, l-l0)
	}
	if got := mustGet(t, a, "openai:a"); !got.LastUsed.Equal(now) {
		t.Errorf("Get during B's transaction = %+v", got)
	}

	// A real change needs the lock: with a short deadline it fails, unwritten.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, err := a.Update(short, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 3 }); err == nil {
		t.Fatal("a real change succeeded while another replica held the write lock")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil { // give the handle's one connection back
		t.Fatal(err)
	}
	if got := mustGet(t, a, "openai:a"); got.ErrorCount != 0 {
		t.Errorf("failed Update left ErrorCount %d in the cache or table", got.ErrorCount)
	}
	if got := mustUpdate(t, a, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 3 }); got.ErrorCount != 3 {
		t.Errorf("Update after the lock was released = %+v", got)
	}
	if got := mustGet(t, newStoreT(t, other), "openai:a"); got.ErrorCount != 3 {
		t.Errorf("replica B reads %d, want 3", got.ErrorCount)
	}
}

// TestStateStore_D6_ConcurrentReadYourWrites: 200 goroutines over two replicas:
// each increments a shared key on one replica and then reads it on the other; the
// read must show at least the value its own write returned (no stale cache), and
// no increment is lost. Run with -race.
// covers D6
func TestStateStore_D6_ConcurrentReadYourWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "shared.db")
	reps := []*StateStore{newStoreT(t, openT(t, path)), newStoreT(t, openT(t, path))}
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
}

// TestStateStore_ClosedHandle: after Close the store fails cleanly.
func TestStateStore_ClosedHandle(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "d.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStoreT(t, db)
	mustUpdate(t, s, "k", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	if err := Close(db); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), "k"); err == nil {
		t.Error("Get on a closed handle: want an error")
	}
	if _, err := s.Update(context.Background(), "k", func(p *failover.ProfileState) {}); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Update on a closed handle: err = %v, want a database error", err)
	}
}

// BenchmarkStateStoreUpdateNoOp measures an Update whose fn changes nothing on a
// cached row (a success on a clean profile): no lock, no write.
func BenchmarkStateStoreUpdateNoOp(b *testing.B) {
	ctx := context.Background()
	s := newStoreT(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
	fn := func(p *failover.ProfileState) { p.LastUsed = t0; p.ErrorCount = 0 }
	if _, err := s.Update(ctx, "openai:a", fn); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Update(ctx, "openai:a", fn); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStateStore_UpdateMany: several keys in one transaction, on both paths; a
// repeated key sees its earlier result; a no-op batch takes no lock; a batch on
// replica A is seen by replica B.
// covers D6
func TestStateStore_UpdateMany(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "shared.db")
			a := newStoreMode(t, openT(t, path), mode)
			b := newStoreT(t, openT(t, path))
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
			if got := mustGet(t, b, "model:openai/gpt-4o"); got.ErrorCount != 3 {
				t.Errorf("replica B reads the model key = %d, want 3", got.ErrorCount)
			}
			many, err := b.GetMany(ctx, []string{"model:openai/gpt-4o", "absent", "openai:a"})
			if err != nil || len(many) != 3 || many[0].ErrorCount != 3 || many[1] != (failover.ProfileState{Key: "absent"}) || many[2].ErrorCount != 6 {
				t.Errorf("GetMany = %+v, %v", many, err)
			}
			many, err = a.GetMany(ctx, []string{"openai:a", "model:openai/gpt-4o"})
			if err != nil || len(many) != 2 || many[0].ErrorCount != 6 || many[1].ErrorCount != 3 {
				t.Errorf("GetMany on A = %+v, %v", many, err)
			}
			if _, err := a.UpdateMany(ctx, keys, nil); err == nil {
				t.Error("UpdateMany with nil fn: want error")
			}
			if got, err := a.UpdateMany(ctx, nil, func(int, *failover.ProfileState) {}); err != nil || len(got) != 0 {
				t.Errorf("UpdateMany with no keys = %v, %v", got, err)
			}
			if mode != "sqlite" {
				return
			}
			// A no-op batch on current cached rows takes no lock.
			_, w0, l0, _ := counters(a)
			got, err := a.UpdateMany(ctx, keys[:2], func(int, *failover.ProfileState) {})
			if err != nil || got[0].ErrorCount != 6 || got[1].ErrorCount != 3 {
				t.Fatalf("no-op batch = %+v, %v", got, err)
			}
			if _, w, l, _ := counters(a); w != w0 || l != l0 {
				t.Errorf("no-op batch: %d writes, %d locks, want none", w-w0, l-l0)
			}
			// After B's write the same no-op batch re-reads (and still writes nothing).
			mustUpdate(t, b, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 40 })
			got, err = a.UpdateMany(ctx, keys[:2], func(int, *failover.ProfileState) {})
			if err != nil || got[0].ErrorCount != 40 {
				t.Fatalf("no-op batch after B's write = %+v, %v; want 40", got, err)
			}
		})
	}
}

// BenchmarkRunSQLiteStoreCallsProposed replays the store calls of one fallback
// run as the engine could make them (see BENCHMARKS.md): the 4 reads as one
// GetMany per candidate (model key + profile), the primary's
// failure as ONE UpdateMany (profile + model key), and the fallback's success on a
// clean profile as a no-op Update (LastUsed not rewritten). Engine CPU is not
// included: add BenchmarkRunMemStore.
func BenchmarkRunSQLiteStoreCallsProposed(b *testing.B) {
	ctx := context.Background()
	s := newStoreT(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
	now := t0
	clean := func(p *failover.ProfileState) { p.ErrorCount, p.Consecutive = 0, 0 }
	failKeys := []string{"openai:default", failover.ModelKey(primaryRef)}
	gets := [][]string{{failover.ModelKey(primaryRef), "openai:default"}, {failover.ModelKey(fallbackRef), "anthropic:default"}}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(10 * time.Minute)
		for _, k := range gets {
			if _, err := s.GetMany(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.UpdateMany(ctx, failKeys, func(i int, p *failover.ProfileState) {
			p.ErrorCount++
			p.LastFailure = now
			p.CooldownUntil = now.Add(time.Minute)
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Update(ctx, "anthropic:default", clean); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/attempt")
}
