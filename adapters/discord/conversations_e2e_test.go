package discord_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// botPost posts text in channel as the bot, through the fake's REST API.
func (e *world) botPost(channel, text string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"content": text})
	req, _ := http.NewRequest(http.MethodPost, e.fake.URL()+"/api/v9/channels/"+channel+"/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bot "+e2eToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("bot post: %d", resp.StatusCode)
	}
}

func withYAML(y string) e2eOpts { return e2eOpts{spec: func(s *e2e.Spec) { s.ExtraYAML = y }} }

// covers H1, H2, H3 through Discord: first mentioned in a thread of 12
// earlier messages, the bot reads them (GET channel messages before the
// mention) and the model gets each with its speaker, without the bot's own
// post; a later mention reads nothing again.
func TestE2E_H1_DiscordThreadContext(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.fake.AddThread("G1", "C1", "T1")
	var said []string
	for i := 1; i <= 12; i++ {
		text := fmt.Sprintf("note %02d about the outage", i)
		e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T1", AuthorID: fmt.Sprintf("U%d", 2+i%3), Content: text})
		said = append(said, text)
	}
	e.botPost("T1", "-# ↪️ an old notice of the bot")
	e.fake.SendMention("G1", "T1", "U1", "what caused the outage?")
	e.posts("T1", 2)
	e.Drain()
	p := e.LastPrompt("alpha")
	for i, s := range said {
		u := fmt.Sprintf("U%d", 2+(i+1)%3)
		if want := "- user-" + u + " (discord:" + u + "): " + s; !strings.Contains(p, want) {
			t.Fatalf("H2: the prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "an old notice") {
		t.Fatalf("H2: the bot's own message reached the model:\n%s", p)
	}
	if strings.Index(p, said[0]) > strings.Index(p, said[11]) || strings.Index(p, said[11]) > strings.Index(p, "user: what caused") {
		t.Fatalf("H2: oldest first, then the question:\n%s", p)
	}
	reads := e.fake.MessagesRead()
	if reads != 1 {
		t.Fatalf("want one read of the thread, got %d", reads)
	}
	e.fake.SendMention("G1", "T1", "U2", "and the fix?")
	e.posts("T1", 3)
	e.Drain()
	if e.fake.MessagesRead() != reads {
		t.Fatal("H3: the thread was read again")
	}
	if !strings.Contains(e.LastPrompt("alpha"), said[3]) {
		t.Fatal("H2: the earlier messages are part of every later prompt")
	}
}

// covers H1 through Discord: a mention that replies to another message is
// answered with the chain it replies to, read up message by message.
func TestE2E_H1_DiscordReplyChain(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	a := e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U2", Content: "the cache is stale"})
	b := e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U3", Content: "since the deploy?", ReplyTo: a})
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C2", AuthorID: "U4", ReplyTo: b,
		Content: "<@" + fakediscord.DefaultBotID + "> can you explain?", MentionBot: true})
	e.posts("C2", 1)
	e.Drain()
	p := e.LastPrompt("alpha")
	ia, ib, iq := strings.Index(p, "user-U2 (discord:U2): the cache is stale"), strings.Index(p, "user-U3 (discord:U3): since the deploy?"), strings.Index(p, "can you explain?")
	if ia < 0 || ib < ia || iq < ib {
		t.Fatalf("H1: the chain, oldest first, before the question:\n%s", p)
	}
}

// covers I1, I3, I5, N1 through Discord: an attached image sent to a
// text-only primary goes to the image-capable fallback with a notice; the CDN
// is read without the bot token.
func TestE2E_I5_DiscordImageToTextOnlyPrimary(t *testing.T) {
	t.Parallel()
	e := newE2E(t, withYAML("models:\n  p2/beta: {input: [text, image]}\n"))
	e.llm.TextOnly("alpha")
	shot := e2e.PNG()
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C3", AuthorID: "U1", MentionBot: true,
		Content: "<@" + fakediscord.DefaultBotID + "> what does this show?", Attachments: []map[string]any{e.fake.AddAttachment("C3", "shot.png", "image/png", shot)}})
	m := e.posts("C3", 2)
	if want := "-# ↪️ model fallback: p2/beta (selected p1/alpha; does not take images)"; m[0].Content != want || !isNotice(m[0]) {
		t.Fatalf("N1: %q, want %q", m[0].Content, want)
	}
	if !strings.Contains(m[1].Content, "[saw image 1: image/png, "+strconv.Itoa(len(shot))+" bytes") {
		t.Fatalf("I1: the reply does not prove the image arrived: %q", m[1].Content)
	}
	if n := e.llm.CallCount(fakeprovider.Filter{Model: "alpha"}); n != 0 {
		t.Fatalf("I5: %d call(s) to the text-only primary", n)
	}
	reqs := e.fake.CDNRequests()
	if len(reqs) != 1 || reqs[0].Authorization != "" || reqs[0].Status != http.StatusOK {
		t.Fatalf("I3: CDN requests %+v (the bot token must never go there)", reqs)
	}
	// I4: an attachment alone, in a DM, is answered.
	e.fake.SendMessage(fakediscord.Msg{ChannelID: "D3", AuthorID: "U1",
		Attachments: []map[string]any{e.fake.AddAttachment("D3", "notes.txt", "text/plain; charset=utf-8", []byte("ship on friday"))}})
	if dm := e.posts("D3", 1); !strings.Contains(dm[0].Content, "[p1/alpha]") {
		t.Fatalf("I4: %+v", dm)
	}
	e.Drain()
	if p := e.LastPrompt("alpha"); !strings.Contains(p, "[file notes.txt]\nship on friday") {
		t.Fatalf("I1: the text file is not in the prompt:\n%s", p)
	}
}

