package slack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

func benchReply() string {
	var b strings.Builder
	for b.Len() < 10_000 {
		b.WriteString("## Section\n\nSome **bold** text with a [link](https://example.com/x?a=1&b=2), `code` and *emphasis*.\n")
		b.WriteString("- item one\n- item ~~two~~\n\n```go\nfunc main() { fmt.Println(\"<hi>\") }\n```\n\n")
	}
	return b.String()
}

func BenchmarkToMrkdwn10KB(b *testing.B) {
	s := benchReply()
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		_ = ToMrkdwn(s)
	}
}

func BenchmarkSplitMessage40KB(b *testing.B) {
	s := strings.Repeat(benchReply(), 4)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		_ = adapters.Split(s, maxChunk, utf8.RuneCountInString)
	}
}

// BenchmarkMentionToInbox: fake Slack pushes an app_mention over Socket Mode, and
// its message.channels twin as Slack does for an app subscribed to channel
// messages; time until the Inbound reaches the inbox (parse, ack, de-dupe, map).
func BenchmarkMentionToInbox(b *testing.B) {
	h := start(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		h.srv.Mention("C1", "U1", "hello", "")
		<-h.inbox
	}
}

// BenchmarkMentionToInbox_MentionsOnly: the same with the mention-only
// subscriptions (slack-manifest-mentions.yaml): one event per mention.
func BenchmarkMentionToInbox_MentionsOnly(b *testing.B) {
	h := startWith(b, func(s *fakeslack.Server) { s.OnlyMentions = true }, func(c *Config) { c.MentionsOnly = true })
	b.ReportAllocs()
	for b.Loop() {
		h.srv.Mention("C1", "U1", "hello", "")
		<-h.inbox
	}
}

// BenchmarkSendReply: one short reply posted with chat.postMessage to the fake.
func BenchmarkSendReply(b *testing.B) {
	h := start(b, nil)
	out := adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1|1.000001", Text: "a **short** answer"}
	b.ReportAllocs()
	for b.Loop() {
		if err := h.a.Send(context.Background(), out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSend_OtherChannelWhileOneCallIsSlow: one chat.postMessage is held by
// Slack for 5 s; each op posts a reply in another channel meanwhile. Posting is
// per channel, so an op costs a normal post, not the slow call's 5 s
// ("max-ms" is the slowest op).
func BenchmarkSend_OtherChannelWhileOneCallIsSlow(b *testing.B) {
	h := start(b, nil)
	h.srv.Slow("CSLOW", 5*time.Second)
	slow := make(chan error, 1)
	go func() {
		slow <- h.a.Send(context.Background(), adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "CSLOW|1.000001", Text: "slow"})
	}()
	if err := h.srv.WaitInFlight("CSLOW", 1, wait); err != nil {
		b.Fatal(err)
	}
	var worst time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		start := time.Now()
		out := adapters.Outbound{Kind: adapters.KindReply, ReplyTo: fmt.Sprintf("C%d|1.000001", i%50), Text: "fast"}
		if err := h.a.Send(context.Background(), out); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
	}
	b.StopTimer()
	if h.srv.InFlight("CSLOW") != 1 {
		b.Fatal("the slow call ended during the benchmark; it proves nothing")
	}
	h.srv.Slow("CSLOW", 0)
	if err := <-slow; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
}
