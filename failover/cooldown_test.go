package failover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// covers A3 (amends D1): a transient failure cools down 5 s, then 15 s, then
// 60 s (the cap); the ladder starts again after failure_window_minutes without
// a failure, and one success resets it.
func TestCooldown_A3_TransientLadderWindowAndSuccess(t *testing.T) {
	p := DefaultPolicy()
	for _, r := range []classify.Reason{classify.ReasonTimeout, classify.ReasonRateLimit, classify.ReasonOverloaded,
		classify.ReasonUnclassified, classify.ReasonRefusedResponse} {
		t.Run(string(r), func(t *testing.T) {
			var st ProfileState
			now := t0
			f := &Failure{Reason: r}
			want := []time.Duration{5 * time.Second, 15 * time.Second, time.Minute, time.Minute}
			for i, w := range want {
				applyFailure(&st, f, "openai/gpt-4o", now, &p, 0.5)
				if got := st.CooldownUntil.Sub(now); got != w {
					t.Fatalf("failure %d: cooldown %v, want %v (A3 ladder)", i+1, got, w)
				}
				now = st.CooldownUntil.Add(time.Second) // let the window expire
			}
			// D1: a failure inside an active window never extends it.
			until := st.CooldownUntil
			applyFailure(&st, f, "openai/gpt-4o", until.Add(-time.Second), &p, 0.5)
			if !st.CooldownUntil.Equal(until) {
				t.Fatalf("active window extended: %v -> %v", until, st.CooldownUntil)
			}
			// A3: the ladder starts again after failure_window_minutes without failures.
			later := st.LastFailure.Add(p.TransientWindow + time.Second)
			applyFailure(&st, f, "openai/gpt-4o", later, &p, 0.5)
			if st.ErrorCount != 1 || st.CooldownUntil.Sub(later) != 5*time.Second {
				t.Fatalf("after the window: errorCount %d cooldown %v", st.ErrorCount, st.CooldownUntil.Sub(later))
			}
			// A3: one success resets the ladder.
			applyFailure(&st, f, "openai/gpt-4o", st.CooldownUntil.Add(time.Second), &p, 0.5)
			applySuccess(&st, "openai/gpt-4o", st.CooldownUntil.Add(time.Second))
			next := st.LastUsed.Add(time.Second)
			applyFailure(&st, f, "openai/gpt-4o", next, &p, 0.5)
			if st.ErrorCount != 1 || st.CooldownUntil.Sub(next) != 5*time.Second {
				t.Fatalf("after a success: errorCount %d cooldown %v", st.ErrorCount, st.CooldownUntil.Sub(next))
			}
		})
	}
}

// covers D1 (as amended by A3): an auth failure (an invalid key) keeps the
// 30 s / 1 min / 5 min ladder and the 24 h window; a transient failure's short
// window does not reset the billing doubling (D3).
func TestCooldown_D1_AuthLadderAndWindow(t *testing.T) {
	p := DefaultPolicy()
	var st ProfileState
	now := t0
	f := &Failure{Reason: classify.ReasonAuth}
	for i, w := range []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute, 5 * time.Minute} {
		applyFailure(&st, f, "openai/gpt-4o", now, &p, 0.5)
		if got := st.CooldownUntil.Sub(now); got != w {
			t.Fatalf("failure %d: cooldown %v, want %v (D1 ladder)", i+1, got, w)
		}
		now = st.CooldownUntil.Add(time.Second)
	}
	// Eleven minutes later the auth ladder has not started again (24 h window).
	eleven := st.LastFailure.Add(11 * time.Minute)
	applyFailure(&st, f, "openai/gpt-4o", eleven, &p, 0.5)
	if st.CooldownUntil.Sub(eleven) != 5*time.Minute {
		t.Fatalf("auth after 11 min: %v", st.CooldownUntil.Sub(eleven))
	}
	later := st.LastFailure.Add(p.FailureWindow + time.Hour)
	applyFailure(&st, f, "openai/gpt-4o", later, &p, 0.5)
	if st.ErrorCount != 1 || st.CooldownUntil.Sub(later) != 30*time.Second {
		t.Fatalf("after failure window: errorCount %d cooldown %v", st.ErrorCount, st.CooldownUntil.Sub(later))
	}
	// D3 doubling survives a transient failure after A3's window.
	var b ProfileState
	applyFailure(&b, &Failure{Reason: classify.ReasonBilling}, "openai/gpt-4o", t0, &p, 0.5)
	at := b.DisabledUntil.Add(time.Minute)
	applyFailure(&b, &Failure{Reason: classify.ReasonTimeout}, "openai/gpt-4o", at, &p, 0.5)
	at = at.Add(11 * time.Minute)
	applyFailure(&b, &Failure{Reason: classify.ReasonTimeout}, "openai/gpt-4o", at, &p, 0.5)
	applyFailure(&b, &Failure{Reason: classify.ReasonBilling}, "openai/gpt-4o", at.Add(time.Minute), &p, 0.5)
	if got := b.DisabledUntil.Sub(at.Add(time.Minute)); got != 10*time.Hour {
		t.Fatalf("second billing disable %v, want 10h (D3 doubling)", got)
	}
	// D1: success clears errorCount, cooldown and disable at once.
	applySuccess(&b, "openai/gpt-4o", at.Add(2*time.Minute))
	if b.ErrorCount != 0 || !b.CooldownUntil.IsZero() || !b.DisabledUntil.IsZero() || b.DisabledReason != "" || b.DisableCount != 0 {
		t.Fatalf("success did not clear: %+v", b)
	}
}

