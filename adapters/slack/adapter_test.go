package slack

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/goleak"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

func TestName(t *testing.T) {
	a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "slack" {
		t.Fatalf("Name() = %q", a.Name())
	}
	var _ adapters.Adapter = a
}

func TestNew_RejectsBadConfigWithoutEchoingSecrets(t *testing.T) { // covers P4
	cases := []Config{
		{AppToken: "xoxb-CANARY-wrong-kind", BotToken: canaryBot},
		{AppToken: canaryApp},
		{AppToken: canaryApp, BotToken: canaryBot, APIURL: "ftp://x/"},
	}
	for _, c := range cases {
		_, err := New(c)
		if err == nil {
			t.Fatalf("New(%+v) accepted a bad config", c.APIURL)
		}
		if strings.Contains(err.Error(), "CANARY") {
			t.Fatalf("error leaks a token: %v", err)
		}
	}
}

func TestMention_InboundAndReplyInThread(t *testing.T) {
	h := start(t, nil)
	sent := h.srv.Mention("C1", "U1", "  hello &lt;there&gt;", "")
	if _, err := h.srv.WaitAck(sent.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	in := h.recv()
	want := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:C1:" + sent.TS, User: "slack:U1",
		Text: "hello <there>", ReplyTo: "C1|" + sent.TS, EventID: "slack:msg:C1:" + sent.TS, Conversation: adapters.ConversationChannel}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("inbound\n got %+v\nwant %+v", in, want)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: "**Hi** there"})
	p, err := h.srv.WaitPost(wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "chat.postMessage" || p.Channel != "C1" || p.ThreadTS != sent.TS || p.Text != "*Hi* there" {
		t.Fatalf("post = %+v", p)
	}
	if p.Token != canaryBot {
		t.Fatalf("post used token %q, want the bot token", p.Token)
	}
}

func TestMention_InsideExistingThreadKeepsThatThread(t *testing.T) {
	h := start(t, nil)
	root := h.srv.NewTS()
	h.srv.Mention("C1", "U1", "/model openai/gpt-x", root)
	in := h.recv()
	if in.SessionKey != "slack:T1:C1:"+root || in.ReplyTo != "C1|"+root {
		t.Fatalf("inbound = %+v", in)
	}
	if in.Text != "/model openai/gpt-x" {
		t.Fatalf("mention not stripped: %q", in.Text)
	}
}

func TestThreadFollowUp_WithoutMention(t *testing.T) {
	h := start(t, nil)
	m := h.srv.Mention("C1", "U1", "start", "")
	first := h.recv()

	h.srv.ThreadMessage("C1", "U2", "!status", m.TS)
	in := h.recv()
	if in.SessionKey != first.SessionKey || in.Text != "!status" || in.User != "slack:U2" || in.ReplyTo != first.ReplyTo {
		t.Fatalf("follow-up = %+v (first %+v)", in, first)
	}

	// Not addressed to the bot: top-level chatter and a thread the bot never joined.
	h.srv.ChannelMessage("C1", "U1", "lunch?", "")
	h.srv.ThreadMessage("C1", "U1", "other thread", h.srv.NewTS())
	h.expectNothingBefore("marker-1")
}

func TestThreadFollowUp_AfterBotRepliedInThread(t *testing.T) {
	h := start(t, nil)
	root := h.srv.NewTS()
	// The bot posts into a thread it was not mentioned in (e.g. a report thread).
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C7|" + root, Text: "hello"})
	h.srv.ThreadMessage("C7", "U1", "thanks", root)
	if in := h.recv(); in.SessionKey != "slack:T1:C7:"+root {
		t.Fatalf("inbound = %+v", in)
	}
	// parent_user_id = bot also counts.
	root2 := h.srv.NewTS()
	h.srv.PushEvent(map[string]any{"type": "message", "channel_type": "channel", "channel": "C8",
		"user": "U1", "text": "reply to your post", "ts": h.srv.NewTS(), "thread_ts": root2, "parent_user_id": "UBOT"})
	if in := h.recv(); in.SessionKey != "slack:T1:C8:"+root2 {
		t.Fatalf("inbound = %+v", in)
	}
}

func TestDirectMessage(t *testing.T) {
	h := start(t, nil)
	dm := h.srv.DM("D1", "U1", "hi bot")
	in := h.recv()
	want := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:D1", User: "slack:U1", Text: "hi bot", ReplyTo: "D1",
		Direct: true, EventID: "slack:msg:D1:" + dm.TS, Conversation: adapters.ConversationDirect}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("inbound\n got %+v\nwant %+v", in, want)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "hello"})
	p, err := h.srv.WaitPost(wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Channel != "D1" || p.ThreadTS != "" || p.Ephemeral {
		t.Fatalf("post = %+v", p)
	}
}

