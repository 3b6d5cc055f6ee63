package discord_test

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// refusedText is part of the one short refusal of T5.
const refusedText = "not open to you here"

// covers T5 through Discord: with access.channels naming one channel, the
// threads of that channel are allowed too: the thread the bot opens for a
// question (channels.discord.threads) is answered there and the conversation
// continues in it without a mention, and so is a thread people made (learnt from
// a lookup when the bot is first mentioned there). A thread of another channel
// is refused, and no refused message costs a model call.
func TestE2E_T5_ThreadsOfAnAllowedChannel(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 0, e2eOpts{
		adapter: func(c *discord.Config) { c.Threads = true },
		spec:    func(s *e2e.Spec) { s.ExtraYAML = "access: {channels: [\"discord:G1:C1\"]}\n" },
	})
	q := e.fake.SendMention("G1", "C1", "U1", "how do I bake bread?")
	e.waitFor("the answer in the new thread", func() bool { return len(e.fake.Latest(q)) == 1 })
	starts := e.fake.ThreadStarts()
	if len(starts) != 1 || starts[0].ParentID != "C1" {
		t.Fatalf("threads started = %+v", starts)
	}
	thread := starts[0].ThreadID
	if m := e.fake.Latest(thread)[0]; strings.Contains(m.Content, refusedText) || !strings.Contains(m.Content, "you said: how do I bake bread?") {
		t.Fatalf("the question in the thread the bot opened got %q", m.Content)
	}
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: thread, AuthorID: "U1", Content: "and rye?"})
	e.waitFor("the second answer", func() bool { return len(e.fake.Latest(thread)) == 2 })
	if m := e.fake.Latest(thread)[1]; !strings.Contains(m.Content, "you said: and rye?") {
		t.Errorf("second answer in the thread = %q", m.Content)
	}

	// A thread people made under the allowed channel, and one under another.
	e.fake.AddThread("G1", "C1", "T7")
	e.fake.AddThread("G1", "C2", "T8")
	e.fake.SendMention("G1", "T7", "U1", "in a thread of mine")
	e.waitFor("the answer in T7", func() bool { return len(e.fake.Latest("T7")) == 1 })
	if m := e.fake.Latest("T7")[0]; !strings.Contains(m.Content, "you said: in a thread of mine") {
		t.Errorf("answer in T7 = %q", m.Content)
	}
	calls := len(e.llm.Calls())
	e.fake.SendMention("G1", "T8", "U1", "in a thread elsewhere")
	e.waitFor("the refusal in T8", func() bool { return len(e.fake.Latest("T8")) == 1 })
	if m := e.fake.Latest("T8")[0]; !strings.Contains(m.Content, refusedText) {
		t.Errorf("a thread of another channel got %q, want the refusal", m.Content)
	}
	e.Drain()
	if n := len(e.llm.Calls()) - calls; n != 0 {
		t.Errorf("%d model calls for a refused message", n)
	}
}
