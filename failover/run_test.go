package failover

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

var bg = context.Background()

func mustSummary(t *testing.T, err error) *SummaryError {
	t.Helper()
	var se *SummaryError
	if !errors.As(err, &se) {
		t.Fatalf("want *SummaryError, got %T %v", err, err)
	}
	return se
}

// covers R1, R3, B5: rotate profiles within the provider, then fall back; the
// attempt errors do not escape when the fallback answers.
func TestRun_R1_TwoStages(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", failR(classify.ReasonRateLimit), failR(classify.ReasonRateLimit))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatalf("B5: error escaped: %v", err)
	}
	want := []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:b", "anthropic/claude@anthropic:main"}
	if got := sc.keys(); !eqStrings(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if !res.FellBack || res.Cause == nil || res.Cause.Reason != classify.ReasonRateLimit || res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("result %+v", res)
	}
	if res.Output.Text != "answer" || len(res.Attempts) != 3 {
		t.Fatalf("output %q attempts %d", res.Output.Text, len(res.Attempts))
	}
}

// covers R2: which failures advance the chain.
func TestRun_R2_AdvanceOrNot(t *testing.T) {
	tests := []struct {
		reason  classify.Reason
		advance bool
	}{
		{classify.ReasonAuth, true}, {classify.ReasonRateLimit, true}, {classify.ReasonOverloaded, true}, {classify.ReasonTimeout, true},
		{classify.ReasonBilling, true}, {classify.ReasonModelNotFound, true}, {classify.ReasonUnclassified, true}, {classify.ReasonNoErrorDetails, true},
		{classify.ReasonAborted, false}, {classify.ReasonContextOverflow, false}, {classify.ReasonContentFilter, false}, {classify.ReasonFormat, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.reason), func(t *testing.T) {
			h := newHarness(t)
			req := baseReq("openai/gpt-4o", "ollama/qwen")
			sc := newScript(h.clk, ok("fallback answer")).on("openai/gpt-4o", failR(tc.reason), failR(tc.reason))
			res, err := h.e.Run(bg, req, sc.fn)
			advanced := res.Candidate.Ref() == "ollama/qwen"
			if advanced != tc.advance {
				t.Fatalf("advanced=%v, want %v (calls %v, err %v)", advanced, tc.advance, sc.keys(), err)
			}
			if !tc.advance {
				var f *Failure
				if !errors.As(err, &f) || f.Reason != tc.reason {
					t.Fatalf("terminal failure not returned as itself: %v", err)
				}
				if n := sc.count(); n != 1 {
					t.Fatalf("terminal failure made %d calls (no rotation allowed)", n)
				}
			}
		})
	}
}

// covers R2: an unknown error on the last candidate surfaces (as a summary).
func TestRun_R2_UnknownOnLastSurfaces(t *testing.T) {
	h := newHarness(t)
	req := baseReq("ollama/qwen")
	sc := newScript(h.clk, failR(classify.ReasonUnclassified))
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	if se.Last() == nil || se.Last().Reason != classify.ReasonUnclassified || sc.count() != 1 {
		t.Fatalf("summary %v calls %d", se, sc.count())
	}
}

// covers R3: overloaded_backoff before the single rotation.
func TestRun_R3_OverloadedBackoff(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.OverloadedBackoff = 2 * time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonOverloaded), failR(classify.ReasonOverloaded))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	if s := h.clk.Sleeps(); len(s) != 1 || s[0] != 2*time.Second {
		t.Fatalf("sleeps %v, want one 2s overload backoff", s)
	}
	if n := sc.count(); n != 3 {
		t.Fatalf("calls %v: want 1 rotation then fallback", sc.keys())
	}
}

// covers R5: an idle timeout is retried on the same model at most once.
func TestRun_R5_IdleRetryOnce(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", idle(), idle())
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:a", "anthropic/claude@anthropic:main"}
	if got := sc.keys(); !eqStrings(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if res.Attempts[1].Kind != AttemptRetry {
		t.Fatalf("second attempt kind %v", res.Attempts[1].Kind)
	}
}

// covers R6: with nothing else usable (one key, the fallback cooling down), a
// short Retry-After is waited out (virtually) and the same profile retried once;
// the wait is logged and handed to the OnWait hook.
func TestRun_R6_ShortRetryAfterWaitsWhenNothingElseIsUsable(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	if err := h.e.RecordFailure(bg, Candidate{Provider: "anthropic", Model: "claude", Profile: "anthropic:main"},
		Failure{Reason: classify.ReasonOverloaded, Class: classify.ClassTransient}); err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	req.Trace.OnWait = func(c Candidate, d time.Duration, f Failure) { waits = append(waits, d) }
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, RetryAfter: 20 * time.Second}))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:a"}) {
		t.Fatalf("calls %v", got)
	}
	if s := h.clk.Sleeps(); len(s) != 1 || s[0] != 20*time.Second {
		t.Fatalf("sleeps %v", s)
	}
	if len(waits) != 1 || waits[0] != 20*time.Second {
		t.Fatalf("OnWait saw %v", waits)
	}
	if !strings.Contains(h.log.String(), "waiting for the provider before retrying") {
		t.Fatalf("no log line says the run waits:\n%s", h.log.String())
	}
	if res.FellBack {
		t.Fatal("fell back after a short wait")
	}
}