func TestOwnAndBotMessagesIgnored(t *testing.T) {
	h := start(t, func(*Config) {})
	h.srv.EchoPosts = true // fake echoes the bot's posts back as message events
	m := h.srv.Mention("C1", "U1", "go", "")
	in := h.recv()
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "answer"})
	h.srv.BotMessage("C1", "<@UBOT> I am the bot", m.TS)
	// another bot, and edits/joins
	h.srv.PushEvent(map[string]any{"type": "message", "channel_type": "channel", "channel": "C1", "user": "U9",
		"bot_id": "BOTHER", "text": "<@UBOT> beep", "ts": h.srv.NewTS(), "thread_ts": m.TS})
	h.srv.PushEvent(map[string]any{"type": "message", "subtype": "bot_message", "channel_type": "channel",
		"channel": "C1", "text": "x", "ts": h.srv.NewTS(), "thread_ts": m.TS})
	h.srv.PushEvent(map[string]any{"type": "message", "subtype": "message_changed", "channel_type": "channel",
		"channel": "C1", "ts": h.srv.NewTS(), "message": map[string]any{"user": "U1", "text": "edited", "ts": m.TS}})
	h.srv.PushEvent(map[string]any{"type": "app_mention", "channel": "C1", "user": "U9", "bot_id": "BOTHER",
		"text": "<@UBOT> hi", "ts": h.srv.NewTS()})
	h.expectNothingBefore("marker-2")
}

func TestMentionAndMessageTwinDeliveredOnce(t *testing.T) {
	h := start(t, nil)
	ts := h.srv.NewTS()
	h.srv.PushEvent(map[string]any{"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@UBOT> twin", "ts": ts})
	h.srv.PushEvent(map[string]any{"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1",
		"text": "<@UBOT> twin", "ts": ts})
	if in := h.recv(); in.Text != "twin" {
		t.Fatalf("inbound = %+v", in)
	}
	h.expectNothingBefore("marker-3")
}

