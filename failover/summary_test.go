package failover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// covers V1: every attempt and skip is recorded with candidate, profile, reason,
// status and duration.
func TestRun_V1_AttemptRecords(t *testing.T) {
	h := newHarness(t)
	h.put(t, "anthropic:main", func(s *ProfileState) {
		s.DisabledUntil, s.DisabledReason = t0.Add(time.Hour), classify.ReasonBilling
	})
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	slow := fail(Failure{Reason: classify.ReasonOverloaded, Status: 529, Message: "overloaded"})
	slow.adv = 3 * time.Second
	sc := newScript(h.clk, step{out: Output{Text: "ok", Progress: true}, adv: time.Second}).on("openai/gpt-4o", slow)
	var seen int
	req.Trace.OnAttempt = func(AttemptRecord) { seen++ }
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 3 || seen != 3 {
		t.Fatalf("records %d, hook saw %d", len(res.Attempts), seen)
	}
	a := res.Attempts[0]
	if a.Candidate.Profile != "openai:a" || a.Failure == nil || a.Failure.Status != 529 || a.Duration != 3*time.Second || !a.Started.Equal(t0) {
		t.Fatalf("attempt 0: %+v", a)
	}
	if s := res.Attempts[1]; s.Skipped != classify.ReasonBilling || s.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("skip record: %+v", s)
	}
	if s := res.Attempts[2]; s.Failure != nil || s.Duration != time.Second {
		t.Fatalf("success record: %+v", s)
	}
}

// covers V2, P4: the model_fallback_decision event with flat fields, no secrets.
func TestRun_V2_DecisionLog(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, failR(classify.ReasonOverloaded)).on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, Status: 429, Message: "Rate limit reached for key [redacted]"}))
	if _, err := h.e.Run(bg, req, sc.fn); err == nil {
		t.Fatal("want failure")
	}
	var events []map[string]any
	sc2 := bufio.NewScanner(strings.NewReader(h.log.String()))
	for sc2.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc2.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "model_fallback_decision" {
			events = append(events, m)
		}
	}
	if len(events) != 2 {
		t.Fatalf("events: %v", events)
	}
	step, final := events[0], events[1]
	if step["fallbackStepFromModel"] != "openai/gpt-4o" || step["fallbackStepToModel"] != "anthropic/claude" ||
		step["fallbackStepFromFailureReason"] != "rate_limit" || step["fallbackStepFinalOutcome"] != "next_candidate" ||
		!strings.Contains(step["fallbackStepFromFailureDetail"].(string), "429") || step["sessionKey"] != "console:test" {
		t.Fatalf("step event: %v", step)
	}
	// The final event keeps the primary failure even though the last fallback failed too.
	if final["fallbackStepFromModel"] != "openai/gpt-4o" || final["fallbackStepFromFailureReason"] != "rate_limit" ||
		final["fallbackStepFinalOutcome"] != "exhausted" || final["level"] != "WARN" {
		t.Fatalf("final event: %v", final)
	}
	if strings.Contains(h.log.String(), "sk-") {
		t.Fatal("P4: secret-like text in logs")
	}
}

// covers V3: summary error with every attempt and a model-aware earliest retry.
func TestRun_V3_SummaryAndUserMessage(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("unused")).
		on("openai/gpt-4o", fail(Failure{Reason: classify.ReasonRateLimit, Status: 429, RecoveryAt: t0.Add(5 * time.Minute)})).
		on("anthropic/claude", fail(Failure{Reason: classify.ReasonRateLimit, Status: 429, RecoveryAt: t0.Add(10 * time.Minute)}))
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	if len(se.Attempts) != 2 || !se.EarliestRetry.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("attempts %d earliest %v", len(se.Attempts), se.EarliestRetry)
	}
	if msg := se.UserMessage(time.UTC); msg != "all models are rate-limited; earliest retry 14:05 UTC" {
		t.Fatalf("message %q", msg)
	}
	if e := se.Error(); !strings.Contains(e, "openai/gpt-4o[openai:a]: rate_limit (HTTP 429)") || !strings.Contains(e, "anthropic/claude[anthropic:main]") {
		t.Fatalf("Error() = %q", e)
	}
	if se.Last() == nil || se.Last().Provider != "anthropic" {
		t.Fatalf("Last = %+v", se.Last())
	}
	if errors.Unwrap(se) != nil {
		t.Fatal("no Stop expected")
	}
}

