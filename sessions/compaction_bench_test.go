//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// BenchmarkCompaction_R16: a conversation of 2,000-character messages past
// an 8,000-token window, against a provider that takes 0.3 s a call, one
// message after the answer to the one before; it reports the time from a
// message to its answer and the paid calls per turn, with summaries and
// without compaction (no window). covers R16
func BenchmarkCompaction_R16(b *testing.B) {
	for _, window := range []int{0, 8000} {
		name := "no-compaction"
		if window > 0 {
			name = "summaries"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				h := newHarnessTB(b, testdb.SQLite, func(c *Config, h *harness) {
					c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: window}}
					c.Summary, c.SummaryMaxTokens = true, 400
					h.logLevel = 0
				})
				h.fake.Script(fakeprovider.Rule{Delay: 300 * time.Millisecond})
				const turns = 40
				var wait time.Duration
				b.ResetTimer()
				for i := range turns {
					text := fmt.Sprintf("turn %d: %s", i, strings.Repeat("word ", 400))
					start := time.Now()
					h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, User: "test:u1", Text: text, ReplyTo: "r"})
					for !answered(h.rec) {
						time.Sleep(time.Millisecond)
					}
					wait += time.Since(start)
				}
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_ = h.r.Drain(ctx)
				cancel()
				b.ReportMetric(float64(wait.Milliseconds())/turns, "ms/turn")
				b.ReportMetric(float64(len(h.fake.Calls()))/turns, "calls/turn")
			}
		})
	}
}

// answered takes what rec holds and reports whether it ends with a reply.
func answered(rec *recorder) bool {
	out := rec.take()
	return len(out) > 0 && out[len(out)-1].Kind == adapters.KindReply
}

// BenchmarkCompactionCalls_R16: 1,000 turns of 2,000-character messages, or
// of about 200 tokens, in one conversation at a window of 8,000 or 32,000
// tokens; it reports the paid calls per answered turn. covers R16
func BenchmarkCompactionCalls_R16(b *testing.B) {
	for _, window := range []int{8000, 32000} {
		for _, size := range []int{2000, 500} {
			b.Run(fmt.Sprintf("window-%d/message-%d", window, size), func(b *testing.B) {
				for range b.N {
					h := newHarnessTB(b, testdb.SQLite, func(c *Config, h *harness) {
						c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: window}}
						c.Summary, c.SummaryMaxTokens = true, 400
						h.logLevel = 0
					})
					const turns = 1000
					for i := range turns {
						text := fmt.Sprintf("turn %d: %s", i, strings.Repeat("word ", size/5))
						h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, User: "test:u1", Text: text[:size], ReplyTo: "r"})
						for !answered(h.rec) {
							time.Sleep(100 * time.Microsecond)
						}
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					_ = h.r.Drain(ctx)
					cancel()
					b.ReportMetric(float64(len(h.fake.Calls()))/turns, "calls/turn")
				}
			})
		}
	}
}
