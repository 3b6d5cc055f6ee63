package discord

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// covers T5 (/recover registered for administrators only)
func TestRun_IdentifiesAndRegistersCommands(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	if got := h.fake.Identifies(); len(got) != 1 || got[0] != int(Intents) {
		t.Fatalf("identifies = %v, want one with intents %d", got, Intents)
	}
	if Intents&discordgo.IntentsMessageContent == 0 || Intents&discordgo.IntentsDirectMessages == 0 || Intents&discordgo.IntentsGuildMessages == 0 {
		t.Fatalf("intents %d lack a required bit", Intents)
	}
	sets := h.fake.Commands()
	if len(sets) != 1 || sets[0].GuildID != "G1" {
		t.Fatalf("command sets = %+v, want one guild-scoped to G1", sets)
	}
	var names []string
	for _, c := range sets[0].Commands {
		names = append(names, c.Name)
	}
	if want := []string{"model", "new", "reset", "compact", "status", "usage", "recover", "help"}; !slices.Equal(names, want) {
		t.Fatalf("commands = %v, want %v", names, want)
	}
	// T5: /recover is hidden from everyone but administrators by default.
	for _, c := range sets[0].Commands {
		admin := c.DefaultMemberPermissions != nil && *c.DefaultMemberPermissions == 0
		if admin != (c.Name == "recover") {
			t.Errorf("/%s default_member_permissions = %v, want \"0\" only on /recover", c.Name, c.DefaultMemberPermissions)
		}
	}
	model := sets[0].Commands[0]
	if len(model.Options) != 1 || model.Options[0].Name != "model" || !model.Options[0].Autocomplete || model.Options[0].Required {
		t.Fatalf("/model option = %+v, want optional autocompleted string 'model'", model.Options)
	}
}

func TestRun_GlobalCommandsWithoutGuild(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.GuildID = "" })
	if sets := h.fake.Commands(); len(sets) != 1 || sets[0].GuildID != "" {
		t.Fatalf("command sets = %+v, want one global", sets)
	}
}

// covers M3 (EventID on every inbound)
func TestInbound_Routing(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	bot := h.fake.BotID

	tests := []struct {
		name string
		send func() string // returns the message id
		want adapters.Inbound
		ch   string
	}{
		{
			name: "mention in channel, mention stripped",
			send: func() string { return h.fake.SendMention("G1", "C1", "U1", "what is 2+2?") },
			want: adapters.Inbound{SessionKey: "discord:G1:C1", User: "discord:U1", Text: "what is 2+2?", Conversation: adapters.ConversationChannel},
			ch:   "C1",
		},
		{
			name: "legacy nick mention in the middle",
			send: func() string {
				return h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U2", Content: "hey <@!" + bot + "> there", MentionBot: true})
			},
			want: adapters.Inbound{SessionKey: "discord:G1:C2", User: "discord:U2", Text: "hey  there", Conversation: adapters.ConversationChannel},
			ch:   "C2",
		},
		{
			name: "direct message without mention",
			send: func() string { return h.fake.SendDM("D1", "U3", "hello in private") },
			want: adapters.Inbound{SessionKey: "discord:dm:D1", User: "discord:U3", Text: "hello in private", Direct: true, Conversation: adapters.ConversationDirect},
			ch:   "D1",
		},
		{
			name: "text command passes through for the router's parser",
			send: func() string { return h.fake.SendMention("G1", "C1", "U1", "!model openai/gpt-4.1") },
			want: adapters.Inbound{SessionKey: "discord:G1:C1", User: "discord:U1", Text: "!model openai/gpt-4.1", Conversation: adapters.ConversationChannel},
			ch:   "C1",
		},
	}
	for _, tc := range tests {
		id := tc.send()
		got := h.recv()
		tc.want.Channel = Name
		// ReplyTo names the asking message (replies reference it); EventID is the
		// message id, for de-duplication across replicas (M3).
		tc.want.ReplyTo = tc.ch + "/" + id
		tc.want.EventID = "discord:msg:" + id
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestInbound_IgnoresOwnBotsAndUnaddressed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	bot := h.fake.BotID
	// Own message (as Discord echoes it), another bot mentioning us, a plain channel
	// message, a bare mention with no text.
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C1", AuthorID: bot, Bot: true, Content: "<@" + bot + "> loop?", MentionBot: true})
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C1", AuthorID: "B2", Bot: true, Content: "<@" + bot + "> hi", MentionBot: true})
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C1", AuthorID: "U1", Content: "just chatting"})
	h.fake.SendMention("G1", "C1", "U1", "")
	// Our own post is echoed back by the fake as MESSAGE_CREATE.
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "<@" + bot + "> echo"})
	if _, err := h.fake.WaitMessages(wait, 1, fakediscord.InChannel("C1")); err != nil {
		t.Fatal(err)
	}
	h.expectNext("C1")
}

