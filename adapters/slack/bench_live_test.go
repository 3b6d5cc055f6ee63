package slack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
)

// BenchmarkStream_L2_2000TokenAnswer streams a 2,000-token answer (4 characters
// a token, 8,000 in all) the way a fast model writes it, a token every 2 ms
// (about 4 s), into one reply on
// the wall clock, and reports the Slack calls it took and the busiest method's
// calls per minute. The strict fake answers 429 past any method's tier limit;
// the benchmark fails if it does.
func BenchmarkStream_L2_2000TokenAnswer(b *testing.B) {
	h := startWith(b, nil, func(c *Config) { c.Now, c.Sleep = time.Now, nil })
	h.srv.Now = time.Now
	const tokens = 2000
	var appends, updates, starts int
	var seconds float64
	for i := 0; b.Loop(); i++ {
		before := len(h.srv.CallLog())
		in := threadIn(fmt.Sprintf("C%d", i), "1.000001", "U1")
		ctx := context.Background()
		s, err := h.a.StartStream(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		var text strings.Builder
		for t := range tokens {
			fmt.Fprintf(&text, "%03d ", t%1000)
			_ = s.Update(ctx, text.String())
			time.Sleep(2 * time.Millisecond) // the model's pace
		}
		final := adapters.Outbound{Kind: adapters.KindReply, Channel: Name, ReplyTo: in.ReplyTo, Text: text.String()}
		if err := s.Finish(ctx, final); err != nil {
			b.Fatal(err)
		}
		seconds += time.Since(began).Seconds()
		for _, c := range h.srv.CallLog()[before:] {
			switch c.Method {
			case "chat.appendStream":
				appends++
			case "chat.update":
				updates++
			case "chat.startStream":
				starts++
			}
		}
	}
	if th := h.srv.Throttles(); len(th) > 0 {
		b.Fatalf("Slack refused %d calls, first %+v", len(th), th[0])
	}
	n := float64(b.N)
	b.ReportMetric(float64(appends)/n, "appends/op")
	b.ReportMetric(float64(updates)/n, "updates/op")
	b.ReportMetric(float64(starts)/n, "starts/op")
	b.ReportMetric(float64(appends)/seconds*60, "appends/min")
}
