package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

var t0 = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

const (
	primaryRef  failover.ModelRef = "openai/gpt-4o"
	fallbackRef failover.ModelRef = "anthropic/claude-sonnet"
)

// engineReq is a two-model chain: openai (profiles given) then anthropic.
func engineReq(session string, openaiProfiles ...string) failover.Request {
	req := failover.Request{
		SessionKey: session,
		Chain:      []failover.ModelRef{primaryRef, fallbackRef},
		Primary:    primaryRef,
		Source:     failover.SourceDefault,
		Profiles: map[string][]failover.Profile{
			"anthropic": {{ID: "anthropic:default", Provider: "anthropic", Type: failover.ProfileAPIKey}},
		},
	}
	for _, id := range openaiProfiles {
		req.Profiles["openai"] = append(req.Profiles["openai"], failover.Profile{ID: id, Provider: "openai", Type: failover.ProfileAPIKey})
	}
	return req
}

// newEngine returns an engine over the state store of the database dsn of
// driver, with no jitter and a log the test can inspect.
func newEngine(t testing.TB, driver, dsn string, clock failover.Clock) (*failover.Engine, *store.StateStore, *syncbuf.Buffer) {
	t.Helper()
	return engineOn(t, openDriverT(t, driver, dsn), clock)
}

// engineOn is newEngine on an open handle.
func engineOn(t testing.TB, db *gorm.DB, clock failover.Clock) (*failover.Engine, *store.StateStore, *syncbuf.Buffer) {
	t.Helper()
	st := newStoreT(t, db)
	log, buf := testLogger(t)
	return &failover.Engine{
		Store:  st,
		Clock:  clock,
		Policy: failover.DefaultPolicy(),
		Log:    log,
		Rand:   func() float64 { return 0.5 }, // jitter factor 1
	}, st, buf
}

func rateLimited(a failover.Attempt, recovery time.Time) *failover.Failure {
	return &failover.Failure{Reason: classify.ReasonRateLimit, Class: classify.ClassTransient, Status: 429,
		Message: "Rate limit reached", RecoveryAt: recovery,
		Provider: a.Candidate.Provider, Model: a.Candidate.Model, Profile: a.Candidate.Profile}
}

// TestEngine_D6_RestartKeepsCooldown: a run puts the primary's profile into a
// cooldown; after a restart (database closed and reopened, a new Engine with
// empty in-process caches) the next run probes or skips that profile exactly as
// the reloaded state says.
// covers D6, M1
func TestEngine_D6_RestartKeepsCooldown(t *testing.T) {
	testdb.Each(t, testRestartKeepsCooldown)
}