// covers R6: a 429 with Retry-After 2 s on key 1 while key 2 is healthy: key 2
// answers at once, nothing sleeps, and key 1 cools down.
func TestRun_R6_HealthySecondKeyAnswersAtOnce(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o@openai:a", fail(Failure{Reason: classify.ReasonRateLimit, RetryAfter: 2 * time.Second}))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:b"}) {
		t.Fatalf("calls %v", got)
	}
	if s := h.clk.Sleeps(); len(s) != 0 {
		t.Fatalf("slept %v with a healthy key available", s)
	}
	if res.Candidate.Profile != "openai:b" || res.FellBack {
		t.Fatalf("answered by %+v", res.Candidate)
	}
	if st, _ := h.st.Get(bg, "openai:a"); !st.CooldownUntil.After(t0) {
		t.Fatalf("the limited key does not cool down: %+v", st)
	}
}

// covers R6: one key rate-limited with a short wait and a usable fallback: the
// fallback answers at once, nothing sleeps.
func TestRun_R6_UsableFallbackAnswersAtOnce(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, RetryAfter: 2 * time.Second}))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "anthropic/claude@anthropic:main"}) {
		t.Fatalf("calls %v", got)
	}
	if s := h.clk.Sleeps(); len(s) != 0 || !res.FellBack {
		t.Fatalf("sleeps %v, fell back %v", s, res.FellBack)
	}
}

// covers R6, B6: a 429 with a reset two days away parks the profile (model scope)
// until the reset and moves on at once; nothing sleeps.
func TestRun_B6_LongResetParksAndMovesOn(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	reset := t0.Add(48 * time.Hour)
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, Status: 429, RecoveryAt: reset}))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.clk.Sleeps()) != 0 {
		t.Fatalf("B6: slept %v", h.clk.Sleeps())
	}
	if res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("answered by %s", res.Candidate.Ref())
	}
	st := h.state(t, "openai:a")
	if !st.CooldownUntil.Equal(reset) || st.CooldownModel != "openai/gpt-4o" || !st.RecoveryAt.Equal(reset) {
		t.Fatalf("B6: not parked until the reset: %+v", st)
	}
	// The next run skips the parked model without a call (R11: expiry far away).
	sc2 := newScript(h.clk, ok("y"))
	h.clk.Advance(time.Hour)
	if _, err := h.e.Run(bg, req, sc2.fn); err != nil {
		t.Fatal(err)
	}
	if got := sc2.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) {
		t.Fatalf("calls %v", got)
	}
}

// covers C3 handling, D1, A3: a 402 usage window classified as rate_limit cools down, not disables.
func TestRun_D1_UsageWindowCoolsDown(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, Status: 402, Message: "weekly usage limit exhausted"}))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	st := h.state(t, "openai:a")
	if st.CooldownReason != classify.ReasonRateLimit || !st.DisabledUntil.IsZero() || st.CooldownUntil.Sub(t0) != 5*time.Second { // A3
		t.Fatalf("402 usage window: %+v", st)
	}
}

// covers D3: OpenAI insufficient_quota on 429 (a billing Failure) disables the
// profile and moves on.
func TestRun_D3_QuotaOn429DisablesProfile(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, ok("x")).
		on("openai/gpt-4o@openai:a", fail(Failure{Reason: classify.ReasonBilling, Status: 429, Code: "insufficient_quota"})).
		on("openai/gpt-4o@openai:b", fail(Failure{Reason: classify.ReasonBilling, Status: 429, Code: "insufficient_quota"}))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("answered by %s", res.Candidate.Ref())
	}
	for _, id := range []string{"openai:a", "openai:b"} {
		st := h.state(t, id)
		if st.DisabledReason != classify.ReasonBilling || st.DisabledUntil.Sub(t0) != 5*time.Hour {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	// A sibling model of the same provider is blocked too (D2: billing is profile-wide).
	req2 := baseReq("anthropic/claude", "openai/gpt-4o-mini")
	sc2 := newScript(h.clk, ok("y")).on("anthropic/claude", failR(classify.ReasonModelNotFound))
	h.clk.Advance(time.Minute)
	_, err = h.e.Run(bg, req2, sc2.fn)
	se := mustSummary(t, err)
	if sc2.count() != 1 || se.Attempts[1].Skipped != classify.ReasonBilling {
		t.Fatalf("D2: calls %v attempts %v", sc2.keys(), se)
	}
}

// covers R7: stealth billing. The primary only ever times out; after 3 transient
// failures across turns it is marked unavailable, and later runs go straight to
// the fallback with no call to the primary until a probe is due.
func TestRun_R7_StealthBilling(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	// A3 makes every cooldown end within cooldown_probe_window, so R11 would
	// probe the primary at once; a short window keeps this test on R7's skip.
	h.e.Policy.ProbeWindow = 3 * time.Second
	timeout := step{err: &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Message: "attempt timeout"}}
	primaryCalls := 0
	for turn := 1; turn <= 3; turn++ {
		sc := newScript(h.clk, ok("fallback")).on("openai/gpt-4o", timeout, timeout)
		res, err := h.e.Run(bg, req, sc.fn)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if res.Candidate.Ref() != "anthropic/claude" {
			t.Fatalf("turn %d answered by %s", turn, res.Candidate.Ref())
		}
		for _, k := range sc.keys() {
			if strings.HasPrefix(k, "openai/") {
				primaryCalls++
			}
		}
		h.clk.Advance(2 * time.Minute) // the profile's own short cooldown expires between turns
	}
	if primaryCalls != 3 {
		t.Fatalf("primary calls in 3 turns: %d", primaryCalls)
	}
	ms := h.state(t, ModelKey("openai/gpt-4o"))
	if ms.CooldownReason != classify.ReasonConsecutiveTimeout || ms.Consecutive != 3 {
		t.Fatalf("R7: model not marked: %+v", ms)
	}
	// Mark happened at the third turn; rewind to just after it (its A3 cooldown
	// is 5 s): the next turn skips the primary.
	h.clk.Set(ms.LastFailure.Add(2 * time.Second))
	sc := newScript(h.clk, ok("fallback"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) {
		t.Fatalf("R7: calls %v, want no call to the primary", got)
	}
	if res.Attempts[0].Skipped != classify.ReasonConsecutiveTimeout {
		t.Fatalf("skip reason %q", res.Attempts[0].Skipped)
	}
	// Once the probe is due (throttle open, expiry within the probe window) the primary is probed.
	due := ms.CooldownUntil
	if ps := h.state(t, "openai:a"); ps.CooldownUntil.After(due) {
		due = ps.CooldownUntil
	}
	h.clk.Set(due.Add(-time.Second))
	sc = newScript(h.clk, ok("primary is back"))
	res, err = h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidate.Ref() != "openai/gpt-4o" || res.Attempts[0].Kind != AttemptProbe {
		t.Fatalf("R11 probe: %+v", res.Attempts)
	}
	if ms := h.state(t, ModelKey("openai/gpt-4o")); ms.Consecutive != 0 || !ms.CooldownUntil.IsZero() {
		t.Fatalf("R7: success did not reset: %+v", ms)
	}
}

// covers R8: the stall storm. Every candidate stalls; the run ends after at most 5 paid calls.
func TestRun_R8_StallStorm(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen", "openai/gpt-4o-mini")
	sc := newScript(h.clk, idle())
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	if !errors.Is(err, ErrBreakerTripped) {
		t.Fatalf("Stop = %v", se.Stop)
	}
	if n := sc.count(); n > 5 {
		t.Fatalf("R8: %d paid calls in a stall storm", n)
	}
	if msg := se.UserMessage(nil); msg != "the run was stopped: 5 stalled responses in a row (idle-timeout breaker)" {
		t.Fatalf("message %q", msg)
	}
}

// covers R8: completed progress resets the breaker; non-idle failures leave it.
func TestRun_R8_ProgressResetsBreaker(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.MaxPaidAttemptsPerTurn = 0
	h.e.Policy.BreakerTrip = 2
	req := baseReq("ollama/a", "ollama/b", "ollama/c", "ollama/d")
	progressIdle := step{out: Output{Progress: true}, err: &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true}}
	sc := newScript(h.clk, ok("x")).
		on("ollama/a", idle(), progressIdle). // 1, then reset to 0 (progress)
		on("ollama/b", idle(), idle())        // 1, 2 -> trip
	_, err := h.e.Run(bg, req, sc.fn)
	if !errors.Is(err, ErrBreakerTripped) {
		t.Fatalf("err %v calls %v", err, sc.keys())
	}
	if n := sc.count(); n != 4 {
		t.Fatalf("calls %v, want 4 (progress reset the breaker once)", sc.keys())
	}
}

