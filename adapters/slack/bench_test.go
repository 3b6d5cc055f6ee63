package slack

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
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

// BenchmarkMentionToInbox: fake Slack pushes an app_mention over Socket Mode; time
// until the Inbound reaches the inbox (parse, ack, de-dupe, map).
func BenchmarkMentionToInbox(b *testing.B) {
	h := start(b, nil)
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
