package discord_test

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// covers H4, T5 (issue 37: Discord bot or webhook messages by a refused user
// are given as thread context): with access.users set, the earlier messages
// of a thread and of a reply chain leave out what a refused person wrote,
// what another bot posted in answer to their command, and what came through
// a webhook, whose poster Discord does not name; an allowed person's words,
// a bot's answer to an allowed person and a bot's own post are kept.
func TestE2E_H4_DiscordBotAndWebhookMessagesOfRefusedPeopleAreLeftOut(t *testing.T) {
	t.Parallel()
	e := newE2E(t, e2eOpts{spec: func(s *e2e.Spec) {
		s.ExtraYAML = "access: {users: [\"discord:U1\", \"discord:U2\"]}\n"
	}})
	e.fake.AddThread("G1", "T0", "T1")
	for _, m := range []fakediscord.Msg{
		{AuthorID: "U2", Content: "KEEP-allowed person"},
		{AuthorID: "U9", Content: "LEAVE-refused person"},
		{AuthorID: "B7", AuthorName: "helper", Bot: true, InteractionUser: "U9", Content: "LEAVE-bot answering the refused person"},
		{AuthorID: "W5", AuthorName: "hook", Bot: true, WebhookID: "W5", Content: "LEAVE-webhook post"},
		{AuthorID: "B7", AuthorName: "helper", Bot: true, InteractionUser: "U2", Content: "KEEP-bot answering the allowed person"},
		{AuthorID: "B8", AuthorName: "ci", Bot: true, Content: "KEEP-a bot's own post"},
	} {
		m.GuildID, m.ChannelID = "G1", "T1"
		e.fake.SendMessage(m)
	}
	e.fake.SendMention("G1", "T1", "U1", "what happened?")
	e.posts("T1", 1)
	e.Drain()
	p := e.LastPrompt("alpha")
	for _, want := range []string{"KEEP-allowed person", "KEEP-bot answering the allowed person", "KEEP-a bot's own post"} {
		if !strings.Contains(p, want) {
			t.Errorf("H1: the thread's prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "LEAVE-") {
		t.Errorf("H4: a refused person's message, or one posted for them, reached the model:\n%s", p)
	}

	// A reply chain: through a webhook's post and a bot's answer to a refused
	// person, up to an allowed person's message.
	a := e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U2", Content: "KEEP-chain start"})
	b := e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "W5", AuthorName: "hook", Bot: true, WebhookID: "W5",
		Content: "LEAVE-chain webhook", ReplyTo: a})
	c := e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "B7", AuthorName: "helper", Bot: true, InteractionUser: "U9",
		Content: "LEAVE-chain bot for the refused", ReplyTo: b})
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U1", ReplyTo: c,
		Content: "<@" + fakediscord.DefaultBotID + "> explain?", MentionBot: true})
	e.posts("C2", 1)
	e.Drain()
	p = e.LastPrompt("alpha")
	if !strings.Contains(p, "KEEP-chain start") || strings.Contains(p, "LEAVE-") {
		t.Errorf("H4: the reply chain's prompt:\n%s", p)
	}
}
