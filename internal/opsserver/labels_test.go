package opsserver

import (
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// covers M6: the model and provider labels of every metric take only configured
// names; anything else is counted as "other".
func TestMetrics_M6_OtherForUnconfiguredNames(t *testing.T) {
	m := NewMetrics(nil, Names{Models: []string{"p1/alpha", "p2/beta"}, Providers: []string{"p1", "p2"}}, nil)
	call := func(provider, model string, f *failover.Failure, skipped classify.Reason) {
		m.Attempt(failover.AttemptRecord{Candidate: failover.Candidate{Provider: provider, Model: model}, Duration: time.Millisecond,
			Failure: f, Skipped: skipped})
	}
	call("p1", "alpha", nil, "")
	call("p1", "chosen-by-a-user", nil, "")
	call("p1", "another-one", &failover.Failure{Reason: classify.ReasonTimeout}, "")
	call("p9", "alpha", nil, "")
	call("p2", "typo", nil, classify.ReasonRateLimit)
	m.Fallback("p1/chosen-by-a-user", "p2/beta", classify.ReasonTimeout, 0)
	_, body := fetch(t, serve(t, m, Checks{})+"/metrics")
	for _, want := range []string{
		`detour_llm_calls_total{model="alpha",outcome="ok",provider="p1",status=""} 1`,
		`detour_llm_calls_total{model="other",outcome="ok",provider="p1",status=""} 1`,
		`detour_llm_calls_total{model="other",outcome="timeout",provider="p1",status="none"} 1`,
		`detour_llm_calls_total{model="other",outcome="ok",provider="other",status=""} 1`,
		`detour_llm_call_duration_seconds_count{provider="other"} 1`,
		`detour_candidate_skips_total{model="other",provider="p2",reason="rate_limit"} 1`,
		`detour_fallbacks_total{from="other",reason="timeout",to="p2/beta"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, leaked := range []string{"chosen-by-a-user", "another-one", "p9", "typo"} {
		if strings.Contains(body, leaked) {
			t.Errorf("/metrics carries the unconfigured name %q", leaked)
		}
	}
}
