package fakeslack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

func slackErr(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// The streaming methods follow Slack's rules: a stream is a reply in a thread,
// in a channel it names its recipient, it only grows while streaming, and a
// message still streaming is stopped before it is edited. The latest version
// of a message is what Messages shows; every call is logged with its arguments.
func TestStreaming_FollowsSlacksRules(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()
	start := func(ch string, opts ...slack.MsgOption) (string, error) {
		_, ts, err := api.StartStreamContext(ctx, ch, opts...)
		return ts, err
	}
	md := slack.MsgOptionMarkdownText
	if _, err := start("C1", md("hi")); slackErr(err) != "invalid_arguments" {
		t.Fatalf("stream outside a thread: %v", err)
	}
	if _, err := start("C1", slack.MsgOptionTS("1.1"), md("hi")); slackErr(err) != "missing_recipient_team_id" {
		t.Fatalf("channel stream without recipient: %v", err)
	}
	if _, err := start("C1", slack.MsgOptionTS("1.1"), slack.MsgOptionRecipientTeamID("T1"), md("hi")); slackErr(err) != "missing_recipient_user_id" {
		t.Fatalf("channel stream without recipient user: %v", err)
	}
	if _, err := start("D1", slack.MsgOptionTS("1.1"), md("a DM needs no recipient")); err != nil {
		t.Fatal(err)
	}
	ts, err := start("C1", slack.MsgOptionTS("1.1"), slack.MsgOptionRecipientTeamID("T1"), slack.MsgOptionRecipientUserID("U1"), md("hel"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, md("lo")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("x", false)); slackErr(err) != "cant_update_message" {
		t.Fatalf("update while streaming: %v", err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, md(strings.Repeat("x", MaxMarkdownText+1))); slackErr(err) != "msg_too_long" {
		t.Fatalf("oversized append: %v", err)
	}
	if _, _, err := api.StopStreamContext(ctx, "C1", ts); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, md("more")); slackErr(err) != "message_not_in_streaming_state" {
		t.Fatalf("append after stop: %v", err)
	}
	ms := s.Messages("C1", "1.1")
	if len(ms) != 1 || ms[0].Shown() != "hello" || ms[0].Streaming || !ms[0].Streamed || len(ms[0].Versions) != 2 {
		t.Fatalf("messages = %+v", ms)
	}

	// chat.update keeps the streamed blocks unless it replaces them.
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("new text", false)); err != nil {
		t.Fatal(err)
	}
	if got := s.Messages("C1", "1.1")[0].Shown(); !strings.Contains(got, "hello") || !strings.Contains(got, "new text") {
		t.Fatalf("update without blocks = %q, want both texts shown", got)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("final", false), slack.MsgOptionBlocks([]slack.Block{}...)); err != nil {
		t.Fatal(err)
	}
	if got := s.Messages("C1", "1.1")[0]; got.Shown() != "final" || got.Blocks != nil {
		t.Fatalf("update with empty blocks = %+v", got)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C1", ts); err != nil || len(s.Messages("C1", "1.1")) != 0 {
		t.Fatalf("delete: %v", err)
	}

	calls := s.CallsOf("chat.startStream")
	if len(calls) != 5 || calls[4].Arg("recipient_user_id") != "U1" || calls[4].Arg("markdown_text") != "hel" ||
		calls[0].Error != "invalid_arguments" || calls[4].Error != "" || calls[4].Arg("token") != "" {
		t.Fatalf("startStream calls = %+v", calls)
	}
}

// RefuseStreaming models a workspace without the streaming methods.
func TestStreaming_Refused(t *testing.T) {
	s := New()
	s.RefuseStreaming = "unknown_method"
	s.Start()
	defer s.Close()
	_, _, err := client(s).StartStreamContext(context.Background(), "D1", slack.MsgOptionTS("1.1"), slack.MsgOptionMarkdownText("x"))
	if slackErr(err) != "unknown_method" || len(s.AllMessages()) != 0 {
		t.Fatalf("err = %v, messages %+v", err, s.AllMessages())
	}
}

// Past a method's tier limit within a minute of the fake's clock, Slack answers
// 429 with the wait until a call leaves the minute.
func TestTierLimits_PerMethodPerMinute(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	s := New()
	s.Now = func() time.Time { return now }
	s.MethodLimits = map[string]int{"chat.startStream": 2}
	s.Start()
	defer s.Close()
	api := client(s)
	for i := range 3 {
		_, _, err := api.StartStreamContext(context.Background(), "D1", slack.MsgOptionTS("1.1"), slack.MsgOptionMarkdownText("x"))
		var rl *slack.RateLimitedError
		switch {
		case i < 2 && err != nil:
			t.Fatalf("call %d: %v", i, err)
		case i == 2 && (!errors.As(err, &rl) || rl.RetryAfter != 50*time.Second):
			t.Fatalf("call 3: %v, want 429 with Retry-After 50s", err)
		}
		now = now.Add(5 * time.Second)
	}
	if th := s.Throttles(); len(th) != 1 || th[0].Method != "chat.startStream" || th[0].Injected {
		t.Fatalf("throttles = %+v", th)
	}
	if DefaultMethodLimits["chat.appendStream"] != Tier4 || DefaultMethodLimits["chat.update"] != Tier3 {
		t.Fatal("default tiers changed")
	}
}

// An assistant thread status shows until the bot posts in the thread, is
// cleared with "", and expires after two minutes of the fake's clock.
func TestAssistantStatus_ClearedByAReplyOrTimeout(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	s := New()
	s.Now = func() time.Time { return now }
	s.PostInterval = -1
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()
	set := func(thread, status string) error {
		return api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C1", ThreadTS: thread, Status: status})
	}
	if err := set("", "x"); slackErr(err) != "invalid_thread_ts" {
		t.Fatalf("status without thread: %v", err)
	}
	if err := set("1.1", "is thinking…"); err != nil || s.Status("C1", "1.1") != "is thinking…" {
		t.Fatalf("status = %q, %v", s.Status("C1", "1.1"), err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("answer", false), slack.MsgOptionTS("1.1")); err != nil {
		t.Fatal(err)
	}
	if got := s.Status("C1", "1.1"); got != "" {
		t.Fatalf("status after a reply = %q", got)
	}
	_ = set("1.1", "again")
	if err := set("1.1", ""); err != nil || s.Status("C1", "1.1") != "" {
		t.Fatalf("cleared status = %q, %v", s.Status("C1", "1.1"), err)
	}
	_ = set("1.1", "long wait")
	now = now.Add(StatusTimeout)
	if got := s.Status("C1", "1.1"); got != "" {
		t.Fatalf("status after two minutes = %q", got)
	}
}

// setSuggestedPrompts takes one to four prompts with a title and a message;
// setTitle needs a thread and a title.
func TestAssistant_PromptsAndTitle(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()
	p := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: "D1", ThreadTS: "1.1"}
	for range MaxSuggestedPrompts + 1 {
		p.AddPrompt("t", "m")
	}
	if err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, p); slackErr(err) != "invalid_arguments" {
		t.Fatalf("five prompts: %v", err)
	}
	p.Prompts = p.Prompts[:2]
	if err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: "D1", ThreadTS: "1.1"}); slackErr(err) != "invalid_arguments" {
		t.Fatalf("empty title: %v", err)
	}
	if err := api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: "D1", ThreadTS: "1.1", Title: "x"}); err != nil {
		t.Fatal(err)
	}
	if c := s.CallsOf("assistant.threads.setTitle"); len(c) != 2 || c[1].Arg("title") != "x" {
		t.Fatalf("title calls = %+v", c)
	}
}