func TestThreads_AnsweredInThread(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.fake.AddThread("G1", "C1", "T1")

	// Before the bot is mentioned there, thread chatter is ignored.
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T1", AuthorID: "U1", Content: "before"})
	h.fake.SendMention("G1", "T1", "U1", "join us")
	in := h.recv()
	if in.SessionKey != "discord:G1:T1" || in.Text != "join us" || !strings.HasPrefix(in.ReplyTo, "T1/") {
		t.Fatalf("thread mention = %+v", in)
	}
	// Taking part now: later messages need no mention.
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T1", AuthorID: "U1", Content: "and a follow-up"})
	in = h.recv()
	if in.SessionKey != "discord:G1:T1" || in.Text != "and a follow-up" {
		t.Fatalf("thread follow-up = %+v", in)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: "answer in thread"})
	msgs, err := h.fake.WaitMessages(wait, 1, fakediscord.InChannel("T1"))
	if err != nil || msgs[0].Content != "answer in thread" {
		t.Fatalf("thread reply = %+v, %v", msgs, err)
	}
	// A mention in a plain channel does not make the channel "taken part in".
	h.fake.SendMention("G1", "C9", "U1", "one-off")
	if in := h.recv(); in.Text != "one-off" {
		t.Fatalf("got %+v", in)
	}
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C9", AuthorID: "U1", Content: "not for the bot"})

	// A thread the bot created counts at once.
	h.fake.CreateThread("G1", "C1", "T2", h.fake.BotID)
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T2", AuthorID: "U2", Content: "in the bot's thread"})
	in = h.recv()
	if in.SessionKey != "discord:G1:T2" || in.Text != "in the bot's thread" {
		t.Fatalf("bot thread message = %+v (a message in C9 leaked?)", in)
	}
	h.expectNext("C1")
}

func TestSend_ReplyAndReportAndError(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.send(adapters.Outbound{Kind: adapters.KindReply, SessionKey: "discord:G1:C1", ReplyTo: "C1", Text: "hi @everyone"})
	h.send(adapters.Outbound{Kind: adapters.KindError, SessionKey: "discord:G1:C1", ReplyTo: "C1", Text: "all models are rate-limited"})
	h.send(adapters.Outbound{Kind: adapters.KindReport, ReplyTo: "discord:ADMIN1", Text: "all models unavailable"})
	h.send(adapters.Outbound{Kind: adapters.KindReply, SessionKey: "discord:dm:D7", Text: "from the session key"})
	msgs, err := h.fake.WaitMessages(wait, 4, func(m fakediscord.Message) bool { return m.Via == "channel" })
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ ch, text string }{{"C1", "hi @everyone"}, {"C1", "all models are rate-limited"}, {"ADMIN1", "all models unavailable"}, {"D7", "from the session key"}}
	for i, w := range want {
		m := msgs[i]
		if m.ChannelID != w.ch || m.Content != w.text || m.Flags != 0 {
			t.Errorf("message %d = %+v, want %s in %s", i, m, w.text, w.ch)
		}
		if m.AllowedMentionsParse == nil || len(*m.AllowedMentionsParse) != 0 {
			t.Errorf("message %d allowed_mentions = %v, want parse []", i, m.AllowedMentionsParse)
		}
	}
}