// covers R9.
func TestRun_R9_IterationCap(t *testing.T) {
	mk := func(n int) *Request {
		ps := make([]Profile, n)
		for i := range ps {
			ps[i] = Profile{ID: "p:" + string(rune('a'+i)), Provider: "p"}
		}
		return &Request{Chain: []ModelRef{"p/m"}, Profiles: map[string][]Profile{"p": ps}}
	}
	for _, tc := range []struct{ n, want int }{{0, 32}, {1, 32}, {3, 48}, {17, 160}, {25, 160}} {
		if got := iterationCap(mk(tc.n)); got != tc.want {
			t.Fatalf("profiles %d: cap %d, want %d", tc.n, got, tc.want)
		}
	}
	// A loop that would never end is cut: unlimited budgets, endless empty answers.
	h := newHarness(t)
	h.e.Policy.MaxPaidAttemptsPerTurn = 0
	h.e.Policy.EmptyOutputRetries = 1 << 30
	sc := newScript(h.clk, step{out: Output{FinishReason: "stop"}})
	_, err := h.e.Run(bg, baseReq("ollama/a"), sc.fn)
	if !errors.Is(err, ErrIterationCap) || sc.count() != 32 {
		t.Fatalf("err %v after %d calls", err, sc.count())
	}
}

// covers R10: per-attempt timeout becomes a timeout failure; per-run timeout stops.
func TestRun_R10_Timeouts(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.AttemptTimeout = 5 * time.Millisecond
	req := baseReq("ollama/slow", "ollama/fast")
	block := func(ctx context.Context, a Attempt) (Output, error) {
		if strings.HasPrefix(a.Candidate.Model, "slow") {
			<-ctx.Done()
			return Output{}, ctx.Err()
		}
		return Output{Text: "fast", Progress: true}, nil
	}
	res, err := h.e.Run(bg, req, block)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Attempts[0].Failure; f == nil || f.Reason != classify.ReasonTimeout || res.Output.Text != "fast" {
		t.Fatalf("attempt timeout: %+v", res.Attempts)
	}
	h.e.Policy.AttemptTimeout = time.Hour
	h.e.Policy.RunTimeout = 5 * time.Millisecond
	_, err = h.e.Run(bg, baseReq("ollama/slow2"), block)
	if !errors.Is(err, ErrRunTimeout) {
		t.Fatalf("run timeout: %v", err)
	}
	// The caller's cancellation is an abort, not a chain failure.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = h.e.Run(ctx, baseReq("ollama/slow3"), block)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
}