// covers I2 through Discord: a 30 MB attachment is refused with words before
// anything is downloaded.
func TestE2E_I2_DiscordLargeAttachmentRefused(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "C4", AuthorID: "U1", MentionBot: true,
		Content: "<@" + fakediscord.DefaultBotID + "> look", Attachments: []map[string]any{e.fake.AddLargeAttachment("C4", "holiday.png", "image/png", 30<<20)}})
	m := e.posts("C4", 2)
	if want := "-# 📎 not read: holiday.png (30.0 MB; files over 5.0 MB are not read)"; m[0].Content != want {
		t.Fatalf("I2: %q, want %q", m[0].Content, want)
	}
	if reqs := e.fake.CDNRequests(); len(reqs) != 0 {
		t.Fatalf("I2: downloaded: %+v", reqs)
	}
}

// covers R16 through Discord: the oldest turns of a long conversation are
// replaced by a summary the model wrote.
func TestE2E_R16_DiscordSummaries(t *testing.T) {
	t.Parallel()
	e := newE2E(t, withYAML("models:\n  p1/alpha: {context_window: 600}\n"))
	for i := range 5 {
		e.fake.SendDM("D5", "U1", fmt.Sprintf("turn %d %s", i, strings.Repeat("word ", 80)))
		e.posts("D5", i+1)
		e.Drain()
	}
	en := e.Entry("discord:dm:D5")
	if en.Summary == "" || en.CompactionCount == 0 {
		t.Fatalf("R16: no summary: %+v", en)
	}
	p := e.LastPrompt("alpha")
	if !strings.Contains(p, "Summary of the earlier part of this conversation") || !strings.Contains(p, en.Summary) || strings.Contains(p, "user: turn 0 ") {
		t.Fatalf("R16: the last prompt should carry the summary instead of turn 0:\n%s", p)
	}
}

var usageLine = regexp.MustCompile(`your usage today \(2026-03-01 UTC\): (\d+) paid call\(s\), ([\d,]+) tokens in, ([\d,]+) out`)

// covers U2, U3 through Discord: /usage adds up exactly the calls and tokens
// the fake provider's call log holds.
func TestE2E_U3_DiscordUsageMatchesTheProvider(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500, Times: 2})
	for i, ch := range []string{"C6", "C7", "C8"} {
		e.fake.SendMention("G1", ch, "U1", fmt.Sprintf("question %d", i))
		e.posts(ch, 1)
		e.Drain()
	}
	calls, in, out := e.ProviderTotals()
	_, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C6", UserID: "U1", Name: "usage"})
	st, err := e.fake.WaitMessages(wait, 1, fakediscord.ForInteraction(tok))
	if err != nil {
		t.Fatal(err)
	}
	m := usageLine.FindStringSubmatch(st[len(st)-1].Content)
	if m == nil {
		t.Fatalf("no usage line in %q", st[len(st)-1].Content)
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64); return v }
	if n(m[1]) != calls || n(m[2]) != in || n(m[3]) != out || calls < 4 {
		t.Fatalf("U3: /usage says %s calls, %s in, %s out; the provider's log %d, %d, %d", m[1], m[2], m[3], calls, in, out)
	}
}

// covers M1: the conversation tests again on Postgres.
func TestE2E_DiscordConversationsOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_H1_DiscordThreadContext,
		TestE2E_H1_DiscordReplyChain,
		TestE2E_I5_DiscordImageToTextOnlyPrimary,
		TestE2E_I2_DiscordLargeAttachmentRefused,
		TestE2E_R16_DiscordSummaries,
		TestE2E_U3_DiscordUsageMatchesTheProvider,
	)
}