// covers N4: the notice is its own quiet message, posted before the reply.
func TestSend_N4_NoticeBeforeReplySuppressed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	notice := "↪️ model fallback: anthropic/claude-haiku-4-5 (selected openai/gpt-4o-mini; overloaded)"
	h.send(adapters.Outbound{Kind: adapters.KindNotice, ReplyTo: "C1", Text: notice})
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "the answer", Model: "anthropic/claude-haiku-4-5"})
	msgs, err := h.fake.WaitMessages(wait, 2, fakediscord.InChannel("C1"))
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Content != "-# "+notice || msgs[0].Flags != int(discordgo.MessageFlagsSuppressNotifications) {
		t.Errorf("notice = %+v, want subtext with flags 4096", msgs[0])
	}
	if msgs[0].AllowedMentionsParse == nil || len(*msgs[0].AllowedMentionsParse) != 0 {
		t.Errorf("notice allowed_mentions = %v, want none", msgs[0].AllowedMentionsParse)
	}
	if msgs[1].Content != "the answer" || msgs[1].Flags != 0 {
		t.Errorf("reply = %+v", msgs[1])
	}
}

func TestSend_SplitsLongReplyKeepingFences(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	var b strings.Builder
	b.WriteString("Here is the code:\n```go\n")
	for i := 0; b.Len() < 4500; i++ {
		b.WriteString("fmt.Println(\"line of a fairly long program\") // ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("\n")
	}
	b.WriteString("```\nDone.")
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: b.String()})
	msgs, err := h.fake.WaitMessages(wait, 3, fakediscord.InChannel("C1"))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		if n := textLen(m.Content); n > MaxMessageLen {
			t.Errorf("chunk %d has %d chars", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("chunk %d has unbalanced fences:\n%s", i, m.Content)
		}
		if i > 0 && !strings.HasPrefix(m.Content, "```go\n") {
			t.Errorf("chunk %d does not reopen the go fence: %q", i, m.Content[:20])
		}
	}
	if last := msgs[len(msgs)-1].Content; !strings.HasSuffix(last, "```\nDone.") {
		t.Errorf("last chunk ends %q", last[max(0, len(last)-20):])
	}
}

func TestInteraction_ModelDeferredThenEdited(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	id, tok := h.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model",
		Options: []fakediscord.Option{{Name: "model", Value: "openai/gpt-4.1@openai:backup"}}})
	in := h.recv()
	want := adapters.Inbound{Channel: Name, SessionKey: "discord:G1:C1", User: "discord:U1",
		Text: "/model openai/gpt-4.1@openai:backup", ReplyTo: "interaction:" + id + ":C1", Native: true,
		EventID: "discord:interaction:" + id, Conversation: adapters.ConversationChannel}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("inbound = %+v, want %+v", in, want)
	}
	// Deferred at once, before any answer exists, for the asker only.
	rs := h.fake.InteractionResponses()
	if len(rs) != 1 || rs[0].InteractionID != id || rs[0].Type != 5 || rs[0].Flags != int(discordgo.MessageFlagsEphemeral) {
		t.Fatalf("interaction responses = %+v, want one deferred ephemeral (type 5, flags 64)", rs)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: "model set to openai/gpt-4.1"})
	h.send(adapters.Outbound{Kind: adapters.KindNotice, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: "extra"})
	msgs, err := h.fake.WaitMessages(wait, 2, fakediscord.ForInteraction(tok))
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Via != "edit-original" || msgs[0].Content != "model set to openai/gpt-4.1" {
		t.Errorf("first answer = %+v, want the deferred response edited", msgs[0])
	}
	if want := int(discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlagsEphemeral); msgs[1].Via != "followup" || msgs[1].Content != "-# extra" || msgs[1].Flags != want {
		t.Errorf("second answer = %+v, want a quiet ephemeral follow-up (flags %d)", msgs[1], want)
	}
	if n := len(h.fake.Messages()); n != 2 {
		t.Errorf("%d messages posted, want only the 2 interaction answers", n)
	}
}

func TestInteraction_StatusIsEphemeralAndDMs(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	id, _ := h.fake.SendCommand(fakediscord.Command{ChannelID: "D5", UserID: "U5", Name: "status"})
	in := h.recv()
	if in.Text != "/status" || in.SessionKey != "discord:dm:D5" || !in.Direct || !in.Native || in.User != "discord:U5" {
		t.Fatalf("inbound = %+v", in)
	}
	rs, err := h.fake.WaitInteractionResponses(wait, 1, nil)
	if err != nil || rs[0].InteractionID != id || rs[0].Type != 5 || rs[0].Flags != int(discordgo.MessageFlagsEphemeral) {
		t.Fatalf("responses = %+v, %v; want deferred ephemeral", rs, err)
	}
	// /recover carries its target; /reset none.
	h.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "recover", Options: []fakediscord.Option{{Name: "target", Value: "openai:main"}}})
	if in := h.recv(); in.Text != "/recover openai:main" {
		t.Fatalf("recover inbound = %+v", in)
	}
	h.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "reset"})
	if in := h.recv(); in.Text != "/reset" {
		t.Fatalf("reset inbound = %+v", in)
	}
}