// covers R13: empty output gets one nudged retry.
func TestRun_R13_EmptyOutputNudge(t *testing.T) {
	h := newHarness(t)
	req := baseReq("ollama/a", "ollama/b")
	empty := step{out: Output{FinishReason: "stop"}}
	sc := newScript(h.clk, ok("x")).on("ollama/a", empty)
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Model != "a" || res.Attempts[1].Kind != AttemptNudged {
		t.Fatalf("res %+v err %v", res.Attempts, err)
	}
	sc = newScript(h.clk, ok("x")).on("ollama/a", empty, empty)
	res, err = h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Model != "b" || sc.count() != 3 {
		t.Fatalf("two empties: calls %v err %v", sc.keys(), err)
	}
}

// covers R14: stop reasons normalised before any decision, by the client
// (classify.Finish, the one list of them) before the engine sees the answer.
func TestRun_R14_StopReasons(t *testing.T) {
	tests := []struct {
		fr       string
		answered string // model that answers; "" = terminal error
		norm     string
	}{
		{"stop", "a", "stop"}, {"end_turn", "a", "stop"}, {"max_tokens", "a", "length"}, {"length", "a", "length"},
		{"tool_calls", "a", "tool_calls"}, {"tool_use", "a", "tool_calls"}, {"function_call", "a", "function_call"},
		{"error", "b", ""}, {"aborted", "b", ""}, {"weird_reason", "b", ""}, {"content_filter", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.fr, func(t *testing.T) {
			h := newHarness(t)
			sc := newScript(h.clk, ok("fine")).on("ollama/a", clientOutput(Output{Text: "t", FinishReason: tc.fr, Progress: true}))
			res, err := h.e.Run(bg, baseReq("ollama/a", "ollama/b"), sc.fn)
			if tc.answered == "" {
				var f *Failure
				if !errors.As(err, &f) || f.Reason != classify.ReasonContentFilter {
					t.Fatalf("want content_filter failure, got %v", err)
				}
				return
			}
			if err != nil || res.Candidate.Model != tc.answered {
				t.Fatalf("answered by %q err %v", res.Candidate.Model, err)
			}
			if tc.norm != "" && res.Output.FinishReason != tc.norm {
				t.Fatalf("finish %q, want %q", res.Output.FinishReason, tc.norm)
			}
		})
	}
}

// covers C8, B7: context_overflow goes back to the caller unless a later candidate
// has a larger window; B7 skips candidates too small for the prompt.
func TestRun_C8_B7_ContextOverflow(t *testing.T) {
	h := newHarness(t)
	req := baseReq("ollama/small", "ollama/big")
	sc := newScript(h.clk, ok("x")).on("ollama/small", failR(classify.ReasonContextOverflow))
	_, err := h.e.Run(bg, req, sc.fn)
	var f *Failure
	if !errors.As(err, &f) || f.Reason != classify.ReasonContextOverflow || sc.count() != 1 {
		t.Fatalf("C8: err %v calls %v", err, sc.keys())
	}
	req.ContextWindow = map[ModelRef]int{"ollama/small": 8000, "ollama/big": 128000}
	sc = newScript(h.clk, ok("x")).on("ollama/small", failR(classify.ReasonContextOverflow))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Model != "big" {
		t.Fatalf("B7 fallback: %v %v", err, sc.keys())
	}
	req.PromptTokens = 20000
	sc = newScript(h.clk, ok("x"))
	res, err = h.e.Run(bg, req, sc.fn)
	if err != nil || res.Attempts[0].Skipped != classify.ReasonContextWindow || sc.count() != 1 {
		t.Fatalf("B7 skip: %+v %v", res.Attempts, err)
	}
}

// covers P1: explicit order; else token before api_key, least recently used first;
// cooling profiles last, soonest expiry first; expired profiles skipped.
func TestRun_P1_RotationOrder(t *testing.T) {
	profs := []Profile{
		{ID: "openai:k1", Provider: "openai", Type: ProfileAPIKey},
		{ID: "openai:k2", Provider: "openai", Type: ProfileAPIKey},
		{ID: "openai:tok", Provider: "openai", Type: ProfileToken},
		{ID: "openai:old", Provider: "openai", Type: ProfileToken, ExpiresAt: t0.Add(-time.Hour)},
	}
	tests := []struct {
		name  string
		order []string
		setup func(h *harness)
		want  []string
	}{
		{"token first then LRU", nil, func(h *harness) {
			h.put(t, "openai:k1", func(s *ProfileState) { s.LastUsed = t0.Add(-time.Minute) })
			h.put(t, "openai:k2", func(s *ProfileState) { s.LastUsed = t0.Add(-time.Hour) })
		}, []string{"openai:tok", "openai:k2", "openai:k1"}},
		{"explicit order wins", []string{"openai:k1", "openai:tok", "openai:k2"}, nil, []string{"openai:k1", "openai:tok", "openai:k2"}},
		{"cooldown last, soonest first", nil, func(h *harness) {
			h.put(t, "openai:tok", func(s *ProfileState) { s.CooldownUntil = t0.Add(10 * time.Minute) })
			h.put(t, "openai:k1", func(s *ProfileState) { s.DisabledUntil = t0.Add(5 * time.Minute) })
		}, []string{"openai:k2", "openai:k1", "openai:tok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			req := &Request{Chain: []ModelRef{"openai/m"}, Profiles: map[string][]Profile{"openai": profs}}
			if tc.order != nil {
				req.Order = map[string][]string{"openai": tc.order}
			}
			got, _, _ := profilesFor(req, "openai", t0)
			slots := make([]slot, len(got))
			for i, p := range got {
				st := h.state(t, p.ID)
				u, why := blockedUntil(&st, "openai/m", t0)
				slots[i] = slot{prof: p, st: st, until: u, why: why}
			}
			orderSlots(slots, tc.order != nil, "")
			var ids []string
			for _, s := range slots {
				ids = append(ids, s.prof.ID)
			}
			if !eqStrings(ids, tc.want) {
				t.Fatalf("order %v, want %v", ids, tc.want)
			}
		})
	}
	// Round robin through Run: successive successes use the least recently used profile.
	h := newHarness(t)
	req := baseReq("openai/gpt-4o")
	var used []string
	for i := 0; i < 4; i++ {
		sc := newScript(h.clk, ok("x"))
		res, err := h.e.Run(bg, req, sc.fn)
		if err != nil {
			t.Fatal(err)
		}
		used = append(used, res.Candidate.Profile)
		h.clk.Advance(time.Second)
	}
	if !eqStrings(used, []string{"openai:a", "openai:b", "openai:a", "openai:b"}) {
		t.Fatalf("P1 round robin: %v", used)
	}
}

