package discord_test

// End-to-end tests of live replies (SPEC section 11, L1-L4) and threads per
// conversation: the real discordgo client through the adapter, the real router,
// engine, store and llm client, the fake provider streaming slowly, against the
// strict fakediscord.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/sessions"
)

// liveWorld is a world with streamed replies on, edited at most every editEvery.
func liveWorld(t *testing.T, editEvery time.Duration, more ...e2eOpts) *world {
	t.Helper()
	opts := append([]e2eOpts{{live: true, adapter: func(c *discord.Config) { c.EditEvery = editEvery }}}, more...)
	return newE2E(t, opts...)
}

// history is what the store holds for a session, oldest first.
func (e *world) history(key string) []sessions.Message {
	e.t.Helper()
	var msgs []sessions.Message
	if err := e.Sys.DB.Where("session_key = ?", key).Order("id").Find(&msgs).Error; err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

// channelPosts are the POST /channels/{ch}/messages requests the fake accepted.
func (e *world) channelPosts(ch string) int {
	n := 0
	for _, r := range e.fake.Requests() {
		if r.Method == "POST" && r.Path == "/channels/"+ch+"/messages" && r.Status == 200 {
			n++
		}
	}
	return n
}

func sentences(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = "word" + string(rune('a'+i%26))
	}
	return strings.Join(ws, " ")
}

// covers L1: "is typing…" shows within a second of the question, before the
// model's first token (the provider waits 400 ms before each word).
func TestE2E_L1_TypingVisibleBeforeFirstToken(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 50*time.Millisecond)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 400 * time.Millisecond, Reply: "slow but sure"})
	asked := time.Now()
	e.fake.SendMention("G1", "C1", "U1", "take your time")
	e.waitFor("the reply", func() bool { return len(e.fake.Latest("C1")) == 1 })
	e.Drain()
	typing := e.fake.TypingCalls()
	first := e.fake.Latest("C1")[0]
	if len(typing) == 0 || typing[0].ChannelID != "C1" {
		t.Fatalf("no typing indicator in C1: %+v", typing)
	}
	if d := typing[0].At.Sub(asked); d >= time.Second {
		t.Errorf("typing shown %v after the question, want within 1 s", d)
	}
	if !typing[0].At.Before(first.At) || first.At.Sub(typing[0].At) < 300*time.Millisecond {
		t.Errorf("typing at %v, first text at %v: want typing well before the first token", typing[0].At, first.At)
	}
	if first.Content != "slow but sure" {
		t.Errorf("final reply %q", first.Content)
	}
}

// covers L2, T3: the reply is one message that grows by edits (each version
// extends the one before) and ends as the complete answer, posted once, replying
// to the question without pinging anyone; history holds the answer once.
func TestE2E_L2_ReplyGrowsByEditsAndEndsComplete(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 60*time.Millisecond)
	answer := sentences(30) + " @everyone <@123>"
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 25 * time.Millisecond, Reply: answer})
	q := e.fake.SendMention("G1", "C1", "U1", "tell me more")
	e.waitFor("the reply", func() bool { return len(e.fake.Latest("C1")) == 1 })
	e.Drain()
	got := e.fake.Latest("C1")
	if len(got) != 1 || got[0].Content != answer {
		t.Fatalf("latest messages in C1 = %+v, want the answer as one message", got)
	}
	m := got[0]
	if len(m.Versions) < 3 {
		t.Fatalf("the reply did not grow: versions %q", m.Versions)
	}
	for i := 1; i < len(m.Versions); i++ {
		if !strings.HasPrefix(m.Versions[i], m.Versions[i-1]) {
			t.Errorf("version %d %q does not extend %q", i, m.Versions[i], m.Versions[i-1])
		}
	}
	if m.Reference != q || len(m.LiveMentions) != 0 {
		t.Errorf("reference %q (want %q), live mentions %v", m.Reference, q, m.LiveMentions)
	}
	edits := e.fake.Edits()
	for _, ed := range edits {
		if ed.MessageID != m.ID || ed.AllowedMentionsParse == nil || len(*ed.AllowedMentionsParse) != 0 || len(ed.LiveMentions) != 0 {
			t.Errorf("edit %+v: want the reply's, with allowed_mentions empty", ed)
		}
	}
	if len(edits) < 2 || e.channelPosts("C1") != 1 || len(e.fake.Deletes()) != 0 {
		t.Errorf("%d edits, %d posts, %d deletes: want a growing single post", len(edits), e.channelPosts("C1"), len(e.fake.Deletes()))
	}
	if e.fake.RateLimited() != 0 {
		t.Errorf("%d 429s", e.fake.RateLimited())
	}
	if h := e.history("discord:G1:C1"); len(h) != 2 || h[1].Content != answer {
		t.Errorf("history = %+v", h)
	}
}

