package discord

import (
	"context"
	"strings"
	"testing"

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
	defer a.transport.CloseIdleConnections()
	ctx := context.Background()
	out := adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "hello there"}
	for b.Loop() {
		if err := a.Send(ctx, out); err != nil {
			b.Fatal(err)
		}
	}
}