func testRestartKeepsCooldown(t *testing.T, driver string) {
	tests := []struct {
		name      string
		recovery  time.Time     // provider-stated reset of the first failure (C11, D5)
		after     time.Duration // restart happens this long after the failure
		wantUntil time.Time
		wantKinds []failover.AttemptKind // attempts of the run after the restart, on openai
		wantSkip  classify.Reason        // skip record of openai after the restart
	}{
		{name: "short cooldown is probed", after: 2 * time.Second, wantUntil: t0.Add(5 * time.Second), // A3
			wantKinds: []failover.AttemptKind{failover.AttemptProbe}},
		{name: "stated reset in an hour is skipped", recovery: t0.Add(time.Hour), after: 10 * time.Second,
			wantUntil: t0.Add(time.Hour), wantSkip: classify.ReasonRateLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := testdb.DSN(t, driver)

			// Run 1: openai rate-limited, anthropic answers.
			clock := failovertest.NewClock(t0)
			db := openDriverT(t, driver, path)
			eng, _, _ := engineOn(t, db, clock)
			res, err := eng.Run(ctx, engineReq("s1", "openai:default"), func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
				if a.Candidate.Provider == "openai" {
					return failover.Output{}, rateLimited(a, tc.recovery)
				}
				return failover.Output{Text: "hello", FinishReason: "stop"}, nil
			})
			if err != nil || !res.FellBack || res.Candidate.Ref() != string(fallbackRef) {
				t.Fatalf("run 1 = %+v, %v; want a fallback answer", res, err)
			}
			if err := database.Close(db); err != nil { // the process stops
				t.Fatal(err)
			}

			// Restart: a new handle and a new Engine, later.
			clock2 := failovertest.NewClock(t0.Add(tc.after))
			eng2, st2, _ := newEngine(t, driver, path, clock2)
			ps, err := st2.Get(ctx, "openai:default")
			if err != nil {
				t.Fatal(err)
			}
			if !ps.CooldownUntil.Equal(tc.wantUntil) || ps.CooldownReason != classify.ReasonRateLimit ||
				ps.CooldownModel != string(primaryRef) || ps.ErrorCount != 1 || !ps.RecoveryAt.Equal(tc.recovery) {
				t.Fatalf("reloaded state %+v; want cooldown until %v (rate_limit, %s), 1 error, recovery %v",
					ps, tc.wantUntil, primaryRef, tc.recovery)
			}

			var kinds []failover.AttemptKind
			res, err = eng2.Run(ctx, engineReq("s2", "openai:default"), func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
				if a.Candidate.Provider == "openai" {
					kinds = append(kinds, a.Kind)
					return failover.Output{}, rateLimited(a, time.Time{})
				}
				return failover.Output{Text: "hello again", FinishReason: "stop"}, nil
			})
			if err != nil || res.Candidate.Ref() != string(fallbackRef) {
				t.Fatalf("run 2 = %+v, %v; want the fallback's answer", res, err)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.wantKinds) {
				t.Errorf("openai attempts after restart = %v, want %v", kinds, tc.wantKinds)
			}
			if tc.wantSkip != "" {
				if len(res.Attempts) == 0 || res.Attempts[0].Skipped != tc.wantSkip || res.Attempts[0].Candidate.Provider != "openai" {
					t.Errorf("first record = %+v, want openai skipped for %s", res.Attempts, tc.wantSkip)
				}
			}
			// The active window was not extended by the probe's failure (D1).
			ps, _ = st2.Get(ctx, "openai:default")
			if !ps.CooldownUntil.Equal(tc.wantUntil) {
				t.Errorf("cooldown after run 2 = %v, want still %v", ps.CooldownUntil, tc.wantUntil)
			}

			// After the window, a third process uses the primary normally again.
			clock3 := failovertest.NewClock(tc.wantUntil.Add(time.Second))
			eng3, st3, _ := newEngine(t, driver, path, clock3)
			kinds = nil
			res, err = eng3.Run(ctx, engineReq("s3", "openai:default"), func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
				kinds = append(kinds, a.Kind)
				return failover.Output{Text: "primary is back", FinishReason: "stop"}, nil
			})
			if err != nil || res.FellBack || res.Candidate.Ref() != string(primaryRef) {
				t.Fatalf("run 3 = %+v, %v; want the primary", res, err)
			}
			if fmt.Sprint(kinds) != fmt.Sprint([]failover.AttemptKind{failover.AttemptNormal}) {
				t.Errorf("attempts after the window = %v, want [normal]", kinds)
			}
			ps, _ = st3.Get(ctx, "openai:default")
			if ps.ErrorCount != 0 || !ps.CooldownUntil.IsZero() || !ps.LastUsed.Equal(clock3.Now()) {
				t.Errorf("state after success = %+v, want cleared with LastUsed %v", ps, clock3.Now())
			}
		})
	}
}

// TestEngine_D6_ConcurrentRuns: 200 concurrent runs share two openai
// profiles and one anthropic profile over the state store: every run ends with
// the fallback's answer, no store error ("database is locked") is logged, and
// every failure the attempts returned is counted in the store (no lost update):
// each profile's ErrorCount and the model's consecutive count.
// covers D6, M2
func TestEngine_D6_ConcurrentRuns(t *testing.T) {
	testdb.Each(t, testConcurrentRuns)
}

