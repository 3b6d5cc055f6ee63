package opsserver

import (
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/sessions"
)

// BenchmarkObserveTurn is what the metrics add to a turn that fell back once:
// two attempts, one step, one finished turn.
func BenchmarkObserveTurn(b *testing.B) {
	m := NewMetrics(nil, Names{}, nil)
	fail := failover.AttemptRecord{Candidate: failover.Candidate{Provider: "openai", Model: "gpt-4o-mini", Profile: "openai:main"},
		Failure: &failover.Failure{Reason: classify.ReasonRateLimit}, Duration: 300 * time.Millisecond}
	ok := failover.AttemptRecord{Candidate: failover.Candidate{Provider: "anthropic", Model: "claude-haiku-4-5", Profile: "anthropic:main"},
		Duration: time.Second}
	rep := sessions.TurnReport{Channel: "slack", Outcome: sessions.OutcomeFallback, Duration: 1400 * time.Millisecond, LLMTime: 1300 * time.Millisecond}
	for b.Loop() {
		m.Attempt(fail)
		m.Attempt(ok)
		m.Fallback("openai/gpt-4o-mini", "anthropic/claude-haiku-4-5", classify.ReasonRateLimit, 429)
		m.TurnDone(rep)
	}
}
