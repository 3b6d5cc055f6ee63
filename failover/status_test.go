package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"

	"github.com/detourbot/detour/failover/failovertest"
)

// covers V5, B3, N5 data: CandidateStatus reports per-profile state; Clear and
// ClearModel make a model or profile available again.
func TestEngine_V5_StatusAndClear(t *testing.T) {
	h := newHarness(t)
	profs := []Profile{
		{ID: "openai:a", Provider: "openai", Type: ProfileAPIKey},
		{ID: "openai:b", Provider: "openai", Type: ProfileAPIKey},
		{ID: "anthropic:main", Provider: "anthropic"},
	}
	ctx := context.Background()
	reset := t0.Add(30 * 24 * time.Hour)
	if err := h.e.RecordFailure(ctx, Candidate{Provider: "openai", Model: "gpt-4o", Profile: "openai:a"},
		Failure{Reason: classify.ReasonBilling, RecoveryAt: reset}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.RecordFailure(ctx, Candidate{Provider: "openai", Model: "gpt-4o", Profile: "openai:b"},
		Failure{Reason: classify.ReasonRateLimit, RetryAfter: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	cs, err := h.e.CandidateStatus(ctx, "openai/gpt-4o", profs)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Available || len(cs.Profiles) != 2 || cs.Reason != classify.ReasonRateLimit || !cs.Until.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("status %+v", cs)
	}
	a := cs.Profiles[0]
	if a.State != StateDisabled || a.Reason != classify.ReasonBilling || !a.RecoveryAt.Equal(reset) || !a.Until.Equal(t0.Add(7*24*time.Hour)) {
		t.Fatalf("C11: disabled profile %+v (RecoveryAt as stated, wait capped)", a)
	}
	if b := cs.Profiles[1]; b.State != StateCooldown || b.Model != "openai/gpt-4o" {
		t.Fatalf("scoped profile %+v", b)
	}
	// A sibling model is available through openai:b (D2).
	if cs2, _ := h.e.CandidateStatus(ctx, "openai/gpt-4o-mini", profs); !cs2.Available {
		t.Fatalf("sibling status %+v", cs2)
	}
	if err := h.e.Clear(ctx, "openai:a"); err != nil {
		t.Fatal(err)
	}
	if err := h.e.ClearModel(ctx, "openai/gpt-4o", profs); err != nil {
		t.Fatal(err)
	}
	cs, _ = h.e.CandidateStatus(ctx, "openai/gpt-4o", profs)
	if !cs.Available || cs.Profiles[0].State != StateOK || cs.Profiles[1].State != StateOK {
		t.Fatalf("after clear: %+v", cs)
	}
	// R7 model state shows in status and clears with the "provider/model" form.
	for i := 0; i < 3; i++ {
		_ = h.e.RecordFailure(ctx, Candidate{Provider: "ollama", Model: "qwen"}, Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient})
	}
	cs, _ = h.e.CandidateStatus(ctx, "ollama/qwen", nil)
	if cs.Available || cs.Model.Reason != classify.ReasonConsecutiveTimeout {
		t.Fatalf("model state %+v", cs)
	}
	if err := h.e.Clear(ctx, "ollama/qwen"); err != nil {
		t.Fatal(err)
	}
	if cs, _ = h.e.CandidateStatus(ctx, "ollama/qwen", nil); !cs.Available {
		t.Fatalf("after clear: %+v", cs)
	}
	// RecordSuccess clears everything at once (D1).
	_ = h.e.RecordFailure(ctx, Candidate{Provider: "anthropic", Model: "c", Profile: "anthropic:main"}, Failure{Reason: classify.ReasonAuthPermanent})
	_ = h.e.RecordSuccess(ctx, Candidate{Provider: "anthropic", Model: "c", Profile: "anthropic:main"})
	if cs, _ = h.e.CandidateStatus(ctx, "anthropic/c", profs); !cs.Available {
		t.Fatalf("after success: %+v", cs)
	}
	// Expired profiles are reported as such.
	exp := []Profile{{ID: "openai:old", Provider: "openai", ExpiresAt: t0.Add(-time.Hour)}}
	if cs, _ = h.e.CandidateStatus(ctx, "openai/gpt-4o", exp); cs.Available || cs.Profiles[0].State != StateExpired {
		t.Fatalf("expired: %+v", cs)
	}
}

// covers R11 + V5: Clear resets the probe throttle so a probe can follow at once.
func TestEngine_B3_ClearResetsProbeThrottle(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if !h.e.claimProbe(ctx, "openai", time.Hour, time.Time{}, t0) || h.e.claimProbe(ctx, "openai", time.Hour, time.Time{}, t0) {
		t.Fatal("throttle")
	}
	if err := h.e.Clear(context.Background(), "openai:a"); err != nil {
		t.Fatal(err)
	}
	if !h.e.claimProbe(ctx, "openai", time.Hour, time.Time{}, t0) {
		t.Fatal("Clear did not reset the throttle")
	}
}

func TestMemStore_UpdateAndCancel(t *testing.T) {
	s := NewMemStore()
	ctx := context.Background()
	got, err := s.Get(ctx, "k")
	if err != nil || got.Key != "k" || got.ErrorCount != 0 {
		t.Fatalf("absent: %+v %v", got, err)
	}
	if _, err := s.Update(ctx, "k", func(p *ProfileState) { p.ErrorCount++; p.Key = "wrong" }); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.Get(ctx, "k"); got.ErrorCount != 1 || got.Key != "k" || s.Len() != 1 {
		t.Fatalf("after update: %+v", got)
	}
	if _, err := s.Update(ctx, "k", nil); err == nil {
		t.Fatal("nil fn accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Update(cctx, "k", func(*ProfileState) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled update: %v", err)
	}
}

func TestClock_SleepAdvancesVirtualTime(t *testing.T) {
	c := failovertest.NewClock(t0)
	if err := c.Sleep(context.Background(), 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if got := c.Now().Sub(t0); got != 48*time.Hour+time.Minute {
		t.Fatalf("now +%v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || c.Now().Sub(t0) != 48*time.Hour+time.Minute {
		t.Fatalf("cancelled sleep: %v", err)
	}
	if s := c.Sleeps(); len(s) != 1 || s[0] != 48*time.Hour {
		t.Fatalf("sleeps %v", s)
	}
	var _ Clock = c
}
