package discord_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// BenchmarkE2E_L2_FirstTokenToFirstVisibleText measures, through the whole bot
// (gateway, channel worker, router, SQLite, llm client, stream, REST), how long
// after the question the first words are visible in Discord, less the provider's
// wait before its first token (gap). What is left is everything detour adds
// between a question and the provider's first words showing, an upper bound of
// the first token → first visible text overhead (L2: < 50 ms).
func BenchmarkE2E_L2_FirstTokenToFirstVisibleText(b *testing.B) {
	const gap = 100 * time.Millisecond
	e := newE2E(b, e2eOpts{live: true})
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: gap, Reply: "first second"})
	var overheads []time.Duration
	n := 0
	for b.Loop() {
		asked := time.Now()
		e.fake.SendMention("G1", "C1", "U1", "go")
		n++
		var first fakediscord.Message
		if err := fakediscord.WaitFor(wait, func() bool {
			l := e.fake.Latest("C1")
			if len(l) < n {
				return false
			}
			first = l[n-1]
			return true
		}); err != nil {
			b.Fatal(err)
		}
		if first.Versions[0] != "first" {
			b.Fatalf("first visible text %q, want the first token alone", first.Versions[0])
		}
		overheads = append(overheads, first.At.Sub(asked)-gap)
		e.Drain()
	}
	slices.Sort(overheads)
	var sum time.Duration
	for _, d := range overheads {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(overheads))/1000, "mean-overhead-ms")
	b.ReportMetric(float64(overheads[len(overheads)*9/10].Microseconds())/1000, "p90-overhead-ms")
	b.ReportMetric(float64(overheads[len(overheads)-1].Microseconds())/1000, "max-overhead-ms")
	if worst := overheads[len(overheads)-1]; worst >= 50*time.Millisecond {
		b.Errorf("first text showed %v after the provider's first token (upper bound), want < 50 ms", worst)
	}
}

// BenchmarkE2E_L2_EditRate2000Tokens streams a 2,000-token answer (one word per
// token) through the whole bot into a fake whose message routes hold Discord's
// usual buckets (5 requests per 5 s per channel, headers on every answer, a 429
// past them), on real time. It reports the edits, posts and deletes per answer,
// the most edits in any bucket-long window, and the 429s (which must be 0).
// scale=1/10 runs ten times faster with every interval divided by ten (edits at
// most every 100 ms, buckets of 5 per 500 ms); scale=1 is Discord's own pace.
func BenchmarkE2E_L2_EditRate2000Tokens(b *testing.B) {
	for _, sc := range []struct {
		name  string
		every time.Duration // EditEvery
		per   time.Duration // bucket window
		token time.Duration // provider: gap between tokens
	}{
		{"scale=1/10", 100 * time.Millisecond, 500 * time.Millisecond, time.Millisecond},
		{"scale=1", time.Second, 5 * time.Second, 10 * time.Millisecond},
	} {
		b.Run(sc.name, func(b *testing.B) {
			e := newE2E(b, e2eOpts{live: true,
				adapter: func(c *discord.Config) { c.EditEvery, c.Sleep, c.Now = sc.every, adapters.Sleep, time.Now },
				fake: func(f *fakediscord.Server) {
					f.Now = time.Now
					f.Limit("PATCH /channels/{id}/messages/{mid}", 5, sc.per)
					f.Limit("POST /channels/{id}/messages", 5, sc.per)
					f.Limit("DELETE /channels/{id}/messages/{mid}", 5, sc.per)
				}})
			ws := make([]string, 2000)
			for i := range ws {
				ws[i] = fmt.Sprintf("tok%d", i)
				if i%40 == 39 {
					ws[i] += "\n"
				}
			}
			answer := strings.Join(ws, " ")
			e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: sc.token, Reply: answer})
			want := adapters.Split(answer, discord.MaxMessageLen, func(s string) int { return len(s) })
			ch := 0
			var edits, posts, deletes, worst int
			var took time.Duration
			for b.Loop() {
				ch++
				channel := fmt.Sprintf("R%d", ch)
				before := len(e.fake.Edits())
				start := time.Now()
				e.fake.SendMention("G1", channel, "U1", "a long answer please")
				if err := fakediscord.WaitFor(2*time.Minute, func() bool {
					return slices.Equal(contents(e.fake.Latest(channel)), want)
				}); err != nil {
					b.Fatalf("the whole answer: %v", err)
				}
				took += time.Since(start)
				e.Drain()
				var at []time.Time
				for _, ed := range e.fake.Edits()[before:] {
					at = append(at, ed.At)
				}
				edits += len(at)
				worst = max(worst, mostWithin(at, sc.per))
				posts += e.channelPosts(channel)
				for _, d := range e.fake.Deletes() {
					if d.ChannelID == channel {
						deletes++
					}
				}
			}
			n := float64(ch)
			b.ReportMetric(float64(edits)/n, "edits/answer")
			b.ReportMetric(float64(posts)/n, "posts/answer")
			b.ReportMetric(float64(deletes)/n, "deletes/answer")
			b.ReportMetric(float64(worst), "max-edits/window")
			b.ReportMetric(float64(edits)/took.Seconds(), "edits/s")
			b.ReportMetric(float64(e.fake.RateLimited()), "429s")
			if e.fake.RateLimited() != 0 {
				b.Errorf("%d 429s: the edit rate left Discord's bucket", e.fake.RateLimited())
			}
		})
	}
}

// mostWithin is the most times in any window of length d (times in order).
func mostWithin(ts []time.Time, d time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func contents(ms []fakediscord.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}