// covers V3: unrelated model-scoped limits are ignored; a matching one reports its
// latest matching expiry.
func TestRun_V3_EarliestRetryModelAware(t *testing.T) {
	h := newHarness(t)
	// Unrelated: anthropic's profile is rate-limited on another model until +2m.
	h.put(t, "anthropic:main", func(s *ProfileState) {
		s.CooldownUntil, s.CooldownReason, s.CooldownModel = t0.Add(2*time.Minute), classify.ReasonRateLimit, "anthropic/other"
	})
	// Matching: openai:a blocks openai/gpt-4o by a model-scoped limit until +40m and
	// a billing disable until +10m: the latest matching expiry is +40m.
	h.put(t, "openai:a", func(s *ProfileState) {
		s.CooldownUntil, s.CooldownReason, s.CooldownModel = t0.Add(40*time.Minute), classify.ReasonRateLimit, "openai/gpt-4o"
		s.DisabledUntil, s.DisabledReason = t0.Add(10*time.Minute), classify.ReasonBilling
	})
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	h.e.Policy.BillingProbeInterval = time.Hour
	h.e.claimProbe(context.Background(), "openai#billing", time.Hour, time.Time{}, t0) // the billing probe was just used
	sc := newScript(h.clk, failR(classify.ReasonModelNotFound))
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	if sc.count() != 1 || se.Attempts[0].Skipped == "" {
		t.Fatalf("calls %v attempts %v", sc.keys(), se)
	}
	if !se.EarliestRetry.Equal(t0.Add(40 * time.Minute)) {
		t.Fatalf("earliest %v, want +40m (not the unrelated +2m, not the earlier +10m)", se.EarliestRetry.Sub(t0))
	}
}

func TestSummaryError_V3_Messages(t *testing.T) {
	at := t0
	tests := []struct {
		se   SummaryError
		want string
	}{
		{SummaryError{Stop: ErrBreakerTripped, Stalls: 5}, "the run was stopped: 5 stalled responses in a row (idle-timeout breaker)"},
		{SummaryError{Stop: ErrTurnBudget, MaxPaidCalls: 8, PaidCalls: 8}, "turn budget of 8 paid calls reached; no further call was made"},
		{SummaryError{Stop: ErrPaidCallGuard}, "the bot reached its limit of paid calls per minute; try again in a minute"},
		{SummaryError{At: at, EarliestRetry: at.Add(26 * time.Hour), Attempts: []AttemptRecord{
			{Candidate: Candidate{Provider: "openai", Model: "x"}, Failure: &Failure{Reason: classify.ReasonBilling}}}},
			"openai/x is out of credits or over a billing limit; earliest retry Nov 30 16:00 UTC"},
		{SummaryError{At: at, Attempts: []AttemptRecord{
			{Candidate: Candidate{Provider: "a", Model: "x"}, Failure: &Failure{Reason: classify.ReasonTimeout}},
			{Candidate: Candidate{Provider: "b", Model: "y"}, Failure: &Failure{Reason: classify.ReasonOverloaded}}}},
			"all models failed (timeout, overloaded); try again later"},
	}
	for _, tc := range tests {
		if got := tc.se.UserMessage(nil); got != tc.want {
			t.Errorf("UserMessage = %q, want %q", got, tc.want)
		}
		if tc.se.Error() == "" {
			t.Error("empty Error()")
		}
	}
	berlin := time.FixedZone("CET", 3600)
	se := SummaryError{At: at, EarliestRetry: at.Add(5 * time.Minute), Attempts: []AttemptRecord{
		{Candidate: Candidate{Provider: "a", Model: "x"}, Skipped: classify.ReasonRateLimit}}}
	if got := se.UserMessage(berlin); got != "a/x is rate-limited; earliest retry 15:05 CET" {
		t.Fatalf("location: %q", got)
	}
	// V3, N5: a moment off the minute is said to the second, never a minute
	// earlier (or later) than it is.
	se.EarliestRetry = at.Add(97*time.Second + 300*time.Millisecond)
	if got := se.UserMessage(nil); got != "a/x is rate-limited; earliest retry 14:01:38 UTC" {
		t.Fatalf("off the minute: %q", got)
	}
}

// covers P4: a canary key in an unredacted provider message never reaches logs,
// state rows, errors or user messages.
func TestRun_P4_NoSecretLeaks(t *testing.T) {
	const canary = "sk-CANARY-0123456789abcdef"
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, fail(Failure{Reason: classify.ReasonAuth, Status: 401, Message: "Incorrect API key provided: " + canary + " Bearer abc.def"}))
	_, err := h.e.Run(bg, req, sc.fn)
	se := mustSummary(t, err)
	for name, s := range map[string]string{
		"log": h.log.String(), "Error": se.Error(), "UserMessage": se.UserMessage(nil),
		"state": h.state(t, "openai:a").LastError,
	} {
		if strings.Contains(s, "CANARY") || strings.Contains(s, "abc.def") {
			t.Fatalf("P4: secret in %s: %s", name, s)
		}
	}
	if !strings.Contains(h.state(t, "openai:a").LastError, "Incorrect API key provided") {
		t.Fatal("LastError lost its useful text")
	}
}