func TestRedeliveredEventDeliveredOnce(t *testing.T) {
	h := start(t, nil)
	m := h.srv.Mention("C1", "U1", "once", "")
	if in := h.recv(); in.Text != "once" {
		t.Fatalf("inbound = %+v", in)
	}
	re, err := h.srv.Redeliver(m.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.WaitAck(re.EnvelopeID, wait); err != nil {
		t.Fatal("redelivered envelope must still be acked:", err)
	}
	h.expectNothingBefore("marker-4")
}

func TestReconnectAfterDisconnect(t *testing.T) {
	h := start(t, nil)
	h.srv.Disconnect() // network drop
	if err := h.srv.WaitConnected(2, wait); err != nil {
		t.Fatal(err)
	}
	if h.srv.Opens() < 2 {
		t.Fatalf("apps.connections.open called %d times, want a fresh call per connection", h.srv.Opens())
	}
	h.srv.Mention("C1", "U1", "after drop", "")
	if in := h.recv(); in.Text != "after drop" {
		t.Fatalf("inbound = %+v", in)
	}
	// Slack's own refresh request.
	if err := h.srv.RequestDisconnect(); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.WaitConnected(3, wait); err != nil {
		t.Fatal(err)
	}
	h.srv.Mention("C1", "U1", "after refresh", "")
	if in := h.recv(); in.Text != "after refresh" {
		t.Fatalf("inbound = %+v", in)
	}
}

func TestRateLimitedPostRetriedOnce(t *testing.T) {
	h := start(t, nil)
	h.srv.RateLimitNext("chat.postMessage", 7)
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1|1.000001", Text: "after the wait"})
	posts := h.srv.Posts()
	if len(posts) != 1 || posts[0].Text != "after the wait" {
		t.Fatalf("posts = %+v, want exactly one", posts)
	}
	if got := h.srv.Calls("chat.postMessage"); got != 2 {
		t.Fatalf("chat.postMessage calls = %d, want 2 (429 then success)", got)
	}
	if s := h.sleepsSoFar(); len(s) != 1 || s[0] != 7*time.Second {
		t.Fatalf("sleeps = %v, want [7s]", s)
	}
}

func TestRateLimitRetriesAreBoundedAndCapped(t *testing.T) {
	h := start(t, func(c *Config) { c.MaxRateLimitRetries = 2; c.MaxRetryWait = 3 * time.Second })
	for range 5 {
		h.srv.RateLimitNext("chat.postMessage", 30)
	}
	err := h.a.Send(context.Background(), adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1|1.1", Text: "x"})
	if err == nil {
		t.Fatal("want an error after the retries are spent")
	}
	if len(h.srv.Posts()) != 0 || h.srv.Calls("chat.postMessage") != 3 {
		t.Fatalf("posts=%d calls=%d", len(h.srv.Posts()), h.srv.Calls("chat.postMessage"))
	}
	for _, d := range h.sleepsSoFar() {
		if d != 3*time.Second {
			t.Fatalf("wait %v not capped at 3s", d)
		}
	}
	// A cancelled context stops the wait.
	h2 := start(t, func(c *Config) { c.Sleep, c.Now = adapters.Sleep, time.Now })
	h2.srv.RateLimitNext("chat.postMessage", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = h2.a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1|1.1", Text: "x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestNoticeIsOwnContextBlockBeforeReply(t *testing.T) { // covers N4
	h := start(t, nil)
	m := h.srv.Mention("C1", "U1", "q", "")
	in := h.recv()
	notice := "↪️ model fallback: anthropic/claude-haiku-4-5 (selected openai/gpt-4o-mini; billing)"
	h.send(adapters.Outbound{Kind: adapters.KindNotice, ReplyTo: in.ReplyTo, Text: notice})
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "the answer", Model: "anthropic/claude-haiku-4-5"})
	posts, err := h.srv.WaitPosts(2, wait)
	if err != nil {
		t.Fatal(err)
	}
	n, r := posts[0], posts[1]
	if n.ThreadTS != m.TS || r.ThreadTS != m.TS || n.Channel != "C1" {
		t.Fatalf("not in the thread: %+v / %+v", n, r)
	}
	if n.Shown() != notice || n.Text != "" || r.Text != "the answer" {
		t.Fatalf("texts: %q (shown %q) / %q: want the notice once, in its block (W1)", n.Text, n.Shown(), r.Text)
	}
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(n.Blocks, &blocks); err != nil {
		t.Fatalf("notice blocks %s: %v", n.Blocks, err)
	}
	if len(blocks) != 1 || blocks[0].Type != "context" || len(blocks[0].Elements) != 1 ||
		blocks[0].Elements[0].Type != "mrkdwn" || blocks[0].Elements[0].Text != notice {
		t.Fatalf("notice blocks = %s", n.Blocks)
	}
	if r.Blocks != nil {
		t.Fatalf("reply must be plain text, got blocks %s", r.Blocks)
	}
}

func TestErrorAndReportPosting(t *testing.T) {
	h := start(t, nil)
	h.send(adapters.Outbound{Kind: adapters.KindError, ReplyTo: "C1|5.000001", Text: "all models are rate-limited"})
	h.send(adapters.Outbound{Kind: adapters.KindReport, ReplyTo: "C0ADMIN", Text: "# All models down\n- openai/gpt-x: billing"})
	h.send(adapters.Outbound{Kind: adapters.KindReport, ReplyTo: "slack:C0ADMIN2", Text: "second"})
	posts, err := h.srv.WaitPosts(3, wait)
	if err != nil {
		t.Fatal(err)
	}
	if posts[0].Channel != "C1" || posts[0].ThreadTS != "5.000001" {
		t.Fatalf("error post = %+v", posts[0])
	}
	if posts[1].Channel != "C0ADMIN" || posts[1].ThreadTS != "" || posts[1].Text != "*All models down*\n• openai/gpt-x: billing" {
		t.Fatalf("report post = %+v", posts[1])
	}
	if posts[2].Channel != "C0ADMIN2" {
		t.Fatalf("report post = %+v", posts[2])
	}
	if err := h.a.Send(context.Background(), adapters.Outbound{Kind: adapters.KindReply, Text: "x"}); err == nil {
		t.Fatal("Send without a target must fail")
	}
}

func TestLongReplySplitInThread(t *testing.T) {
	h := start(t, nil)
	var b strings.Builder
	for i := range 120 {
		b.WriteString("Paragraph ")
		b.WriteString(strings.Repeat("word ", 12))
		b.WriteString("\n\n")
		if i == 60 {
			b.WriteString("```go\n")
			for range 100 {
				b.WriteString("fmt.Println(\"a line of code\")\n")
			}
			b.WriteString("```\n\n")
		}
	}
	text := b.String()
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C1|9.000001", Text: text})
	posts := h.srv.Posts()
	if len(posts) < 3 {
		t.Fatalf("want the %d-char reply split, got %d posts", len(text), len(posts))
	}
	for i, p := range posts {
		if p.ThreadTS != "9.000001" || p.Channel != "C1" {
			t.Fatalf("part %d not in thread: %+v", i, p)
		}
		if n := utf8.RuneCountInString(p.Text); n > maxChunk {
			t.Fatalf("part %d has %d chars", i, n)
		}
		if strings.Count(p.Text, "```")%2 != 0 {
			t.Fatalf("part %d breaks a code fence:\n%s", i, p.Text)
		}
	}
	if got := strings.Count(joinTexts(posts), "a line of code"); got != 100 {
		t.Fatalf("code lines delivered = %d, want 100", got)
	}
}

func joinTexts(ps []fakeslack.Post) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Text)
	}
	return strings.Join(s, "\n")
}