func testConcurrentRuns(t *testing.T, driver string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, st, logs := newEngine(t, driver, testdb.DSN(t, driver), failovertest.NewClock(t0))
	// A zero-length cooldown on a frozen clock never blocks, so every run makes
	// the same two openai attempts (one per profile) and every failure is a
	// read-modify-write of a shared row.
	eng.Policy.TransientLadder = []time.Duration{0} // rate limits climb the A3 ladder
	eng.Policy.TimeoutSwitchThreshold = 0           // the model key only counts (R7 off)

	var mu sync.Mutex
	failures := map[string]int{} // profile id -> rate limits returned
	var modelFailures atomic.Int64
	attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
		if a.Candidate.Provider == "openai" {
			mu.Lock()
			failures[a.Candidate.Profile]++
			mu.Unlock()
			modelFailures.Add(1)
			return failover.Output{}, rateLimited(a, time.Time{})
		}
		return failover.Output{Text: "ok", FinishReason: "stop"}, nil
	}

	const runs = 200
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := eng.Run(ctx, engineReq(fmt.Sprintf("session-%d", i), "openai:a", "openai:b"), attempt)
			switch {
			case err != nil:
				errs <- fmt.Errorf("run %d: %w", i, err)
			case res.Candidate.Ref() != string(fallbackRef):
				errs <- fmt.Errorf("run %d answered from %s", i, res.Candidate.Ref())
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("runs did not all end")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := logs.String(); strings.Contains(s, "store error") || strings.Contains(s, "locked") {
		t.Errorf("store errors during the runs:\n%s", s)
	}

	total := 0
	for _, id := range []string{"openai:a", "openai:b"} {
		ps, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ps.ErrorCount != failures[id] {
			t.Errorf("%s ErrorCount = %d, want %d (lost updates)", id, ps.ErrorCount, failures[id])
		}
		total += failures[id]
	}
	if total != 2*runs {
		t.Errorf("%d openai attempts for %d runs, want 2 per run", total, runs)
	}
	ms, err := st.Get(ctx, failover.ModelKey(primaryRef))
	if err != nil {
		t.Fatal(err)
	}
	if int64(ms.Consecutive) != modelFailures.Load() {
		t.Errorf("model Consecutive = %d, want %d (lost updates)", ms.Consecutive, modelFailures.Load())
	}
	if ps, _ := st.Get(ctx, "anthropic:default"); ps.LastUsed.IsZero() {
		t.Error("fallback profile never recorded as used")
	}
}

// benchRun measures whole fallback runs: the primary fails rate_limit, the
// fallback answers (two attempts per run). Runs are step apart on the fake clock;
// a non-nil ladder replaces the cooldown ladder (it must end before step so the
// primary is attempted on every run).
func benchRun(b *testing.B, store failover.StateStore, step time.Duration, ladder []time.Duration) {
	ctx := context.Background()
	clock := failovertest.NewClock(t0)
	eng := &failover.Engine{Store: store, Clock: clock, Policy: failover.DefaultPolicy(),
		Log: slog.New(slog.DiscardHandler), Rand: func() float64 { return 0.5 }}
	if ladder != nil {
		eng.Policy.TransientLadder = ladder
	}
	req := engineReq("bench", "openai:default")
	attempts := 0
	attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
		attempts++
		if a.Candidate.Provider == "openai" {
			return failover.Output{}, rateLimited(a, time.Time{})
		}
		return failover.Output{Text: "ok", FinishReason: "stop"}, nil
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		clock.Advance(step) // the last run's cooldown is over
		res, err := eng.Run(ctx, req, attempt)
		if err != nil || !res.FellBack {
			b.Fatalf("run = %+v, %v", res, err)
		}
	}
	elapsed := time.Since(start)
	if attempts != 2*b.N {
		b.Fatalf("attempts = %d, want %d", attempts, 2*b.N)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(attempts), "ns/attempt")
}

// BenchmarkRunSQLite: engine overhead per attempt over the SQLite state store.
// Runs are 10 minutes apart (the default ladder's 5 min cap is over), so the
// fallback profile's stored LastUsed is always older than the engine's lazy
// LastUsed window and every success moves it: per run 2 GetMany, 1 UpdateMany
// (the primary's profile + model key) and 1 Update of the fallback's LastUsed,
// each changing Update a read then a write transaction.
func BenchmarkRunSQLite(b *testing.B) {
	db, _ := newDB(b, testdb.SQLite)
	benchRun(b, newStoreT(b, db), 10*time.Minute, nil)
}

// BenchmarkRunSQLiteBusy: the same run on a busy bot, runs 2 s apart. A 1 s
// cooldown ladder keeps the rate-limited primary attempted on every run (with
// the default ladder a busy bot would skip it). The fallback's clean profile was
// used 2 s before, so its success changes nothing (lazy LastUsed): 2 GetMany,
// 1 UpdateMany, 1 no-op Update (one read, no transaction) per run.
func BenchmarkRunSQLiteBusy(b *testing.B) {
	db, _ := newDB(b, testdb.SQLite)
	benchRun(b, newStoreT(b, db), 2*time.Second, []time.Duration{time.Second})
}