// covers L3, N4, R8, A5, W1: the primary streams a word and stalls; after the idle
// timeout the fallback answers. The message that showed the primary's words is
// taken down, the fallback notice is its own quiet message, and the fallback's
// answer comes below it (A5: the reader sees the notice, then the answer); no
// message's latest version holds the primary's text, and history holds the
// final answer only.
func TestE2E_L3_StalledPrimaryReplacedInPlaceByFallback(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 30*time.Millisecond, e2eOpts{spec: func(s *e2e.Spec) { s.Idle = 400 * time.Millisecond }})
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeStallAfterFirstChunk, Reply: "PRIMARY-PARTIAL words that never come"})
	e.fake.SendMention("G1", "C1", "U1", "hello")
	e.waitFor("the reply and the notice", func() bool { return len(e.fake.Latest("C1")) == 2 })
	e.Drain()
	latest := e.fake.Latest("C1")
	want := "[" + e2eFallback + "] you said: hello"
	if len(latest) != 2 || !isNotice(latest[0]) || latest[1].Content != want {
		t.Fatalf("C1 shows %q, want the N1 notice, then %q (A5)", contents(latest), want)
	}
	notice := latest[0]
	if !strings.Contains(notice.Content, "model fallback: "+e2eFallback) || strings.Contains(notice.Content, "you said") {
		t.Errorf("notice = %+v, want the N1 notice as its own message", notice)
	}
	said := 0
	for _, m := range e.fake.Messages() {
		if !m.Deleted {
			said += strings.Count(m.Content, "model fallback")
		}
	}
	if said != 1 {
		t.Errorf("the fallback notice is said %d times in C1, want once (W1): %q", said, contents(latest))
	}
	shown := false
	for _, m := range e.fake.Messages() {
		shown = shown || (m.Deleted && strings.HasPrefix(m.Versions[0], "PRIMARY-PARTIAL"))
		if !m.Deleted && strings.Contains(m.Content, "PRIMARY-PARTIAL") {
			t.Errorf("message %s still shows the primary's partial text: %q", m.ID, m.Content)
		}
	}
	if !shown {
		t.Fatal("the primary's words were never shown: the test proved nothing")
	}
	if n, d := e.channelPosts("C1"), len(e.fake.Deletes()); n != 3 || d != 1 {
		t.Errorf("%d posts and %d deletes in C1, want the partial reply (taken down), the notice and the answer", n, d)
	}
	if h := e.history("discord:G1:C1"); len(h) != 2 || h[1].Content != want {
		t.Errorf("history = %+v, want the question and the fallback's answer", h)
	}
}

// covers L2: with channels.discord.stream false the reply is today's single post:
// no edit, no delete, one message with the whole answer (typing still shows).
func TestE2E_L2_StreamingOffGivesOneSinglePost(t *testing.T) {
	t.Parallel()
	e := newE2E(t) // stream: false
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 20 * time.Millisecond, Reply: sentences(12)})
	e.fake.SendMention("G1", "C1", "U1", "once please")
	e.posts("C1", 1)
	e.Drain()
	m := e.fake.Latest("C1")
	if len(m) != 1 || m[0].Content != sentences(12) || len(m[0].Versions) != 1 {
		t.Fatalf("messages = %+v", m)
	}
	if n := len(e.fake.Edits()); n != 0 || len(e.fake.Deletes()) != 0 || e.channelPosts("C1") != 1 {
		t.Fatalf("%d edits, %d deletes, %d posts: want one post", n, len(e.fake.Deletes()), e.channelPosts("C1"))
	}
	if !slices.ContainsFunc(e.fake.TypingCalls(), func(t fakediscord.Typing) bool { return t.ChannelID == "C1" }) {
		t.Error("no typing indicator with streaming off")
	}
}

// covers L2: an answer past 2,000 characters streams into further messages and
// ends split exactly as a single post would be (code blocks closed and reopened),
// the first replying to the question, each within Discord's limit.
func TestE2E_L2_LongAnswerEndsSplitAcrossMessages(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 40*time.Millisecond)
	var b strings.Builder
	for i := 0; b.Len() < 3000; i++ {
		b.WriteString(sentences(12) + ".\n\n")
	}
	b.WriteString("```go\n")
	for b.Len() < 5200 {
		b.WriteString("fmt.Println(\"a line of code\")\n")
	}
	b.WriteString("```\nThe end.")
	long := b.String()
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: time.Millisecond, Reply: long})
	q := e.fake.SendMention("G1", "C1", "U1", "a long one")
	e.waitFor("the reply", func() bool { return len(e.fake.Latest("C1")) >= 3 })
	e.Drain()
	want := adapters.Split(long, discord.MaxMessageLen, func(s string) int { return len(s) })
	got := e.fake.Latest("C1")
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m.Content != want[i] {
			t.Errorf("part %d = %q..., want %q...", i, head(m.Content), head(want[i]))
		}
		if len(m.Content) > discord.MaxMessageLen {
			t.Errorf("part %d has %d characters", i, len(m.Content))
		}
		if wantRef := map[bool]string{true: q, false: ""}[i == 0]; m.Reference != wantRef {
			t.Errorf("part %d references %q, want %q", i, m.Reference, wantRef)
		}
	}
	if strings.Count(got[len(got)-1].Content, "```") != 2 || !strings.HasPrefix(got[len(got)-1].Content, "```go") {
		t.Errorf("the code block was not reopened in the last part: %q", head(got[len(got)-1].Content))
	}
	if e.fake.RateLimited() != 0 {
		t.Errorf("%d 429s", e.fake.RateLimited())
	}
}