// An answer for an interaction this process cannot answer privately (unknown
// after a restart, or never acknowledged) is dropped with a log line: it was meant
// for the asker alone, so it is never posted in the channel.
func TestInteraction_UnknownAnswerNeverPublic(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	for _, kind := range []adapters.Kind{adapters.KindReply, adapters.KindError, adapters.KindNotice} {
		h.send(adapters.Outbound{Kind: kind, ReplyTo: "interaction:999:C3", Text: "private status", Ephemeral: kind == adapters.KindReply})
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C3", Text: "a public sentinel"})
	msgs, err := h.fake.WaitMessages(wait, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Content != "a public sentinel" {
		t.Fatalf("messages = %+v, want only the sentinel", msgs)
	}
	if n := strings.Count(h.logs.String(), "interaction answer dropped"); n != 3 {
		t.Errorf("%d drop log lines, want 3", n)
	}
}

func TestAutocomplete_FromConfig(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	tests := []struct {
		cmd, opt, typed string
		want            []string
	}{
		{"model", "model", "gpt-4o", []string{"openai/gpt-4o-mini", "openai/gpt-4o-mini@openai:main", "openai/gpt-4o-mini@openai:backup"}},
		{"model", "model", "claude", []string{"anthropic/claude-haiku-4-5", "anthropic/claude-haiku-4-5@anthropic:main"}},
		{"model", "model", "4.1@back", []string{"openai/gpt-4.1@openai:backup"}},
		{"new", "model", "nothing-like-this", nil},
		{"recover", "target", "main", []string{"openai:main", "anthropic:main"}},
	}
	for _, tc := range tests {
		id, _ := h.fake.SendAutocomplete(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: tc.cmd,
			Options: []fakediscord.Option{{Name: tc.opt, Value: tc.typed, Focused: true}}})
		rs, err := h.fake.WaitInteractionResponses(wait, 1, func(r fakediscord.InteractionResponse) bool { return r.InteractionID == id })
		if err != nil {
			t.Fatalf("%s %q: %v", tc.cmd, tc.typed, err)
		}
		var got []string
		for _, c := range rs[0].Choices {
			if c.Name != c.Value {
				t.Errorf("choice name %q != value %q", c.Name, c.Value)
			}
			got = append(got, c.Value)
		}
		if rs[0].Type != 8 || !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: type %d choices %v, want type 8 %v", tc.cmd, tc.typed, rs[0].Type, got, tc.want)
		}
	}
	// Autocomplete never reaches the router.
	h.expectNext("C1")
}

// covers L1: the typing indicator is renewed while the turn runs and stops with
// the indicator; commands answered through an interaction get none; a typing
// call that would wait for a rate limit is dropped, never queued.
func TestProgress_L1_TypingRenewedUntilStop(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.a.mu.Lock()
	h.a.typingEvery = 20 * time.Millisecond
	h.a.mu.Unlock()
	ind := h.a.StartProgress(h.ctx, adapters.Inbound{SessionKey: "discord:G1:C1", ReplyTo: "C1/123"})
	h.a.StartProgress(h.ctx, adapters.Inbound{ReplyTo: "interaction:1:C1", Native: true}).Stop()
	// Renewed while the turn runs; a status and a notice do not end it...
	ind.Status("waiting 20s for p1: rate limit")
	h.send(adapters.Outbound{Kind: adapters.KindNotice, ReplyTo: "C1", Text: "n"})
	if err := fakediscord.WaitFor(wait, func() bool { return len(h.fake.Typings()) >= 3 }); err != nil {
		t.Fatalf("typing not renewed: %v", h.fake.Typings())
	}
	// ...Stop does (twice is fine).
	ind.Stop()
	ind.Stop()
	n := len(h.fake.Typings())
	time.Sleep(100 * time.Millisecond) // five renewal periods
	got := h.fake.Typings()
	if len(got) > n+1 {
		t.Fatalf("typing continued after Stop: %d -> %d", n, len(got))
	}
	for _, ch := range got {
		if ch != "C1" {
			t.Fatalf("typing in %s, want only C1 (none for interactions)", ch)
		}
	}
	if msgs := h.fake.Messages(); len(msgs) != 1 {
		t.Fatalf("progress posted messages: %+v", msgs)
	}

	// Under a rate limit the typing call is dropped: no wait, no 429 spent.
	h.fake.DrainBucketNext("POST /channels/{id}/typing", time.Minute)
	ind = h.a.StartProgress(h.ctx, adapters.Inbound{SessionKey: "discord:G1:C2", ReplyTo: "C2"})
	if err := fakediscord.WaitFor(wait, func() bool { return slices.Contains(h.fake.Typings(), "C2") }); err != nil {
		t.Fatal(err)
	}
	ind.Stop()
	ind = h.a.StartProgress(h.ctx, adapters.Inbound{SessionKey: "discord:G1:C2", ReplyTo: "C2"})
	if err := fakediscord.WaitFor(wait, func() bool { return strings.Contains(h.logs.String(), "dropped") }); err != nil {
		t.Fatalf("typing under an empty bucket not dropped:\n%s", h.logs.String())
	}
	ind.Stop()
	if h.fake.RateLimited() != 0 || len(h.sleeps.Sleeps()) != 0 {
		t.Fatalf("429s %d, sleeps %v: a typing call waited for the bucket", h.fake.RateLimited(), h.sleeps.Sleeps())
	}
}

