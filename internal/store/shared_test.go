package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// coolEverything puts the chain of engineReq into transient cooldowns with no
// stated reset and nothing near its end: no candidate can be tried.
func coolEverything(t *testing.T, st *store.StateStore) {
	t.Helper()
	for id, d := range map[string]time.Duration{"openai:default": time.Minute, "anthropic:default": 40 * time.Second} {
		if _, err := st.Update(context.Background(), id, func(s *failover.ProfileState) {
			s.CooldownUntil, s.CooldownReason, s.ErrorCount, s.LastFailure = t0.Add(d), classify.ReasonTimeout, 3, t0
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEngine_A1_SharedProbeAcrossReplicas: two replicas (engines with their own
// database handles) find nothing to try at once; one probes, the other joins
// the probe through the database and, once it answered, makes its own call.
// covers A1, M2
func TestEngine_A1_SharedProbeAcrossReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		dsn := testdb.DSN(t, driver)
		clk := failovertest.NewManualClock(t0)
		e1, st, _ := newEngine(t, driver, dsn, clk)
		e2, _, _ := newEngine(t, driver, dsn, clk)
		for _, e := range []*failover.Engine{e1, e2} {
			e.Policy.ProbeWindow = time.Second // no R11 probe: A1's step
		}
		coolEverything(t, st)
		release := make(chan struct{})
		var probes, calls atomic.Int32
		attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
			calls.Add(1)
			if a.Kind == failover.AttemptProbe {
				probes.Add(1)
				<-release
			}
			return failover.Output{Text: "ok", FinishReason: "stop", Progress: true}, nil
		}
		done := make(chan error, 2)
		go func() {
			_, err := e1.Run(context.Background(), engineReq("s1", "openai:default"), attempt)
			done <- err
		}()
		waitUntil(t, "the probe", func() bool { return probes.Load() == 1 })
		kind := make(chan failover.AttemptKind, 1)
		go func() {
			res, err := e2.Run(context.Background(), engineReq("s2", "openai:default"), attempt)
			if err == nil {
				kind <- res.Attempts[len(res.Attempts)-1].Kind
			}
			done <- err
		}()
		waitUntil(t, "the replica waiting", func() bool { return clk.Sleeping() == 1 })
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second) // the replica reads the probe row again
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if k := <-kind; probes.Load() != 1 || calls.Load() != 2 || k != failover.AttemptNormal {
			t.Fatalf("%d probes, %d calls, the replica answered with a %s attempt; want 1, 2, normal", probes.Load(), calls.Load(), k)
		}
		if ps := mustGet(t, st, "anthropic:default"); !ps.CooldownUntil.IsZero() {
			t.Fatalf("the probe's success did not clear the cooldown: %+v", ps)
		}
	})
}

// TestEngine_A1_DeadProberLapses: a replica that claimed a probe and died (its
// claim stored, no result) blocks another replica no longer than
// probe_wait_seconds, through the database. covers A1, M2
func TestEngine_A1_DeadProberLapses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		clk := failovertest.NewClock(t0)
		e, st, _ := newEngine(t, driver, testdb.DSN(t, driver), clk)
		e.Policy.ProbeWindow = time.Second
		coolEverything(t, st)
		if _, err := st.Update(context.Background(), "probe:anthropic", func(s *failover.ProfileState) { s.LastProbe = t0 }); err != nil {
			t.Fatal(err)
		}
		res, err := e.Run(context.Background(), engineReq("s", "openai:default"), func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
			return failover.Output{Text: "ok", FinishReason: "stop", Progress: true}, nil
		})
		if err != nil || res.Attempts[len(res.Attempts)-1].Kind != failover.AttemptProbe {
			t.Fatalf("%v %+v", err, res.Attempts)
		}
		if waited := clk.Now().Sub(t0); waited < e.Policy.SharedProbeWait || waited > e.Policy.SharedProbeWait+time.Second {
			t.Fatalf("waited %v behind a dead prober, want probe_wait_seconds (%v)", waited, e.Policy.SharedProbeWait)
		}
		if row := mustGet(t, st, "probe:anthropic"); !row.LastUsed.Equal(clk.Now()) {
			t.Fatalf("the take-over's answer not recorded: %+v", row)
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