// covers P2, P3: an automatic pin is a preference; a user pin is strict.
func TestRun_P2_P3_Pinning(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.PinnedProfile = "openai:b"
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o@openai:b", failR(classify.ReasonRateLimit))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:b", "openai/gpt-4o@openai:a"}) {
		t.Fatalf("P3 preference: calls %v", got)
	}
	// Once the pinned profile recovers it is preferred again.
	h.clk.Advance(10 * time.Minute)
	sc = newScript(h.clk, ok("x"))
	if res, err = h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Profile != "openai:b" {
		t.Fatalf("P2: pinned profile not preferred after recovery: %v %v", res.Candidate, err)
	}
	// User pin: strict, no rotation; the next model answers.
	req.PinnedProfile = ""
	req.UserProfile = "openai:a"
	h.clk.Advance(10 * time.Minute)
	sc = newScript(h.clk, ok("x")).on("openai/gpt-4o@openai:a", failR(classify.ReasonRateLimit))
	res, err = h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "anthropic/claude@anthropic:main"}) {
		t.Fatalf("P3 strict: calls %v", got)
	}
}

// covers R11: skip vs probe per candidate.
func TestRun_R11_SkipOrProbe(t *testing.T) {
	one := func(r Request) Request { r.Profiles["openai"] = r.Profiles["openai"][:1]; return r }
	t.Run("far cooldown skipped", func(t *testing.T) {
		h := newHarness(t)
		h.put(t, "openai:a", func(s *ProfileState) {
			s.CooldownUntil, s.CooldownReason = t0.Add(10*time.Minute), classify.ReasonRateLimit
		})
		sc := newScript(h.clk, ok("x"))
		res, err := h.e.Run(bg, one(baseReq("openai/gpt-4o", "anthropic/claude")), sc.fn)
		if err != nil || sc.count() != 1 || res.Attempts[0].Skipped != classify.ReasonRateLimit {
			t.Fatalf("calls %v attempts %+v", sc.keys(), res.Attempts)
		}
	})
	t.Run("near expiry probed once per interval", func(t *testing.T) {
		h := newHarness(t)
		h.put(t, "openai:a", func(s *ProfileState) {
			s.CooldownUntil, s.CooldownReason = t0.Add(90*time.Second), classify.ReasonOverloaded
		})
		sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonOverloaded))
		res, err := h.e.Run(bg, one(baseReq("openai/gpt-4o", "anthropic/claude")), sc.fn)
		if err != nil || res.Attempts[0].Kind != AttemptProbe || sc.count() != 2 {
			t.Fatalf("calls %v attempts %+v", sc.keys(), res.Attempts)
		}
		h.clk.Advance(10 * time.Second)
		sc = newScript(h.clk, ok("x"))
		if _, err := h.e.Run(bg, one(baseReq("openai/gpt-4o", "anthropic/claude")), sc.fn); err != nil || sc.count() != 1 {
			t.Fatalf("probe throttle: calls %v", sc.keys())
		}
	})
	t.Run("persistent auth skips the provider", func(t *testing.T) {
		h := newHarness(t)
		h.put(t, "openai:a", func(s *ProfileState) {
			s.DisabledUntil, s.DisabledReason = t0.Add(30*time.Minute), classify.ReasonAuthPermanent
		})
		sc := newScript(h.clk, ok("x"))
		res, err := h.e.Run(bg, one(baseReq("openai/gpt-4o", "openai/gpt-4o-mini", "anthropic/claude")), sc.fn)
		if err != nil || sc.count() != 1 || res.Attempts[0].Skipped != classify.ReasonAuthPermanent || res.Attempts[1].Skipped != classify.ReasonAuthPermanent {
			t.Fatalf("calls %v attempts %+v", sc.keys(), res.Attempts)
		}
	})
	t.Run("billing-disabled primary probed at a throttled rate", func(t *testing.T) {
		h := newHarness(t)
		h.put(t, "openai:a", func(s *ProfileState) {
			s.DisabledUntil, s.DisabledReason = t0.Add(5*time.Hour), classify.ReasonBilling
		})
		req := one(baseReq("openai/gpt-4o", "anthropic/claude"))
		sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonBilling))
		res, err := h.e.Run(bg, req, sc.fn)
		if err != nil || res.Attempts[0].Kind != AttemptProbe {
			t.Fatalf("first run: %+v", res.Attempts)
		}
		h.clk.Advance(time.Minute)
		sc = newScript(h.clk, ok("x"))
		if res, err = h.e.Run(bg, req, sc.fn); err != nil || sc.count() != 1 || res.Attempts[0].Skipped != classify.ReasonBilling {
			t.Fatalf("second run inside the billing probe interval: %v", sc.keys())
		}
		// A billing-disabled non-primary is skipped.
		req2 := one(baseReq("anthropic/claude", "openai/gpt-4o"))
		h.clk.Advance(time.Hour)
		sc = newScript(h.clk, failR(classify.ReasonOverloaded))
		_, _ = h.e.Run(bg, req2, sc.fn)
		for _, k := range sc.keys() {
			if strings.HasPrefix(k, "openai/") {
				t.Fatalf("billing-disabled non-primary called: %v", sc.keys())
			}
		}
	})
	t.Run("sibling model tried after a transient cooldown, once per provider", func(t *testing.T) {
		h := newHarness(t)
		req := one(baseReq("openai/gpt-4o", "openai/gpt-4o-mini", "openai/gpt-4.1", "anthropic/claude"))
		sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonOverloaded)).on("openai/gpt-4o-mini", failR(classify.ReasonOverloaded))
		res, err := h.e.Run(bg, req, sc.fn)
		want := []string{"openai/gpt-4o@openai:a", "openai/gpt-4o-mini@openai:a", "anthropic/claude@anthropic:main"}
		if err != nil || !eqStrings(sc.keys(), want) {
			t.Fatalf("calls %v, want %v", sc.keys(), want)
		}
		if res.Attempts[1].Kind != AttemptProbe || res.Attempts[2].Skipped == "" {
			t.Fatalf("attempts %+v", res.Attempts)
		}
	})
}