func TestReconnect_ResumesAndDeliversOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		m    fakediscord.ReconnectMode
	}{{"op7", fakediscord.ReconnectOp7}, {"dropped socket", fakediscord.ReconnectDrop}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, nil)
			h.fake.SendMention("G1", "C1", "U1", "before")
			if in := h.recv(); in.Text != "before" {
				t.Fatalf("got %+v", in)
			}
			if err := h.fake.ForceReconnect(mode.m); err != nil {
				t.Fatal(err)
			}
			// Sent while the bot is away: Discord replays it on resume.
			h.fake.SendMention("G1", "C1", "U1", "during")
			if err := h.fake.WaitConnected(wait, 1, 1); err != nil {
				t.Fatalf("no resume: %v", err)
			}
			if in := h.recv(); in.Text != "during" {
				t.Fatalf("got %+v, want the replayed message", in)
			}
			h.fake.SendMention("G1", "C1", "U1", "after")
			in := h.recv()
			if in.Text != "after" {
				t.Fatalf("got %+v", in)
			}
			h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "answered after resume"})
			if _, err := h.fake.WaitMessages(wait, 1, fakediscord.InChannel("C1")); err != nil {
				t.Fatal(err)
			}
			h.expectNext("C1") // nothing delivered twice
			if n := len(h.fake.Identifies()); n != 1 {
				t.Errorf("identifies = %d, want 1 (resumed, not re-identified)", n)
			}
			if slices.Contains(h.fake.Closes(), 1000) || slices.Contains(h.fake.Closes(), 1001) {
				t.Errorf("close codes %v: a 1000 or 1001 ends the session", h.fake.Closes())
			}
		})
	}
}

func TestReconnect_InvalidSessionReidentifies(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.fake.InvalidateSession()
	if err := h.fake.ForceReconnect(fakediscord.ReconnectDrop); err != nil {
		t.Fatal(err)
	}
	// The resume is refused (op 9); discordgo identifies again on the same socket.
	if err := h.fake.WaitConnected(wait, 2, 0); err != nil {
		t.Fatalf("no new session: %v (identifies %v)", err, h.fake.Identifies())
	}
	h.fake.SendMention("G1", "C1", "U1", "fresh session")
	if in := h.recv(); in.Text != "fresh session" {
		t.Fatalf("got %+v", in)
	}
	h.expectNext("C1")
	if h.fake.Resumes() != 0 {
		t.Fatalf("resumes = %d, want 0", h.fake.Resumes())
	}
}

func TestSend_RateLimitRetriedOnce(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.fake.RateLimitNext("POST /channels/{id}/messages", 40*time.Millisecond)
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "after the limit"})
	msgs := h.fake.Messages()
	if len(msgs) != 1 || msgs[0].Content != "after the limit" {
		t.Fatalf("messages = %+v, want exactly one", msgs)
	}
	if h.fake.RateLimited() != 1 {
		t.Fatalf("rate limited %d times, want 1", h.fake.RateLimited())
	}
	if got := h.sleeps.Sleeps(); !slices.Equal(got, []time.Duration{40 * time.Millisecond}) {
		t.Fatalf("sleeps = %v, want [40ms] from retry_after", got)
	}
	if !strings.Contains(h.logs.String(), "discord rate limited") {
		t.Errorf("rate limit not logged")
	}
}

