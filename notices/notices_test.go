package notices

import (
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// covers N1, N2
func TestTexts_N1_N2_Exact(t *testing.T) {
	if got, want := Fallback("anthropic/claude-haiku-4-5", "openai/gpt-4o-mini", classify.ReasonBilling, 402),
		"↪️ model fallback: anthropic/claude-haiku-4-5 (selected openai/gpt-4o-mini; out of credits)"; got != want {
		t.Fatalf("N1 text = %q, want %q", got, want)
	}
	// A 5xx is a server error in people's words, never a timeout (issue 13).
	if got, want := Fallback("anthropic/claude-haiku-4-5", "openai/gpt-4o-mini", classify.ReasonTimeout, 503),
		"↪️ model fallback: anthropic/claude-haiku-4-5 (selected openai/gpt-4o-mini; server error (HTTP 503))"; got != want {
		t.Fatalf("N1 text = %q, want %q", got, want)
	}
	if got, want := Cleared("openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"),
		"↪️ model fallback cleared: openai/gpt-4o-mini (was anthropic/claude-haiku-4-5)"; got != want {
		t.Fatalf("N2 text = %q, want %q", got, want)
	}
}

// covers N3: the announce decision is a pure function of (persisted state, new state).
func TestDecide_N3_OncePerStateChange(t *testing.T) {
	const p, f1, f2 = "openai/a", "anthropic/b", "ollama/c"
	on := func(sel, act string, r classify.Reason) State { return State{Selected: sel, Active: act, Reason: r} }
	cases := []struct {
		name       string
		prev, next State
		want       string
	}{
		{"fresh session on primary", State{}, on(p, p, ""), ""},
		{"primary stays", on(p, p, ""), on(p, p, ""), ""},
		{"move to fallback", on(p, p, ""), on(p, f1, classify.ReasonBilling), Fallback(f1, p, classify.ReasonBilling, 0)},
		{"first turn ever falls back", State{}, on(p, f1, classify.ReasonRateLimit), Fallback(f1, p, classify.ReasonRateLimit, 0)},
		{"stay on fallback", on(p, f1, classify.ReasonBilling), on(p, f1, classify.ReasonBilling), ""},
		{"stay on fallback, other reason", on(p, f1, classify.ReasonBilling), on(p, f1, classify.ReasonTimeout), ""},
		{"move to second fallback", on(p, f1, classify.ReasonBilling), on(p, f2, classify.ReasonTimeout), Fallback(f2, p, classify.ReasonTimeout, 0)},
		{"return to primary", on(p, f1, classify.ReasonBilling), on(p, p, ""), Cleared(p, f1)},
		{"user picks the fallback model itself", on(p, f1, classify.ReasonBilling), on(f1, f1, ""), ""},
		{"user picks another model", on(p, f1, classify.ReasonBilling), on(f2, f2, ""), Cleared(f2, f1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ForChange(c.prev, c.next); got != c.want {
				t.Fatalf("Decide = %q, want %q", got, c.want)
			}
			// Pure: the same input gives the same answer again.
			if again := ForChange(c.prev, c.next); again != c.want {
				t.Fatalf("not pure: %q then %q", c.want, again)
			}
		})
	}
}

// covers B4
func TestDeliver_B4_Audience(t *testing.T) {
	cases := []struct {
		aud    string
		direct bool
		want   bool
	}{
		{"all", false, true}, {"all", true, true}, {"", false, true},
		{"direct_only", false, false}, {"direct_only", true, true},
		{"off", true, false}, {"off", false, false},
	}
	for _, c := range cases {
		if got := Deliver(c.aud, c.direct); got != c.want {
			t.Errorf("Deliver(%q, %v) = %v, want %v", c.aud, c.direct, got, c.want)
		}
	}
}

func summary(now time.Time) *failover.SummaryError {
	return &failover.SummaryError{
		Attempts: []failover.AttemptRecord{
			{Candidate: failover.Candidate{Provider: "openai", Model: "gpt-4o-mini", Profile: "openai:main"}, Started: now,
				Failure: &failover.Failure{Reason: classify.ReasonRateLimit, Status: 429, Message: "Rate limit reached for sk-CANARY-123456789", RetryAfter: 5 * time.Minute}},
			{Candidate: failover.Candidate{Provider: "anthropic", Model: "claude-haiku-4-5", Profile: "anthropic:main"}, Started: now,
				Failure: &failover.Failure{Reason: classify.ReasonBilling, Status: 400, Message: "Your credit balance is too low"}},
		},
		EarliestRetry: now.Add(5 * time.Minute),
		At:            now,
		Until:         map[failover.ModelRef]time.Time{"openai/gpt-4o-mini": now.Add(5 * time.Minute)},
	}
}

// covers V3
func TestUserFailure_V3(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	got := UserFailure(summary(now), now)
	for _, want := range []string{"openai/gpt-4o-mini (rate limit)", "anthropic/claude-haiku-4-5 (out of credits)", "earliest retry 14:05 UTC"} {
		if !strings.Contains(got, want) {
			t.Errorf("UserFailure = %q, missing %q", got, want)
		}
	}
	allRL := &failover.SummaryError{Attempts: []failover.AttemptRecord{
		{Candidate: failover.Candidate{Provider: "a", Model: "x"}, Failure: &failover.Failure{Reason: classify.ReasonRateLimit}},
		{Candidate: failover.Candidate{Provider: "b", Model: "y"}, Failure: &failover.Failure{Reason: classify.ReasonRateLimit}},
	}, EarliestRetry: now.Add(5 * time.Minute)}
	if got := UserFailure(allRL, now); got != "all models failed with rate limit: a/x, b/y; earliest retry 14:05 UTC (in 5 min)" {
		t.Errorf("all rate limited: %q", got)
	}
	single := &failover.SummaryError{Attempts: []failover.AttemptRecord{
		{Candidate: failover.Candidate{Provider: "a", Model: "x"}, Failure: &failover.Failure{Reason: classify.ReasonModelNotFound, Message: "no such model"}},
	}}
	if got := UserFailure(single, now); got != "a/x failed: model not found — no such model; please try again later" {
		t.Errorf("single: %q", got)
	}
	breaker := &failover.SummaryError{Stop: failover.ErrBreakerTripped}
	if got := UserFailure(breaker, now); !strings.Contains(got, "no further paid call") {
		t.Errorf("breaker: %q", got)
	}
	if strings.Contains(UserFailure(summary(now), now), "CANARY") {
		t.Fatal("secret leaked into the user message")
	}
	if UserFailure(nil, now) == "" {
		t.Fatal("nil summary gives empty text")
	}
}

// covers V4
func TestAdminReport_V4(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	lines := LinesFromSummary(summary(now))
	if len(lines) != 2 {
		t.Fatalf("lines = %d, want one per model", len(lines))
	}
	got := AdminReport(lines, "console:default", now)
	for _, want := range []string{
		"openai/gpt-4o-mini — provider openai, profile openai:main, rate limit: HTTP 429 Rate limit reached for [redacted] — recovery: estimated 14:05 UTC",
		"anthropic/claude-haiku-4-5 — provider anthropic, profile anthropic:main, out of credits: HTTP 400 Your credit balance is too low — recovery: unknown, needs a human — do: top up or raise the spending limit, then /recover anthropic/claude-haiku-4-5",
		"earliest expected recovery: 14:05 UTC",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report missing %q\n%s", want, got)
		}
	}
	// The report's times are the engine's (the user's message reads the same
	// ones): a provider's stated time already in the past never shows (V3, V4).
	past := summary(now)
	past.Attempts[0].Failure.RecoveryAt = now.Add(-time.Minute)
	past.Until = map[failover.ModelRef]time.Time{"openai/gpt-4o-mini": now.Add(-time.Second), "anthropic/claude-haiku-4-5": now.Add(5 * time.Hour)}
	r := AdminReport(LinesFromSummary(past), "s", now)
	if strings.Contains(r, "13:59") || !strings.Contains(r, "unknown, needs a human (next automatic try 19:00 UTC") {
		t.Errorf("report with a past provider time:\n%s", r)
	}
	if strings.Contains(got, "CANARY") {
		t.Fatal("secret in report")
	}
	if n := strings.Count(got, "\n• ") + strings.Count(got[:2], "• "); n != 2 {
		t.Errorf("want 2 model lines, got %d:\n%s", n, got)
	}
}

