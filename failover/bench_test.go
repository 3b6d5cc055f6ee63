package failover

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/detourbot/detour/classify"

	"github.com/detourbot/detour/failover/failovertest"
)

// BenchmarkRun: a 3-candidate fallback run (model_not_found, model_not_found,
// success) over a fake attempt function and MemStore; reports ns per attempt.
func BenchmarkRun(b *testing.B) {
	clk := failovertest.NewClock(t0)
	e := &Engine{Store: NewMemStore(), Clock: clk, Policy: DefaultPolicy(),
		Rand: func() float64 { return 0.5 }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen")
	nf := &Failure{Reason: classify.ReasonModelNotFound, Class: classify.ClassDeterministic, Status: 404}
	attempt := func(ctx context.Context, a Attempt) (Output, error) {
		if a.Candidate.Provider != "ollama" {
			return Output{}, nf
		}
		return Output{Text: "ok", Progress: true, FinishReason: "stop"}, nil
	}
	ctx := context.Background()
	b.ReportAllocs()
	attempts := 0
	for b.Loop() {
		res, err := e.Run(ctx, req, attempt)
		if err != nil {
			b.Fatal(err)
		}
		attempts += len(res.Attempts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(attempts), "ns/attempt")
}