// covers R12: a non-primary that failed auth is skipped for the session until the TTL.
func TestRun_R12_AuthSkipCache(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.FallbackSkipTTL = time.Minute
	req := baseReq("ollama/a", "anthropic/claude", "ollama/c")
	sc := newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonTimeout)).on("anthropic/claude", failR(classify.ReasonAuth))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(40 * time.Second) // anthropic's own cooldown (30s) is over, the TTL is not
	// A final failure of the primary (format, C9) ends the run before any
	// fallback: the skipped fallback is not called, and its skip is kept.
	sc = newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonFormat))
	if _, err := h.e.Run(bg, req, sc.fn); err == nil || !eqStrings(sc.keys(), []string{"ollama/a"}) {
		t.Fatalf("format on the primary: calls %v, err %v; want one call and an error", sc.keys(), err)
	}
	sc = newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Attempts[1].Skipped != classify.ReasonAuth || res.Candidate.Model != "c" {
		t.Fatalf("R12: attempts %+v err %v", res.Attempts, err)
	}
	// Another session is not affected.
	req.SessionKey = "other"
	sc = newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound))
	if res, err = h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Model != "claude" {
		t.Fatalf("R12 is per session: %v", sc.keys())
	}
	// After the TTL the candidate is tried again.
	req.SessionKey = "console:test"
	h.clk.Advance(time.Minute)
	sc = newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound))
	if res, err = h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Model != "claude" {
		t.Fatalf("R12 TTL: %v", sc.keys())
	}
	// The primary is never skipped.
	req2 := baseReq("anthropic/claude", "ollama/a")
	h.clk.Advance(time.Hour)
	sc = newScript(h.clk, ok("x")).on("anthropic/claude", failR(classify.ReasonAuth))
	_, _ = h.e.Run(bg, req2, sc.fn)
	h.clk.Advance(40 * time.Second)
	sc = newScript(h.clk, ok("x"))
	if res, err = h.e.Run(bg, req2, sc.fn); err != nil || res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("R12: primary skipped: %v", sc.keys())
	}
}

// covers O2, O3: hooks run in order; the rollback hook gets the failed candidate;
// a BeforeFallback error aborts the run.
func TestRun_O2_O3_HooksInOrder(t *testing.T) {
	h := newHarness(t)
	req := baseReq("ollama/a", "ollama/b", "ollama/c")
	var events []string
	ctl := &hooks{}
	req.Control = ctl
	ctl.beforeFallback = func(ctx context.Context, from, to Candidate, cause Failure) error {
		events = append(events, "before "+from.Ref()+"->"+to.Ref()+" "+string(cause.Reason))
		return nil
	}
	ctl.afterFailedFallback = func(ctx context.Context, c Candidate, f Failure) {
		events = append(events, "after "+c.Ref()+" "+string(f.Reason))
	}
	req.Trace.OnAttempt = func(r AttemptRecord) { events = append(events, "attempt "+r.Candidate.Ref()) }
	sc := newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound)).on("ollama/b", failR(classify.ReasonModelNotFound))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"attempt ollama/a",
		"before ollama/a->ollama/b model_not_found", "attempt ollama/b", "after ollama/b model_not_found",
		"before ollama/a->ollama/c model_not_found", "attempt ollama/c",
	}
	if !eqStrings(events, want) {
		t.Fatalf("events\n%v\nwant\n%v", events, want)
	}
	boom := errors.New("session store down")
	ctl.beforeFallback = func(context.Context, Candidate, Candidate, Failure) error { return boom }
	sc = newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound))
	if _, err := h.e.Run(bg, req, sc.fn); !errors.Is(err, boom) || sc.count() != 1 {
		t.Fatalf("O2: err %v calls %v", err, sc.keys())
	}
}