func TestSend_RateLimitBounded(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.MaxRateLimitRetries = 2; c.MaxRateLimitWait = time.Second })
	for range 3 {
		h.fake.RateLimitNext("POST /channels/*/messages", 10*time.Millisecond)
	}
	err := h.a.Send(h.ctx, adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "x"})
	if !errors.Is(err, link.ErrRateLimited) {
		t.Fatalf("err = %v, want rate limited after retries", err)
	}
	if n := len(h.sleeps.Sleeps()); n != 2 {
		t.Fatalf("slept %d times, want 2", n)
	}
	// A wait longer than MaxRateLimitWait fails at once. (The recorder does not
	// really sleep, so the bucket emptied above may still ask for its last few
	// milliseconds first; the 90 s wait must never be taken.)
	h.fake.RateLimitNext("POST /channels/*/messages", 90*time.Second)
	err = h.a.Send(h.ctx, adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "x"})
	if !errors.Is(err, link.ErrRateLimited) {
		t.Fatalf("err = %v; want rate limited at once", err)
	}
	for _, d := range h.sleeps.Sleeps()[2:] {
		if d > 10*time.Millisecond {
			t.Fatalf("sleeps %v: waited for the over-long rate limit", h.sleeps.Sleeps())
		}
	}
	if n := len(h.fake.Messages()); n != 0 {
		t.Fatalf("%d messages posted, want 0", n)
	}
}

func TestSend_RateLimitWaitHonoursContext(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.Sleep = nil }) // the real, ctx-aware sleep
	h.fake.RateLimitNext("POST /channels/*/messages", 30*time.Second)
	ctx, cancel := context.WithTimeout(h.ctx, 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := h.a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "x"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 3*time.Second {
		t.Fatalf("err = %v after %v, want a prompt deadline error", err, time.Since(began))
	}
}