func TestSlashCommandAckedAndAnsweredEphemeral(t *testing.T) {
	h := start(t, func(c *Config) { c.Models = func() []string { return []string{"openai/gpt-x", "anthropic/claude"} } })
	s := h.srv.Slash("/model", "openai/gpt-x", "C1", "U1")
	if _, err := h.srv.WaitAck(s.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	in := h.recv()
	if !in.Native || in.Text != "/model openai/gpt-x" || in.SessionKey != "slack:T1:C1" || in.User != "slack:U1" || in.Direct {
		t.Fatalf("inbound = %+v", in)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "model set: openai/gpt-x", Ephemeral: true})
	p, err := h.srv.WaitPost(wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "chat.postEphemeral" || !p.Ephemeral || p.Channel != "C1" || p.User != "U1" || p.Text != "model set: openai/gpt-x" {
		t.Fatalf("post = %+v", p)
	}

	// "/model" alone: the ack itself lists the models; the router still gets it.
	s2 := h.srv.Slash("/model", "", "C1", "U1")
	ack, err := h.srv.WaitAck(s2.EnvelopeID, wait)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ack.Payload), "anthropic/claude") {
		t.Fatalf("ack payload = %s", ack.Payload)
	}
	if in := h.recv(); in.Text != "/model" || !in.Native {
		t.Fatalf("inbound = %+v", in)
	}

	// Bot not in the channel: chat.postEphemeral fails, the response_url answers.
	h.srv.FailNext("chat.postEphemeral", "channel_not_found")
	h.srv.Slash("/status", "", "C2", "U1")
	in = h.recv()
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: in.ReplyTo, Text: "status: ok"})
	p, err = h.srv.WaitPost(wait, func(p fakeslack.Post) bool { return p.Method == "response_url" })
	if err != nil {
		t.Fatal(err)
	}
	if !p.Ephemeral || p.Text != "status: ok" {
		t.Fatalf("response_url post = %+v", p)
	}
}

func TestUnknownEnvelopeStillAcked(t *testing.T) {
	h := start(t, nil)
	s := h.srv.PushEvent(map[string]any{"type": "totally_new_event", "ts": "1.1"})
	if _, err := h.srv.WaitAck(s.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	h.expectNothingBefore("marker-5")
}

func TestRun_InvalidTokenErrorHasNoSecret(t *testing.T) { // covers P4
	srv := fakeslack.New()
	srv.BotToken = "xoxb-the-real-one"
	srv.Start()
	defer srv.Close()
	logs := &syncbuf.Buffer{}
	a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: srv.URL(),
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background(), make(chan adapters.Inbound))
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Run = %v, want invalid_auth", err)
	}
	if strings.Contains(err.Error()+logs.String(), "CANARY") {
		t.Fatalf("secret leaked: %v / %s", err, logs)
	}

	// Bad app token: socket mode gives up with invalid_auth.
	srv2 := fakeslack.New()
	srv2.AppToken = "xapp-the-real-one"
	srv2.Start()
	defer srv2.Close()
	a2, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: srv2.URL(),
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err = a2.Run(ctx, make(chan adapters.Inbound))
	if err == nil || strings.Contains(err.Error()+logs.String(), "CANARY") {
		t.Fatalf("Run = %v (logs %s)", err, logs)
	}
}