// covers B1: paid-call budget and cost budget, checked before every paid call.
func TestRun_B1_TurnBudget(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/a", "anthropic/b", "ollama/c", "ollama/d", "ollama/e", "ollama/f", "ollama/g", "ollama/h", "ollama/i", "ollama/j")
	sc := newScript(h.clk, failR(classify.ReasonModelNotFound))
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	if !errors.Is(err, ErrTurnBudget) || sc.count() != 8 {
		t.Fatalf("calls %d err %v", sc.count(), err)
	}
	if msg := se.UserMessage(time.UTC); msg != "turn budget of 8 paid calls reached; no further call was made" {
		t.Fatalf("message %q", msg)
	}
	h.e.Policy.MaxTurnCostUSD = 0.01
	req.Prices = map[ModelRef]Price{"ollama/c": {InPerMTok: 10000}}
	costly := step{out: Output{InputTokens: 2}, err: &Failure{Reason: classify.ReasonModelNotFound}}
	sc = newScript(h.clk, failR(classify.ReasonModelNotFound)).on("ollama/c", costly)
	_, err = h.e.Run(bg, req, sc.fn)
	se = mustSummary(t, err)
	if !errors.Is(err, ErrTurnBudget) || sc.count() != 3 || !strings.Contains(se.UserMessage(nil), "cost budget") {
		t.Fatalf("cost cap: calls %d err %v msg %q", sc.count(), err, se.UserMessage(nil))
	}
}

// covers B2: the process-wide guard, sliding minute.
func TestRun_B2_PaidCallGuard(t *testing.T) {
	h := newHarness(t)
	h.e.Guard = NewGuard(3, h.clk)
	req := baseReq("ollama/a", "ollama/b")
	sc := newScript(h.clk, ok("x"))
	for i := 0; i < 3; i++ {
		if _, err := h.e.Run(bg, req, sc.fn); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.e.Run(bg, req, sc.fn)
	if !errors.Is(err, ErrPaidCallGuard) || sc.count() != 3 {
		t.Fatalf("err %v calls %d", err, sc.count())
	}
	h.clk.Advance(61 * time.Second)
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
}

func TestGuard_B2_Concurrent(t *testing.T) {
	h := newHarness(t)
	g := NewGuard(50, h.clk)
	var allowed int
	done := make(chan bool, 200)
	for i := 0; i < 200; i++ {
		go func() { done <- g.Allow() }()
	}
	for i := 0; i < 200; i++ {
		if <-done {
			allowed++
		}
	}
	if allowed != 50 {
		t.Fatalf("allowed %d of 200 with a limit of 50", allowed)
	}
	var nilGuard *Guard
	if !nilGuard.Allow() || !NewGuard(0, nil).Allow() {
		t.Fatal("nil or unlimited guard refused")
	}
}

// covers B2 (issue 37): the guard's memory follows the calls made in the
// minute, not the limit: a limit of a million held 23 MiB from the start, in
// every process, whether or not a call was ever made; and it still slides.
func TestGuard_B2_MemoryFollowsTheCalls(t *testing.T) {
	h := newHarness(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g := NewGuard(1_000_000, h.clk)
	for range 1000 {
		if !g.Allow() {
			t.Fatal("refused under the limit")
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<10 {
		t.Errorf("a guard of a million calls per minute and 1,000 calls allocated %d KiB, want it to follow the calls", grew>>10)
	}
	small := NewGuard(2, h.clk)
	for i := range 10 {
		allowed := small.Allow()
		if want := i%3 != 2; allowed != want { // two per minute, then the minute slides
			t.Fatalf("call %d allowed %v, want %v", i, allowed, want)
		}
		if i%3 == 2 {
			h.clk.Advance(time.Minute)
		}
	}
}

// covers O3: a budget stop after BeforeFallback still rolls back the fallback once.
func TestRun_O3_RollbackOnStop(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.MaxPaidAttemptsPerTurn = 2
	req := baseReq("ollama/a", "ollama/b")
	var events []string
	req.Control = &hooks{
		beforeFallback: func(ctx context.Context, from, to Candidate, cause Failure) error {
			events = append(events, "before "+to.Ref())
			return nil
		},
		afterFailedFallback: func(ctx context.Context, c Candidate, f Failure) {
			events = append(events, "after "+c.Ref()+" "+string(f.Reason))
		},
	}
	empty := step{out: Output{FinishReason: "stop"}}
	sc := newScript(h.clk, ok("x")).on("ollama/a", failR(classify.ReasonModelNotFound)).on("ollama/b", empty)
	_, err := h.e.Run(bg, req, sc.fn)
	if !errors.Is(err, ErrTurnBudget) {
		t.Fatalf("err %v", err)
	}
	if !eqStrings(events, []string{"before ollama/b", "after ollama/b empty_response"}) {
		t.Fatalf("events %v", events)
	}
}

// covers R7 inside one run: a stalling primary with two keys is called three
// times (key 1, its idle retry, key 2); the third consecutive transient failure
// marks it unavailable and the run switches at once instead of retrying key 2.
func TestRun_R7_SwitchWithinRun(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	if len(req.Profiles["openai"]) < 2 {
		t.Fatalf("harness needs two openai profiles, has %d", len(req.Profiles["openai"]))
	}
	sc := newScript(h.clk, ok("fallback")).on("openai/gpt-4o", idle(), idle(), idle(), idle())
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	primary := 0
	for _, k := range sc.keys() {
		if strings.HasPrefix(k, "openai/") {
			primary++
		}
	}
	// E1: a stall earns one more attempt on the provider (its next key), then
	// the next model; the model's consecutive count (R7) goes on across turns.
	if primary != 2 || res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("calls %v answered by %s, want 2 primary calls then the fallback", sc.keys(), res.Candidate.Ref())
	}
}

// covers O6: a live-switch error naming a later candidate jumps straight to it,
// skipping the candidates between; one naming a model outside the rest of the
// chain ends the run with that error, so the caller restarts on the user's model.
func TestRun_O6_LiveSwitchJumps(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/llama")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", step{err: &LiveSwitchError{To: "ollama/llama"}})
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidate.Ref() != "ollama/llama" {
		t.Fatalf("answered by %s, want the named later candidate", res.Candidate.Ref())
	}
	for _, k := range sc.keys() {
		if strings.HasPrefix(k, "anthropic/") {
			t.Fatalf("calls %v: the candidate between was called", sc.keys())
		}
	}
	if st := h.state(t, "openai:a"); !st.CooldownUntil.IsZero() || st.ErrorCount != 0 {
		t.Fatalf("a live switch is not a failure: %+v", st)
	}

	sc = newScript(h.clk, ok("answer")).on("openai/gpt-4o", step{err: &LiveSwitchError{To: "mistral/large"}})
	_, err = h.e.Run(bg, req, sc.fn)
	var ls *LiveSwitchError
	if !errors.As(err, &ls) || ls.To != "mistral/large" || sc.count() != 1 {
		t.Fatalf("err %v after %d calls, want the live switch surfaced after 1 call", err, sc.count())
	}
}

// covers R15: a timeout on a prompt above 65% of the candidate's context window
// asks the caller to compact and retries the same candidate with the smaller
// prompt, a bounded number of times; below the ratio nothing is compacted.
func TestRun_R15_TimeoutCompactsLargePrompt(t *testing.T) {
	timeout := step{err: &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Message: "attempt timeout"}}
	for _, tc := range []struct {
		name          string
		prompt        int
		shrink        int // tokens each compaction drops
		primaryFails  int
		wantCompacts  int
		wantAnswerRef string
	}{
		{"large prompt compacts and the same model answers", 7000, 3000, 1, 1, "openai/gpt-4o"},
		{"bounded: two compactions, then the chain goes on", 9500, 100, 10, 2, "anthropic/claude"},
		{"one compaction below the ratio is enough", 9500, 5000, 10, 1, "anthropic/claude"},
		{"small prompt is not compacted", 5000, 1000, 10, 0, "anthropic/claude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.e.Policy.TimeoutSwitchThreshold = 0 // isolate R15 from R7
			req := baseReq("openai/gpt-4o", "anthropic/claude")
			req.Profiles["openai"] = req.Profiles["openai"][:1]
			req.ContextWindow = map[ModelRef]int{"openai/gpt-4o": 10000}
			req.PromptTokens = tc.prompt
			compacts := 0
			req.Control = &hooks{compact: func(context.Context, Failure) (Compaction, bool) {
				compacts++
				return Compaction{PromptTokens: tc.prompt - tc.shrink*compacts}, true
			}}
			steps := make([]step, tc.primaryFails)
			for i := range steps {
				steps[i] = timeout
			}
			sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", steps...)
			res, err := h.e.Run(bg, req, sc.fn)
			if err != nil {
				t.Fatalf("%v after %v", err, sc.keys())
			}
			if compacts != tc.wantCompacts || res.Candidate.Ref() != tc.wantAnswerRef {
				t.Fatalf("compactions %d (want %d), answered by %s (want %s); calls %v",
					compacts, tc.wantCompacts, res.Candidate.Ref(), tc.wantAnswerRef, sc.keys())
			}
		})
	}
}