// covers A4: a local failure leaves a profile's and a model's state as it was.
func TestCooldown_A4_LocalTouchesNothing(t *testing.T) {
	p := DefaultPolicy()
	f := &Failure{Reason: classify.ReasonLocal, Class: classify.ClassTransient, Message: "socket: too many open files"}
	var st, ms ProfileState
	for range 5 {
		applyFailure(&st, f, "openai/gpt-4o", t0, &p, 0.5)
		applyModelFailure(&ms, f, t0, &p, 0.5)
	}
	if st != (ProfileState{}) || ms != (ProfileState{}) {
		t.Fatalf("local failure changed state: profile %+v model %+v", st, ms)
	}
}

func TestCooldown_D2_ModelScoped(t *testing.T) {
	p := DefaultPolicy()
	var st ProfileState
	applyFailure(&st, &Failure{Reason: classify.ReasonRateLimit}, "openai/gpt-4o", t0, &p, 0.5)
	if st.CooldownModel != "openai/gpt-4o" {
		t.Fatalf("CooldownModel = %q", st.CooldownModel)
	}
	if u, _ := blockedUntil(&st, "openai/gpt-4o", t0); u.IsZero() {
		t.Fatal("rate-limited model not blocked")
	}
	if u, _ := blockedUntil(&st, "openai/gpt-4o-mini", t0); !u.IsZero() {
		t.Fatal("D2: sibling model blocked by a model-scoped cooldown")
	}
	// Success on the sibling keeps the other model's scoped cooldown.
	applySuccess(&st, "openai/gpt-4o-mini", t0)
	if u, _ := blockedUntil(&st, "openai/gpt-4o", t0); u.IsZero() {
		t.Fatal("success on a sibling cleared another model's scoped cooldown")
	}
	// Billing disables block the whole profile across models.
	var b ProfileState
	applyFailure(&b, &Failure{Reason: classify.ReasonBilling}, "openai/gpt-4o", t0, &p, 0.5)
	if u, why := blockedUntil(&b, "openai/gpt-4o-mini", t0); u.IsZero() || why != classify.ReasonBilling {
		t.Fatal("D2: billing disable does not block sibling models")
	}
}

func TestCooldown_D3_D4_DisableDoublingAndCaps(t *testing.T) {
	p := DefaultPolicy()
	p.BillingBackoffByProvider = map[string]time.Duration{"openrouter": time.Hour}
	tests := []struct {
		name   string
		reason classify.Reason
		ref    string
		want   []time.Duration
	}{
		{"D3 billing 5h doubling cap 24h", classify.ReasonBilling, "openai/x", []time.Duration{5 * time.Hour, 10 * time.Hour, 20 * time.Hour, 24 * time.Hour}},
		{"D3 per-provider override", classify.ReasonBilling, "openrouter/x", []time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour}},
		{"D4 auth_permanent 10m doubling cap 60m", classify.ReasonAuthPermanent, "openai/x", []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 60 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st ProfileState
			now := t0
			for i, w := range tc.want {
				applyFailure(&st, &Failure{Reason: tc.reason}, tc.ref, now, &p, 0.5)
				if got := st.DisabledUntil.Sub(now); got != w || st.DisabledReason != tc.reason {
					t.Fatalf("step %d: disabled %v (%s), want %v", i+1, got, st.DisabledReason, w)
				}
				now = st.DisabledUntil.Add(time.Minute)
			}
		})
	}
}

func TestCooldown_D5_C11_StatedReset(t *testing.T) {
	p := DefaultPolicy()
	tests := []struct {
		name      string
		f         Failure
		wantUntil time.Duration
		wantRecov time.Time
	}{
		{"D5 reset later than ladder", Failure{Reason: classify.ReasonRateLimit, RecoveryAt: t0.Add(20 * time.Minute)}, 20 * time.Minute, t0.Add(20 * time.Minute)},
		{"D5 Retry-After seconds", Failure{Reason: classify.ReasonRateLimit, RetryAfter: 90 * time.Second}, 90 * time.Second, t0.Add(90 * time.Second)},
		{"C11 short wait uses ladder", Failure{Reason: classify.ReasonRateLimit, RetryAfter: 10 * time.Second}, 5 * time.Second, t0.Add(10 * time.Second)},
		{"C11 capped at 7 days, RecoveryAt as stated", Failure{Reason: classify.ReasonRateLimit, RecoveryAt: t0.Add(30 * 24 * time.Hour)}, 7 * 24 * time.Hour, t0.Add(30 * 24 * time.Hour)},
		{"D5 billing disable lasts to the reset", Failure{Reason: classify.ReasonBilling, RecoveryAt: t0.Add(40 * time.Hour)}, 40 * time.Hour, t0.Add(40 * time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st ProfileState
			applyFailure(&st, &tc.f, "openai/gpt-4o", t0, &p, 0.5)
			until := st.CooldownUntil
			if tc.f.Reason == classify.ReasonBilling {
				until = st.DisabledUntil
			}
			if got := until.Sub(t0); got != tc.wantUntil {
				t.Fatalf("until +%v, want +%v", got, tc.wantUntil)
			}
			if !st.RecoveryAt.Equal(tc.wantRecov) {
				t.Fatalf("RecoveryAt %v, want %v", st.RecoveryAt, tc.wantRecov)
			}
		})
	}
}