func TestRun_AuthTestRetriedOnTransientFailure(t *testing.T) {
	srv := fakeslack.New()
	srv.FailNext("auth.test", "internal_error") // answered second: the fake serves 429s first
	srv.RateLimitNext("auth.test", 4)
	srv.Start()
	defer srv.Close()
	var sleeps []time.Duration
	a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: srv.URL(), PingInterval: 2 * time.Second,
		Log:   slog.New(slog.DiscardHandler),
		Sleep: func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, make(chan adapters.Inbound)) }()
	if err := srv.WaitConnected(1, wait); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if srv.Calls("auth.test") != 3 || len(sleeps) != 2 || sleeps[0] != 4*time.Second || sleeps[1] != 2*time.Second {
		t.Fatalf("auth.test calls = %d, sleeps = %v", srv.Calls("auth.test"), sleeps)
	}
}

func TestRun_StopsOnCancel(t *testing.T) {
	before := goleak.IgnoreCurrent()
	h := start(t, nil)
	h.srv.Mention("C1", "U1", "hi", "")
	h.recv()
	h.stop()                     // asserts Run returned nil
	goleak.VerifyNone(t, before) // every goroutine of the adapter, slack-go and the fake ended
	if h.srv.Connects() != 1 {
		t.Fatalf("connects = %d", h.srv.Connects())
	}
}

func TestReplyTo_RoundTrip(t *testing.T) {
	cases := []struct {
		in   target
		want string
	}{
		{target{Channel: "C1", ThreadTS: "1.2"}, "C1|1.2"},
		{target{Channel: "D1"}, "D1"},
		{target{Channel: "C1", User: "U1", ResponseURL: "https://hooks.slack.com/x|y"}, "C1||U1|https://hooks.slack.com/x|y"},
	}
	for _, c := range cases {
		got := c.in.encode()
		if got != c.want {
			t.Fatalf("encode(%+v) = %q, want %q", c.in, got, c.want)
		}
		if back := decodeTarget(got); back != c.in {
			t.Fatalf("decode(%q) = %+v, want %+v", got, back, c.in)
		}
	}
	if d := decodeTarget("slack:C0123"); d.Channel != "C0123" || d.slash() {
		t.Fatalf("decode admin target = %+v", d)
	}
}

func TestSlashText(t *testing.T) {
	cases := []struct{ cmd, text, want string }{
		{"/model", " openai/gpt-x ", "/model openai/gpt-x"},
		{"/status", "", "/status"},
		{"/detour", "model openai/gpt-x", "/model openai/gpt-x"},
		{"/detour", "!status", "/status"},
		{"/detour", "", "/help"},
		{"/detour-status", "", "/status"},
		{"/detour_recover", "p1:main", "/recover p1:main"},
		{"/Model", "x", "/model x"},
	}
	for _, c := range cases {
		if got := slashText(c.cmd, c.text); got != c.want {
			t.Errorf("slashText(%q, %q) = %q, want %q", c.cmd, c.text, got, c.want)
		}
	}
}

// A reply in a thread the bot answered before a restart (so it is in no memory of
// this process) reaches the bot when the router knows the thread's session.
func TestThreadFollowUp_KnownSessionAfterRestart(t *testing.T) {
	h := start(t, nil)
	known := "slack:T1:C5:1700000000.000100"
	var asked []string
	var mu sync.Mutex
	h.a.SetSessionLookup(func(_ context.Context, key string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, key)
		return key == known
	})
	h.srv.ThreadMessage("C5", "U1", "still there?", "1700000000.000100")
	if in := h.recv(); in.SessionKey != known || in.Text != "still there?" {
		t.Fatalf("inbound = %+v", in)
	}
	h.srv.ThreadMessage("C5", "U1", "unrelated thread", "1700000000.000999")
	h.expectNothingBefore("marker-known")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("lookups %v, want one per unknown thread", asked)
	}
}

// A long model list in the slash command's ack is cut to a section's 3,000
// characters on a character boundary: Slack gets valid UTF-8.
func TestSlashAckPayload_CutsWholeCharacters(t *testing.T) {
	names := make([]string, 400)
	for i := range names {
		names[i] = "ñame/模型-" + strings.Repeat("é", i%7)
	}
	a := &Adapter{cfg: Config{Models: func() []string { return names }}}
	p, ok := a.slashAckPayload(socketmode.Event{Data: slackgo.SlashCommand{Command: "/model"}}).(map[string]any)
	if !ok {
		t.Fatal("no ack payload for /model")
	}
	text, _ := p["text"].(string)
	if !utf8.ValidString(text) || utf8.RuneCountInString(text) != maxSectionText || !strings.HasSuffix(text, "…") {
		t.Fatalf("ack text: valid %v, %d characters, ends %q", utf8.ValidString(text), utf8.RuneCountInString(text), text[len(text)-8:])
	}
}
