package discord_test

import (
	"fmt"
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
	// answered waits for the n-th message of ch to be final (answers stream)
	// and returns its text.
	answered := func(ch string, n int) string {
		t.Helper()
		e.waitFor("answer "+fmt.Sprint(n)+" in "+ch, func() bool {
			m := e.fake.Latest(ch)
			return len(m) >= n && (strings.Contains(m[n-1].Content, "you said:") || strings.Contains(m[n-1].Content, refusedText))
		})
		e.Drain()
		return e.fake.Latest(ch)[n-1].Content
	}
	q := e.fake.SendMention("G1", "C1", "U1", "how do I bake bread?")
	answered(q, 1) // a thread has its starter message's id
	starts := e.fake.ThreadStarts()
	if len(starts) != 1 || starts[0].ParentID != "C1" {
		t.Fatalf("threads started = %+v", starts)
	}
	thread := starts[0].ThreadID
	if got := answered(thread, 1); !strings.Contains(got, "you said: how do I bake bread?") {
		t.Fatalf("the question in the thread the bot opened got %q", got)
	}
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: thread, AuthorID: "U1", Content: "and rye?"})
	if got := answered(thread, 2); !strings.Contains(got, "you said: and rye?") {
		t.Errorf("second answer in the thread = %q", got)
	}

	// A thread people made under the allowed channel, and one under another.
	e.fake.AddThread("G1", "C1", "T7")
	e.fake.AddThread("G1", "C2", "T8")
	e.fake.SendMention("G1", "T7", "U1", "in a thread of mine")
	if got := answered("T7", 1); !strings.Contains(got, "you said: in a thread of mine") {
		t.Errorf("answer in T7 = %q", got)
	}
	calls := len(e.llm.Calls())
	e.fake.SendMention("G1", "T8", "U1", "in a thread elsewhere")
	if got := answered("T8", 1); !strings.Contains(got, refusedText) {
		t.Errorf("a thread of another channel got %q, want the refusal", got)
	}
	if n := len(e.llm.Calls()) - calls; n != 0 {
		t.Errorf("%d model calls for a refused message", n)
	}
}