// A static select outside Slack's sizes is refused; Pick delivers the
// block_actions payload slack-go parses, only for an option that was offered
// and only to whom an ephemeral message was shown.
func TestPick_DeliversBlockActions(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()
	sel := func(value, label string) slack.MsgOption {
		opt := slack.NewOptionBlockObject(value, slack.NewTextBlockObject(slack.PlainTextType, label, false, false), nil)
		el := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, nil, "act", opt)
		return slack.MsgOptionBlocks(slack.NewActionBlock("blk", el))
	}
	if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("x", false), sel(strings.Repeat("v", 151), "l")); slackErr(err) != "invalid_blocks" {
		t.Fatalf("oversized value: %v", err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("pick", false), sel("/model x", "x"), slack.MsgOptionTS("1.1")); err != nil {
		t.Fatal(err)
	}
	p := s.Posts()[len(s.Posts())-1]
	if _, err := s.Pick(p, "U1", "/model y"); err == nil {
		t.Fatal("picked an option not offered")
	}
	if _, err := s.Pick(p, "U2", "/model x"); err == nil {
		t.Fatal("picked in someone else's ephemeral message")
	}

	sm := socketmode.New(api, socketmode.OptionPingInterval(2*time.Second))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(rctx) }()
	if err := s.WaitConnected(1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sent, err := s.Pick(p, "U1", "/model x")
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case evt := <-sm.Events:
			if evt.Type != socketmode.EventTypeInteractive {
				continue
			}
			cb := evt.Data.(slack.InteractionCallback)
			a := cb.ActionCallback.BlockActions
			if cb.Type != slack.InteractionTypeBlockActions || len(a) != 1 || a[0].SelectedOption.Value != "/model x" ||
				a[0].BlockID != "blk" || a[0].ActionID != "act" || cb.User.ID != "U1" || cb.Channel.ID != "C1" ||
				cb.Container.ThreadTs != "1.1" || !cb.Container.IsEphemeral || cb.ResponseURL == "" {
				t.Fatalf("callback = %+v", cb)
			}
			sm.Ack(*evt.Request)
			if _, err := s.WaitAck(sent.EnvelopeID, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			cancel()
			<-done
			return
		case <-time.After(5 * time.Second):
			t.Fatal("no interactive event")
		}
	}
}

