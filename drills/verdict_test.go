package drills

import (
	"strings"
	"testing"
	"time"
)

var testBudgets = Budgets{MaxPaidPerTurn: 8, MaxPaidPerMinute: 120, BreakerTrip: 5, TimeoutSwitchThreshold: 3, IdleTimeout: 200 * time.Millisecond}

// calls builds n calls of step to ref, one second apart from start.
func calls(step int, ref, profile string, n int, start time.Duration) []Call {
	p, m := splitRef(ref)
	out := make([]Call, n)
	for i := range out {
		out[i] = Call{Step: step, Provider: p, Model: m, Profile: profile, At: start + time.Duration(i)*time.Second}
	}
	return out
}

func reply(model string) []Answer {
	return []Answer{{Session: "drill:s001", Kind: "reply", Model: model, Text: "ok", After: 10 * time.Millisecond}}
}

func fail(text string) []Answer {
	return []Answer{{Session: "drill:s001", Kind: "error", Text: text, After: 10 * time.Millisecond}}
}

// report assembles a report from per-step answers and calls.
func report(name string, steps [][]Answer, cs ...[]Call) Report {
	r := Report{Scenario: name, Primary: "a/p", Fallbacks: []string{"b/f1", "b/f2"}, Profiles: map[string]int{"a": 2, "b": 1}, Notices: "all"}
	for i, as := range steps {
		r.Turns = append(r.Turns, Turn{Step: i + 1, Sessions: len(as), Answers: as})
	}
	for _, c := range cs {
		r.Calls = append(r.Calls, c...)
	}
	for _, c := range r.Calls {
		r.Turns[c.Step-1].Calls++
	}
	return r
}