// BenchmarkRunPostgres and BenchmarkRunPostgresBusy are the same runs on
// Postgres (skipped without DETOUR_TEST_POSTGRES_DSN).
func BenchmarkRunPostgres(b *testing.B) {
	db, _ := newDB(b, testdb.Postgres)
	benchRun(b, newStoreT(b, db), 10*time.Minute, nil)
}

func BenchmarkRunPostgresBusy(b *testing.B) {
	db, _ := newDB(b, testdb.Postgres)
	benchRun(b, newStoreT(b, db), 2*time.Second, []time.Duration{time.Second})
}

// BenchmarkRunMemStore is the same run over failover.MemStore, to separate the
// engine's own cost from the database's.
func BenchmarkRunMemStore(b *testing.B) {
	benchRun(b, failover.NewMemStore(), 10*time.Minute, nil)
}

// writeCounter counts the rows db's INSERT and UPDATE statements change.
func writeCounter(t testing.TB, db *gorm.DB) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	count := func(tx *gorm.DB) { n.Add(tx.Statement.RowsAffected) }
	if err := db.Callback().Create().After("gorm:create").Register("test:count_writes", count); err != nil {
		t.Fatal(err)
	}
	if err := db.Callback().Update().After("gorm:update").Register("test:count_writes", count); err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestEngine_StoreWorkPerRun pins the store work of a steady fallback run (the
// primary fails rate_limit, the fallback answers): the primary's profile and
// model failure (D1, R7) are written together (one UpdateMany), and a success
// on the fallback's clean profile used 2 s before writes nothing (lazy
// LastUsed); runs 10 minutes apart also write the fallback's LastUsed.
// covers D1, R7, P1
func TestEngine_StoreWorkPerRun(t *testing.T) {
	tests := []struct {
		name                   string
		step                   time.Duration
		ladder                 []time.Duration
		writes                 int64 // rows written per run
		wantFallbackLastUsedAt func(now time.Time, first time.Time) time.Time
	}{
		{name: "busy: runs 2 s apart", step: 2 * time.Second, ladder: []time.Duration{time.Second}, writes: 2,
			wantFallbackLastUsedAt: func(_, first time.Time) time.Time { return first }},
		{name: "idle: runs 10 min apart", step: 10 * time.Minute, writes: 3,
			wantFallbackLastUsedAt: func(now, _ time.Time) time.Time { return now }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := failovertest.NewClock(t0)
			db := openDriverT(t, testdb.SQLite, testdb.DSN(t, testdb.SQLite))
			eng, st, logs := engineOn(t, db, clock)
			writes := writeCounter(t, db)
			if tc.ladder != nil {
				eng.Policy.TransientLadder = tc.ladder
			}
			attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
				if a.Candidate.Provider == "openai" {
					return failover.Output{}, rateLimited(a, time.Time{})
				}
				return failover.Output{Text: "ok", FinishReason: "stop"}, nil
			}
			req := engineReq("s", "openai:default")
			run := func() {
				t.Helper()
				res, err := eng.Run(ctx, req, attempt)
				if err != nil || !res.FellBack || len(res.Attempts) != 2 {
					t.Fatalf("run = %+v, %v; want 2 attempts and the fallback's answer", res, err)
				}
			}
			run() // first use: every row written
			first := clock.Now()
			for range 2 {
				clock.Advance(tc.step)
				w0 := writes.Load()
				run()
				if w := writes.Load() - w0; w != tc.writes {
					t.Errorf("one run wrote %d rows, want %d", w, tc.writes)
				}
			}
			ps := mustGet(t, st, "anthropic:default")
			if want := tc.wantFallbackLastUsedAt(clock.Now(), first); !ps.LastUsed.Equal(want) {
				t.Errorf("stored fallback LastUsed = %v, want %v", ps.LastUsed, want)
			}
			if ms := mustGet(t, st, failover.ModelKey(primaryRef)); ms.Consecutive != 3 {
				t.Errorf("primary model Consecutive = %d, want 3 (one per run)", ms.Consecutive)
			}
			if s := logs.String(); strings.Contains(s, "store error") {
				t.Errorf("store errors:\n%s", s)
			}
		})
	}
}