// An app installed from a manifest has its scopes and events and nothing more;
// a channel the bot left refuses posts; text and blocks past Slack's sizes are
// refused.
func TestRules_ScopesMembershipSizes(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	if err := s.InstallManifest([]byte("oauth_config:\n  scopes:\n    bot: [chat:write, channels:read]\n" +
		"settings:\n  event_subscriptions:\n    bot_events: [app_mention, message.im]\n")); err != nil {
		t.Fatal(err)
	}
	if !s.OnlyMentions {
		t.Fatal("a manifest without message.channels still gets channel messages")
	}
	api := client(s)
	ctx := context.Background()
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false)); err != nil {
		t.Fatalf("chat:write granted, post refused: %v", err)
	}
	err := api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: "D1", ThreadTS: "1.1", Title: "x"})
	if slackErr(err) != "missing_scope" {
		t.Fatalf("setTitle without assistant:write = %v", err)
	}
	if _, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C1"}); err != nil {
		t.Fatalf("channels:read granted: %v", err)
	}
	if _, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "G1"}); slackErr(err) != "missing_scope" {
		t.Fatalf("a private channel without groups:read = %v", err)
	}
	if c := s.CallsOf("conversations.info"); c[len(c)-1].Error != "missing_scope" {
		t.Fatalf("calls = %+v", c)
	}
	s.Leave("C2")
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("hi", false)); slackErr(err) != "not_in_channel" {
		t.Fatalf("post where the bot is no member = %v", err)
	}
	if ch, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C2"}); err != nil || ch.IsMember {
		t.Fatalf("conversations.info of a left channel = %+v, %v", ch, err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText(strings.Repeat("x", MaxText+1), false)); slackErr(err) != "msg_too_long" {
		t.Fatalf("text past 40,000 = %v", err)
	}
	blocks := make([]slack.Block, MaxBlocks+1)
	for i := range blocks {
		blocks[i] = slack.NewDividerBlock()
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(blocks...)); slackErr(err) != "invalid_blocks" {
		t.Fatalf("51 blocks = %v", err)
	}
}