func head(s string) string { return s[:min(len(s), 60)] }

// covers L4: /model without a model (slash command, then the text form) offers the
// configured models in a select menu (ephemeral for the slash command); the pick
// is acknowledged at once, applied like /model <ref>, and its answer replaces the
// menu.
func TestE2E_L4_ModelPickerSlashAndText(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	tests := []struct {
		name      string
		channel   string
		ask       func() (token string)
		ephemeral bool
	}{
		{"slash command", "C1", func() string {
			_, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model"})
			return tok
		}, true},
		{"text form", "C2", func() string { e.fake.SendMention("G1", "C2", "U1", "!model"); return "" }, false},
	}
	for _, tc := range tests {
		tok := tc.ask()
		var menu fakediscord.Message
		e.waitFor(tc.name+": the menu", func() bool {
			for _, m := range e.fake.Messages() {
				if len(m.Selects) > 0 && (m.InteractionToken == tok && tok != "" || tok == "" && m.ChannelID == tc.channel) {
					menu = m
					return true
				}
			}
			return false
		})
		if menu.Ephemeral != tc.ephemeral {
			t.Errorf("%s: menu ephemeral %v, want %v", tc.name, menu.Ephemeral, tc.ephemeral)
		}
		sel := menu.Selects[0]
		var values []string
		for _, o := range sel.Options {
			values = append(values, o.Value)
		}
		if !slices.Contains(values, "/model "+e2ePrimary) || !slices.Contains(values, "/model "+e2eFallback) {
			t.Fatalf("%s: menu options %v", tc.name, values)
		}
		id, _, err := e.fake.SendComponent(fakediscord.Component{GuildID: "G1", ChannelID: tc.channel, UserID: "U1",
			MessageID: menu.ID, CustomID: sel.CustomID, Values: []string{"/model " + e2eFallback}})
		if err != nil {
			t.Fatal(err)
		}
		if r := e.response(id); r.Type != 6 || r.Latency >= deadline {
			t.Errorf("%s: pick acknowledged with type %d after %v, want a deferred update (6) within 3 s", tc.name, r.Type, r.Latency)
		}
		e.waitFor(tc.name+": the answer replacing the menu", func() bool {
			m, _ := e.fake.Message(menu.ID)
			return strings.Contains(m.Content, "model set to "+e2eFallback) && len(m.Selects) == 0
		})
		e.Drain()
		if en := e.Entry("discord:G1:" + tc.channel); en.ProviderOverride+"/"+en.ModelOverride != e2eFallback || en.ModelOverrideSource != "user" {
			t.Errorf("%s: the pick was not applied: %+v", tc.name, en)
		}
	}
	// The text-form menu lived in the channel: its answer is there too, once.
	if m := e.fake.Latest("C2"); len(m) != 1 {
		t.Errorf("C2 messages = %+v, want the menu edited into the answer", m)
	}
	e.fake.SendMention("G1", "C1", "U1", "which model?")
	if m := e.posts("C1", 1); !strings.Contains(m[0].Content, "["+e2eFallback+"] you said: which model?") {
		t.Fatalf("reply after the pick = %+v", m)
	}
}

