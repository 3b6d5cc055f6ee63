package discord

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

func benchText() string {
	var b strings.Builder
	b.WriteString("Intro paragraph. " + strings.Repeat("Some prose words here. ", 40) + "\n```go\n")
	for b.Len() < 10_000 {
		b.WriteString("	fmt.Println(\"a line of code in a long answer\")\n")
	}
	b.WriteString("```\nThe end.")
	return b.String()
}

func BenchmarkSplitMessage10KB(b *testing.B) {
	s := benchText()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if len(adapters.Split(s, MaxMessageLen, textLen)) < 5 {
			b.Fatal("too few chunks")
		}
	}
}

func BenchmarkCompleteModel(b *testing.B) {
	var models, profiles []string
	for _, p := range []string{"openai", "anthropic", "openrouter", "groq"} {
		for _, m := range []string{"small", "medium", "large", "xl", "mini"} {
			models = append(models, p+"/"+m)
		}
		profiles = append(profiles, p+":main", p+":backup")
	}
	for b.Loop() {
		if len(completeModel(models, profiles, "open")) == 0 {
			b.Fatal("no choices")
		}
	}
}

// BenchmarkSendReply posts one short reply through discordgo to the local fake.
func BenchmarkSendReply(b *testing.B) {
	fake := fakediscord.New()
	fake.EchoOwnMessages = false
	fake.Start()
	defer fake.Close()
	a, err := New(Config{Token: "t", APIURL: fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer a.link.Close()
	ctx := context.Background()
	out := adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "hello there"}
	for b.Loop() {
		if err := a.Send(ctx, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream_UpdateToVisible is the adapter's share of the first-token
// latency (L2): from a stream's first Update to the fake Discord holding the
// message, through the stream's goroutine, discordgo and the rate-limit
// transport on 127.0.0.1.
func BenchmarkStream_UpdateToVisible(b *testing.B) {
	fake := fakediscord.New()
	fake.EchoOwnMessages = false
	fake.Start()
	defer fake.Close()
	a, err := New(Config{Token: "t", APIURL: fake.URL(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, make(chan adapters.Inbound, 1)) }()
	defer func() { cancel(); <-done }()
	if err := fake.WaitConnected(5*time.Second, 1, 0); err != nil {
		b.Fatal(err)
	}
	in := adapters.Inbound{SessionKey: "discord:G1:C1", ReplyTo: "C1"}
	var total time.Duration
	n := 0
	for b.Loop() {
		st, err := a.StartStream(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := st.Update(ctx, "first words"); err != nil {
			b.Fatal(err)
		}
		n++
		msgs, err := fake.WaitMessages(5*time.Second, n, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += msgs[n-1].At.Sub(t0)
		if err := st.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, Text: "first words"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n)/1000, "update-to-visible-ms")
}