func TestCooldown_B8_Jitter(t *testing.T) {
	p := DefaultPolicy()
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		var st ProfileState
		applyFailure(&st, &Failure{Reason: classify.ReasonOverloaded}, "a/b", t0, &p, r)
		d := st.CooldownUntil.Sub(t0)
		if d < 4500*time.Millisecond || d > 5500*time.Millisecond {
			t.Fatalf("r=%v: cooldown %v outside ±10%% of 5s (A3)", r, d)
		}
		var b ProfileState
		applyFailure(&b, &Failure{Reason: classify.ReasonBilling}, "a/b", t0, &p, r)
		if d := b.DisabledUntil.Sub(t0); d < 4*time.Hour+30*time.Minute || d > 5*time.Hour+30*time.Minute {
			t.Fatalf("r=%v: billing %v outside ±10%% of 5h", r, d)
		}
	}
	var lo, hi ProfileState
	applyFailure(&lo, &Failure{Reason: classify.ReasonOverloaded}, "a/b", t0, &p, 0)
	applyFailure(&hi, &Failure{Reason: classify.ReasonOverloaded}, "a/b", t0, &p, 0.99)
	if lo.CooldownUntil.Equal(hi.CooldownUntil) {
		t.Fatal("B8: jitter has no effect")
	}
	// The cap is never exceeded by jitter.
	var c ProfileState
	c.DisableCount = 10
	c.LastFailure = t0
	applyFailure(&c, &Failure{Reason: classify.ReasonBilling}, "a/b", t0, &p, 0.99)
	if d := c.DisabledUntil.Sub(t0); d > 24*time.Hour {
		t.Fatalf("jitter exceeded the 24h cap: %v", d)
	}
}

func TestCooldown_D6_SharedAndDurable(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("hi")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, RecoveryAt: t0.Add(time.Hour)}))
	if _, err := h.e.Run(context.Background(), req, sc.fn); err != nil {
		t.Fatal(err)
	}
	// A second engine (a restart, or another replica) over the same store sees the cooldown.
	e2 := &Engine{Store: h.st, Clock: h.clk, Policy: DefaultPolicy(), Rand: func() float64 { return 0.5 }, Log: h.e.Log}
	sc2 := newScript(h.clk, ok("hi"))
	req.SessionKey = "slack:other"
	res, err := e2.Run(context.Background(), req, sc2.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc2.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) {
		t.Fatalf("D6: calls %v, want only the fallback", got)
	}
	if res.Attempts[0].Skipped != classify.ReasonRateLimit {
		t.Fatalf("skip not recorded: %+v", res.Attempts[0])
	}
}

func TestCooldown_R7_ModelConsecutive(t *testing.T) {
	p := DefaultPolicy()
	var st ProfileState
	f := &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient}
	applyModelFailure(&st, f, t0, &p, 0.5)
	applyModelFailure(&st, &Failure{Reason: classify.ReasonFormat, Class: classify.ClassDeterministic}, t0, &p, 0.5)
	applyModelFailure(&st, f, t0, &p, 0.5)
	if st.CooldownUntil.After(t0) {
		t.Fatal("marked before the threshold")
	}
	applyModelFailure(&st, f, t0, &p, 0.5)
	if st.CooldownReason != classify.ReasonConsecutiveTimeout || st.CooldownUntil.Sub(t0) != 5*time.Second { // A3
		t.Fatalf("R7: not marked: %+v", st)
	}
	applySuccess(&st, "a/b", t0)
	if st.Consecutive != 0 || !st.CooldownUntil.IsZero() {
		t.Fatal("R7: success does not reset")
	}
}

// covers P4: what the engine stores and logs of a provider message is redacted,
// single-line and bounded.
func TestClip_P4(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Rate limit reached", "Rate limit reached"},
		{"bad key sk-CANARY-abc123", "bad key [redacted]"},
		{"Authorization: Bearer abc.def", "Authorization: Bearer [redacted]"},
		{"slack xoxb-123-456-789", "slack [redacted]"},
		{"id a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6", "id [redacted]"},
		{"line\nbreak  and\ttab", "line break and tab"},
	} {
		if got := clip(tc.in); got != tc.want {
			t.Errorf("clip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := clip(strings.Repeat("x ", 500)); len([]rune(got)) > 200 {
		t.Errorf("clip kept %d runes", len([]rune(got)))
	}
}