// covers channels.discord.threads: a question that mentions the bot in a channel
// starts a thread named from it; the answer goes there (not in the channel), and
// the next message in the thread, without a mention, continues the conversation.
func TestE2E_Threads_MentionOpensThreadAndConversationContinues(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 30*time.Millisecond, e2eOpts{adapter: func(c *discord.Config) { c.Threads = true }})
	// The model takes a moment, as models do: a 3 ms answer may land before
	// the typing indicator's first call, and then none is owed (L1).
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOK, Delay: 300 * time.Millisecond, Times: 1})
	q := e.fake.SendMention("G1", "C1", "U1", "How do I  bake bread?\nWith details please")
	e.waitFor("the answer in the thread", func() bool { return len(e.fake.Latest(q)) == 1 })
	e.Drain()
	starts := e.fake.ThreadStarts()
	if len(starts) != 1 || starts[0].ParentID != "C1" || starts[0].MessageID != q || starts[0].Name != "How do I bake bread?" {
		t.Fatalf("threads started = %+v", starts)
	}
	thread := starts[0].ThreadID
	if m := e.fake.Latest(thread)[0]; !strings.Contains(m.Content, "you said: How do I  bake bread?") || m.Reference != "" {
		t.Errorf("answer in the thread = %+v", m)
	}
	if m := e.fake.Latest("C1"); len(m) != 0 {
		t.Errorf("the channel got messages: %+v", m)
	}
	if !slices.ContainsFunc(e.fake.TypingCalls(), func(t fakediscord.Typing) bool { return t.ChannelID == thread }) {
		t.Error("no typing indicator in the thread")
	}
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: thread, AuthorID: "U1", Content: "and rye?"})
	e.waitFor("the second answer", func() bool { return len(e.fake.Latest(thread)) == 2 })
	e.Drain()
	if m := e.fake.Latest(thread)[1]; !strings.Contains(m.Content, "you said: and rye?") {
		t.Errorf("second answer = %+v", m)
	}
	if h := e.history("discord:G1:" + thread); len(h) != 4 {
		t.Errorf("thread session history has %d messages, want both turns (4)", len(h))
	}
	if h := e.history("discord:G1:C1"); len(h) != 0 {
		t.Errorf("the channel's session got history: %+v", h)
	}
	// A command is answered where it was typed; no thread for it.
	e.fake.SendMention("G1", "C1", "U1", "!status")
	e.posts("C1", 1)
	if n := len(e.fake.ThreadStarts()); n != 1 {
		t.Errorf("%d threads started, want none for a command", n)
	}
}

// covers A5, N1, L2: the primary fails before any text; while the fallback's
// answer streams, its notice is in the channel before the answer's first text.
func TestE2E_A5_NoticeBeforeTheFallbacksFirstText(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 30*time.Millisecond)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500})
	e.llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 15 * time.Millisecond, Reply: sentences(20)})
	e.fake.SendMention("G1", "C1", "U1", "hello")
	e.waitFor("the notice and the answer", func() bool { return len(e.fake.Latest("C1")) == 2 })
	e.Drain()
	ms := e.fake.Latest("C1")
	if !isNotice(ms[0]) || !strings.Contains(ms[0].Content, "model fallback: "+e2eFallback) || ms[1].Content != sentences(20) {
		t.Fatalf("C1 shows %q, want the notice, then the answer", contents(ms))
	}
	if !ms[0].At.Before(ms[1].At) || len(ms[1].Versions) < 2 {
		t.Fatalf("the notice (%v) did not precede the streamed answer (%v, %d versions)", ms[0].At, ms[1].At, len(ms[1].Versions))
	}
	if len(e.fake.Deletes()) != 0 {
		t.Fatalf("deleted %d messages: nothing was shown before the fallback", len(e.fake.Deletes()))
	}
}

// covers L2, L5: a 429 on the edits of a growing reply (and a drained bucket)
// is waited out by the transport: the answer ends complete, once, and no
// request goes out that Discord would refuse but the one injected. An answer
// of 45,000 characters is split into messages Discord takes, never refused.
func TestE2E_L2_L5_RateLimitedEditsAndAnOversizeAnswer(t *testing.T) {
	t.Parallel()
	e := liveWorld(t, 20*time.Millisecond)
	var b strings.Builder
	for i := 0; b.Len() < 45000; i++ {
		b.WriteString(fmt.Sprintf("Line-%d-%s ends.\n\n", i, strings.Repeat("x", 150+i%40)))
	}
	answer := strings.TrimSpace(b.String())
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 2 * time.Millisecond, Reply: answer})
	e.fake.RateLimitNext("PATCH /channels/{id}/messages/{mid}", 300*time.Millisecond)
	e.fake.SendMention("G1", "C1", "U1", "a long one")
	want := adapters.Split(answer, discord.MaxMessageLen, func(s string) int { return len(s) })
	e.waitFor("the whole answer", func() bool { return slices.Equal(contents(e.fake.Latest("C1")), want) })
	e.Drain()
	if got := contents(e.fake.Latest("C1")); !slices.Equal(got, want) || len(want) < 23 {
		t.Fatalf("C1 shows %d messages, want the answer in %d", len(got), len(want))
	}
	for _, r := range e.fake.Requests() {
		if r.Status >= 400 && r.Status != 429 {
			t.Fatalf("Discord refused %s %s: %d (code %d)", r.Method, r.Path, r.Status, r.Code)
		}
	}
	if n := e.fake.RateLimited(); n != 1 {
		t.Fatalf("%d 429s, want the one injected", n)
	}
}