// covers E6: the report says, for a provider that is down, how many checks
// failed and when the next is due; a provider that is not down says nothing.
func TestAdminReport_E6_ChecksAndNextCheck(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	s := summary(now)
	s.Checks = map[string]failover.ProviderCheck{"openai": {Failed: 3, Next: now.Add(30 * time.Second)}}
	got := AdminReport(LinesFromSummary(s), "console:default", now)
	if !strings.Contains(got, "recovery: estimated 14:05 UTC (in 5 min) — checks: 3 failed, next 14:00:30 UTC (in 30 s) — do:") {
		t.Errorf("report lacks openai's checks:\n%s", got)
	}
	if strings.Count(got, "checks:") != 1 {
		t.Errorf("only the provider that is down has checks:\n%s", got)
	}
}

func TestFailureText(t *testing.T) {
	f := &failover.Failure{Reason: classify.ReasonFormat, Provider: "openai", Model: "x", Message: "bad param"}
	if got := FailureText(f); got != "openai/x failed: invalid request — bad param" {
		t.Fatalf("%q", got)
	}
	if got := FailureText(&failover.Failure{Reason: classify.ReasonTimeout, Status: 502, Provider: "openai", Model: "x"}); got != "openai/x failed: server error (HTTP 502)" {
		t.Fatalf("%q", got)
	}
	if got := FailureText(&failover.Failure{Reason: classify.ReasonContextOverflow}); !strings.Contains(got, "/reset") {
		t.Fatalf("R15 text must suggest /reset: %q", got)
	}
}

func TestFormatTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	if got := FormatTime(now.Add(time.Hour), now); got != "15:00 UTC (in 1 h)" {
		t.Fatal(got)
	}
	if got := FormatTime(now.Add(30*time.Second), now); got != "14:00:30 UTC (in 30 s)" {
		t.Fatal(got)
	}
	if got := FormatTime(now.Add(90*time.Second), now); got != "14:01:30 UTC (in 2 min)" {
		t.Fatal(got)
	}
	if got := FormatTime(now.Add(48*time.Hour), now); got != "2026-03-03 14:00 UTC (in 2 days)" {
		t.Fatal(got)
	}
}
