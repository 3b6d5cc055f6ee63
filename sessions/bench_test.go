//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// BenchmarkTurnOverhead measures one turn through the router beyond the LLM call:
// queue, session load, history, chain, engine run with the SQLite state store,
// the exchange stored in one transaction, notices and reply. The LLM is an
// in-process fake that answers at once.
// The event-ids variant gives every message an event id, as Slack, Discord and
// the console's ids do (M3, M7: one more write per turn, the answer's delivery).
// The postgres-state variant needs DETOUR_TEST_POSTGRES_DSN.
func BenchmarkTurnOverhead(b *testing.B) {
	b.Run("sqlite-state", func(b *testing.B) { benchTurns(b, newBenchHarness(b, testdb.SQLite), false) })
	b.Run("sqlite-state-event-ids", func(b *testing.B) { benchTurns(b, newBenchHarness(b, testdb.SQLite), true) })
	b.Run("mem-state", func(b *testing.B) {
		h := newBenchHarness(b, testdb.SQLite)
		h.engine.Store = failover.NewMemStore() // router + turn only; engine state in memory
		benchTurns(b, h, false)
	})
	b.Run("postgres-state", func(b *testing.B) { benchTurns(b, newBenchHarness(b, testdb.Postgres), false) })
}

func benchTurns(b *testing.B, h *harness, eventIDs bool) {
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		in := adapters.Inbound{Channel: "test", SessionKey: fmt.Sprintf("test:bench:%d", i%1000), Text: "hello there"}
		if eventIDs {
			in.EventID = fmt.Sprintf("test:ev:%d", i)
		}
		h.r.Handle(ctx, in)
		if err := h.r.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs/turn")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs/turn")
	h.rec.take()
}

// BenchmarkIdleSessionMemory creates b.N sessions (one turn each, then idle) and
// reports the Go heap kept per idle session.
func BenchmarkIdleSessionMemory(b *testing.B) {
	h := newBenchHarness(b, testdb.SQLite)
	b.ResetTimer()
	b.ReportMetric(idleBytes(b, h, b.N, 0), "B/idle-session")
}