// covers C13: a format failure that names nothing of the request moves once to
// the next candidate of another provider (skipping the same provider's sibling,
// which would refuse it the same way), as a paid call of the turn (B1); a
// second such failure surfaces as itself (C9).
func TestRun_C13_FormatSafetyNet(t *testing.T) {
	vague := fail(Failure{Reason: classify.ReasonFormat, Class: classify.ClassDeterministic, NotRequestFault: true, Message: "Bad Request"})
	t.Run("moves to another provider once", func(t *testing.T) {
		h := newHarness(t)
		req := baseReq("openai/gpt-4o", "openai/gpt-4o-mini", "anthropic/claude")
		sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", vague)
		res, err := h.e.Run(bg, req, sc.fn)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"openai/gpt-4o@openai:a", "anthropic/claude@anthropic:main"}
		if got := sc.keys(); !eqStrings(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
		if !res.FellBack || res.Cause == nil || res.Cause.Reason != classify.ReasonFormat || res.Output.Text != "answer" {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("a second vague format surfaces", func(t *testing.T) {
		h := newHarness(t)
		req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen")
		sc := newScript(h.clk, vague)
		_, err := h.e.Run(bg, req, sc.fn)
		var f *Failure
		if !errors.As(err, &f) || f.Reason != classify.ReasonFormat || f.Provider != "anthropic" {
			t.Fatalf("err %v", err)
		}
		if n := sc.count(); n != 2 {
			t.Fatalf("%d calls, want 2", n)
		}
	})
	t.Run("counted in the turn budget", func(t *testing.T) {
		h := newHarness(t)
		h.e.Policy.MaxPaidAttemptsPerTurn = 1
		req := baseReq("openai/gpt-4o", "anthropic/claude")
		sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", vague)
		_, err := h.e.Run(bg, req, sc.fn)
		if !errors.Is(err, ErrTurnBudget) || sc.count() != 1 {
			t.Fatalf("err %v after %d calls, want the turn budget after 1", err, sc.count())
		}
	})
	t.Run("a format failure about the request still surfaces", func(t *testing.T) {
		h := newHarness(t)
		req := baseReq("openai/gpt-4o", "anthropic/claude")
		sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonFormat, Message: "messages: roles must alternate"}))
		_, err := h.e.Run(bg, req, sc.fn)
		var f *Failure
		if !errors.As(err, &f) || f.Reason != classify.ReasonFormat || sc.count() != 1 {
			t.Fatalf("err %v after %d calls", err, sc.count())
		}
	})
}