func failedChecks(v Verdict) []string {
	var out []string
	for _, c := range v.Checks {
		if !c.Pass {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return out
}

// TestJudge is the verdict table: a pure function of report and budgets.
func TestJudge(t *testing.T) {
	stalled := "stopped: the model kept stalling without answering, so no further paid call was made"
	many := func(n, sessions int, spread time.Duration) Report {
		r := report("many-sessions", [][]Answer{nil})
		r.Turns[0].Sessions = sessions
		for i := 0; i < sessions; i++ {
			r.Turns[0].Answers = append(r.Turns[0].Answers, Answer{Session: sessionKey(i + 1), Kind: "error", Text: "too many paid calls"})
		}
		for i := 0; i < n; i++ {
			r.Calls = append(r.Calls, Call{Step: 1, Provider: "a", Model: "p", At: spread * time.Duration(i) / time.Duration(max(n, 1))})
		}
		r.Turns[0].Calls = n
		return r
	}
	stealth := func(step2Primary int) Report {
		return report("stealth-billing",
			[][]Answer{reply("b/f1"), reply("b/f1"), reply("b/f1"), reply("b/f1")},
			calls(1, "a/p", "a:k1", 3, 0), calls(1, "b/f1", "b:k", 1, 5*time.Second),
			calls(2, "a/p", "a:k1", step2Primary, 10*time.Second), calls(2, "b/f1", "b:k", 1, 11*time.Second),
			calls(3, "b/f1", "b:k", 1, 12*time.Second),
			calls(4, "a/p", "a:k1", 1, 400*time.Second), calls(4, "b/f1", "b:k", 1, 401*time.Second))
	}
	tests := []struct {
		name    string
		r       Report
		b       Budgets
		pass    bool
		failing string // a substring of a failing check's name
	}{
		// covers R8: the breaker stops a stall storm at breaker_trip calls, and the user is told why.
		{"stall-storm R8 at the breaker", report("stall-storm", [][]Answer{fail(stalled)}, calls(1, "a/p", "a:k1", 5, 0)), testBudgets, true, ""},
		{"stall-storm R8 one call too many", report("stall-storm", [][]Answer{fail(stalled)}, calls(1, "a/p", "a:k1", 6, 0)), testBudgets, false, "breaker_trip"},
		{"stall-storm silent error", report("stall-storm", [][]Answer{fail("something went wrong")}, calls(1, "a/p", "a:k1", 2, 0)), testBudgets, false, "told why"},
		{"stall-storm no answer", report("stall-storm", [][]Answer{{{Session: "drill:s001", Kind: "none"}}}, calls(1, "a/p", "a:k1", 2, 0)), testBudgets, false, "reply or an error"},
		// covers R7, S3
		{"stealth-billing R7 switch and S3 probe", stealth(0), testBudgets, true, ""},
		{"stealth-billing primary called before the probe", stealth(1), testBudgets, false, "before the probe"},
		{"stealth-billing threshold 2", stealth(0), Budgets{MaxPaidPerTurn: 8, TimeoutSwitchThreshold: 2}, false, "consecutive timeouts"},
		// covers B6
		{"long-reset-429 B6", report("long-reset-429", [][]Answer{reply("b/f1"), reply("b/f1"), reply("b/f1"), reply("a/p")},
			calls(1, "a/p", "a:k1", 2, 0), calls(1, "b/f1", "b:k", 1, time.Second), calls(2, "b/f1", "b:k", 1, 2*time.Second),
			calls(3, "b/f1", "b:k", 1, 24*time.Hour), calls(4, "a/p", "a:k1", 1, 49*time.Hour)), testBudgets, false, "N2"},
		{"long-reset-429 primary called before reset", report("long-reset-429", [][]Answer{reply("b/f1"), reply("b/f1"), reply("b/f1"), reply("a/p")},
			calls(1, "a/p", "a:k1", 2, 0), calls(3, "a/p", "a:k1", 1, 24*time.Hour)), testBudgets, false, "still not called"},
		// covers B2
		{"many-sessions B2 at the cap", many(120, 200, 2*time.Second), testBudgets, true, ""},
		{"many-sessions B2 over the cap", many(121, 200, 2*time.Second), testBudgets, false, "per_minute"},
		{"many-sessions B2 spread over two minutes", many(200, 200, 2*time.Minute), testBudgets, false, "per_minute"},
		{"many-sessions B2 no cap configured", many(10, 200, time.Second), Budgets{MaxPaidPerTurn: 8}, false, "within max_paid_attempts_per_minute"},
		// covers B1
		{"no-fault", report("no-fault", [][]Answer{reply("a/p")}, calls(1, "a/p", "a:k1", 1, 0)), testBudgets, true, ""},
		{"no-fault answered by a fallback", report("no-fault", [][]Answer{reply("b/f1")}, calls(1, "b/f1", "b:k", 1, 0)), testBudgets, false, "answered by the primary"},
		{"B1 per-turn cap", report("a500", [][]Answer{reply("b/f1")}, calls(1, "a/p", "a:k1", 2, 0), calls(1, "b/f1", "b:k", 7, 0)), testBudgets, false, "per turn"},
		{"all-down V4 report", func() Report {
			r := report("all-down", [][]Answer{fail("all models failed"), fail("all models failed")}, calls(1, "a/p", "a:k1", 3, 0))
			r.Turns[0].Reports = []string{"⚠️ a/p ... b/f1 ... b/f2"}
			return r
		}(), testBudgets, true, ""},
		{"all-down report misses a model", func() Report {
			r := report("all-down", [][]Answer{fail("all models failed"), fail("all models failed")}, calls(1, "a/p", "a:k1", 3, 0))
			r.Turns[0].Reports = []string{"⚠️ a/p ... b/f1"}
			return r
		}(), testBudgets, false, "V4"},
		{"all-down second report", func() Report {
			r := report("all-down", [][]Answer{fail("x"), fail("y")}, calls(1, "a/p", "a:k1", 3, 0))
			r.Turns[0].Reports = []string{"a/p b/f1 b/f2"}
			r.Turns[1].Reports = []string{"a/p b/f1 b/f2"}
			return r
		}(), testBudgets, false, "same incident"},
		{"cost cap", func() Report {
			r := report("no-fault", [][]Answer{reply("a/p")}, calls(1, "a/p", "a:k1", 1, 0))
			r.Priced, r.Turns[0].CostUSD = true, 0.02
			return r
		}(), Budgets{MaxPaidPerTurn: 8, MaxTurnCostUSD: 0.01}, false, "max_turn_cost_usd"},
		{"drill error", func() Report {
			r := report("no-fault", [][]Answer{reply("a/p")}, calls(1, "a/p", "a:k1", 1, 0))
			r.Err = "step 1 did not finish"
			return r
		}(), testBudgets, false, "the drill ran"},
		{"missing step", report("flapping-primary", [][]Answer{reply("b/f1")}, calls(1, "a/p", "a:k1", 1, 0)), testBudgets, false, "step 2"},
		{"auth-revoked, same-provider chain must tell why", func() Report {
			r := report("auth-revoked", [][]Answer{reply("a/other"), reply("a/other")}, calls(1, "a/p", "a:k1", 1, 0))
			r.Fallbacks = []string{"a/other"}
			return r
		}(), testBudgets, false, "another provider"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			v1 := Judge(&r, tc.b)
			v2 := Judge(&r, tc.b)
			if v1.Pass != v2.Pass || len(v1.Checks) != len(v2.Checks) {
				t.Fatal("Judge is not deterministic")
			}
			if v1.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v; failing: %q", v1.Pass, tc.pass, failedChecks(v1))
			}
			if tc.failing != "" {
				found := false
				for _, f := range failedChecks(v1) {
					found = found || strings.Contains(f, tc.failing)
				}
				if !found {
					t.Errorf("no failing check mentions %q: %q", tc.failing, failedChecks(v1))
				}
			}
		})
	}
}

func TestReport_MaxPerMinute(t *testing.T) {
	r := Report{}
	for _, s := range []int{0, 10, 59, 60, 61, 200} {
		r.Calls = append(r.Calls, Call{At: time.Duration(s) * time.Second})
	}
	if got := r.MaxPerMinute(); got != 4 { // 10, 59, 60, 61
		t.Errorf("MaxPerMinute = %d, want 4", got)
	}
	if (&Report{}).MaxPerMinute() != 0 {
		t.Error("empty report")
	}
}