// covers P4: a refused token ends Run with an error that does not carry the token.
func TestRun_P4_BadTokenNeverLogged(t *testing.T) {
	t.Parallel()
	fake := fakediscord.New()
	fake.Token = "the-right-token"
	fake.Start()
	defer fake.Close()
	logs := &syncbuf.Buffer{}
	a, err := New(Config{Token: canaryToken, APIURL: fake.URL(), Log: slogTo(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err = a.Run(ctx, make(chan adapters.Inbound))
	if err == nil {
		t.Fatal("Run with a refused token returned nil")
	}
	if strings.Contains(err.Error(), canaryToken) || strings.Contains(logs.String(), canaryToken) {
		t.Fatalf("token leaked: err=%v logs=%s", err, logs.String())
	}
	if fake.AuthFailures() == 0 {
		t.Fatal("fake saw no refused call")
	}
	// Errors from sends do not carry it either.
	err = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "x"})
	if err == nil || strings.Contains(err.Error(), canaryToken) {
		t.Fatalf("send err = %v", err)
	}
}

func TestNew_Validates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{}, {Token: "  "}, {Token: "t", APIURL: "ftp://x"}, {Token: "t", APIURL: "::"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
	if _, err := New(Config{Token: "Bot abc"}); err != nil {
		t.Errorf("New with Bot prefix: %v", err)
	}
}

// A gateway that says Hello and then never sends READY must not hang Run: each
// handshake has a deadline, Run retries, and a cancel ends it promptly.
func TestRun_HandshakeDeadline(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	up := websocket.Upgrader{}
	hold := make(chan struct{})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v9/gateway" || r.URL.Path == "/api/v9/gateway/bot":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"url":"ws` + strings.TrimPrefix(srv.URL, "http") + `/gw"}`))
		case strings.HasPrefix(r.URL.Path, "/gw"):
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			dials.Add(1)
			_ = c.WriteJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 1000}})
			select { // read Identify, then stay silent
			case <-hold:
			case <-r.Context().Done():
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(hold)
	logs := &syncbuf.Buffer{}
	clock := failovertest.NewClock(t0)
	a, err := New(Config{Token: "t", APIURL: srv.URL, Log: slogTo(logs), Timing: link.Timing{OpenTimeout: 150 * time.Millisecond,
		ReconnectBackoff: 10 * time.Millisecond, Sleep: clock.Sleep, Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, make(chan adapters.Inbound)) }()
	if err := fakediscord.WaitFor(wait, func() bool { return dials.Load() >= 2 }); err != nil {
		t.Logf("logs: %s", logs.String())
		t.Fatalf("Run did not retry a stalled handshake: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Run hung after cancel")
	}
	if !strings.Contains(logs.String(), "discord gateway connect failed") {
		t.Errorf("failed handshakes not logged")
	}
}

// Not parallel: after Run returns and the fake closes, no goroutine of the adapter,
// discordgo (listen, heartbeat), the typing refresher or the HTTP transport is left.
func TestRun_StopsEveryGoroutine(t *testing.T) {
	t.Run("busy session", func(t *testing.T) {
		h := start(t, nil)
		h.fake.SendMention("G1", "C1", "U1", "work")
		in := h.recv()
		h.a.StartProgress(h.ctx, in) // refresher left running
		st, err := h.a.StartStream(h.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Update(h.ctx, "a stream never finished"); err != nil {
			t.Fatal(err)
		}
		h.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
		h.recv() // an interaction left unanswered
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	})
	goleak.VerifyNone(t)
}

// A post that empties its rate-limit bucket (X-RateLimit-Remaining: 0) makes the
// next post on that route wait in our code, through the injectable Sleep and
// logged, instead of sleeping silently inside discordgo; the strict fake would
// refuse a post before the reset.
func TestSend_EmptyBucketWaitIsOurs(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.fake.DrainBucketNext("POST /channels/{id}/messages", 300*time.Millisecond)
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "first"})
	if got := h.sleeps.Sleeps(); len(got) != 0 {
		t.Fatalf("sleeps before the bucket ran out: %v", got)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1", Text: "second"})
	if got := h.sleeps.Sleeps(); !slices.Equal(got, []time.Duration{300 * time.Millisecond}) {
		t.Fatalf("sleeps = %v, want one wait of 300ms for the empty bucket", got)
	}
	if h.fake.RateLimited() != 0 || len(h.fake.Messages()) != 2 {
		t.Fatalf("429s %d, messages %d: want 0 and 2", h.fake.RateLimited(), len(h.fake.Messages()))
	}
	if !strings.Contains(h.logs.String(), "rate-limit bucket empty") {
		t.Error("the bucket wait is not logged")
	}
}

// A 502 on a message post is not repeated (discordgo would retry it up to
// MaxRestRetries times, and a post that landed would show twice): one request,
// and the error is the caller's.
func TestSend_BadGatewayIsNotRepeated(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.fake.FailNext("POST /channels/{id}/messages", http.StatusBadGateway, 0)
	err := h.a.Send(h.ctx, adapters.Outbound{Kind: adapters.KindReply, Channel: Name, ReplyTo: "C1", Text: "once"})
	if err == nil {
		t.Fatal("Send reported success for a 502")
	}
	n := 0
	for _, r := range h.fake.Requests() {
		if r.Method == "POST" && r.Path == "/channels/C1/messages" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d posts, want the one that got the 502", n)
	}
}

// covers L1: a channel that refuses the typing indicator (403 Missing
// Permissions) is not asked again, in this turn nor the next: each refusal
// would count toward Discord's 10,000 invalid requests in 10 minutes.
func TestProgress_L1_TypingRefusedIsNotRetried(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.a.mu.Lock()
	h.a.typingEvery = 10 * time.Millisecond
	h.a.mu.Unlock()
	h.fake.Forbid("C7")
	ind := h.a.StartProgress(h.ctx, adapters.Inbound{SessionKey: "discord:G1:C7", ReplyTo: "C7/1"})
	if err := fakediscord.WaitFor(wait, func() bool { return h.fake.InvalidRequests() == 1 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond) // eight renewal periods
	ind.Stop()
	h.a.StartProgress(h.ctx, adapters.Inbound{SessionKey: "discord:G1:C7", ReplyTo: "C7/2"}).Stop()
	if n := h.fake.InvalidRequests(); n != 1 {
		t.Fatalf("%d refused typing calls, want the first only", n)
	}
}
