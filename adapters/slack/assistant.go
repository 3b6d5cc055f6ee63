package slack

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"
)

// Slack's AI app container ("Agents & AI Apps", the manifest's assistant_view):
// a person opens a new chat with the bot in a side panel; Slack says so with
// assistant_thread_started and the chat is a thread of the app's DM channel.
// The bot offers the configured suggested prompts there, names the thread after
// its first question, and treats each such thread as its own session
// ("slack:<team>:<dm channel>:<thread_ts>") instead of the DM's one session.

// maxSuggestedPrompts is how many prompts Slack shows
// (https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts).
const maxSuggestedPrompts = 4

// maxTitle bounds a thread title taken from a question.
const maxTitle = 60

// assistantCallTimeout bounds one assistant.threads call.
const assistantCallTimeout = 10 * time.Second

// assistantStarted handles assistant_thread_started: the thread is remembered as
// an assistant thread and gets the suggested prompts.
func (a *Adapter) assistantStarted(ctx context.Context, raw json.RawMessage) {
	var outer struct {
		EventID string `json:"event_id"`
		Event   struct {
			Thread struct {
				UserID    string `json:"user_id"`
				ChannelID string `json:"channel_id"`
				ThreadTS  string `json:"thread_ts"`
			} `json:"assistant_thread"`
		} `json:"event"`
	}
	if json.Unmarshal(raw, &outer) != nil {
		return
	}
	th := outer.Event.Thread
	if th.ChannelID == "" || th.ThreadTS == "" || a.mem.seen.Seen("ev:"+outer.EventID) {
		return
	}
	a.mem.assistant.Add(threadKey(th.ChannelID, th.ThreadTS))
	prompts := a.cfg.SuggestedPrompts[:min(len(a.cfg.SuggestedPrompts), maxSuggestedPrompts)]
	if len(prompts) == 0 {
		return
	}
	params := slackgo.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: th.ChannelID, ThreadTS: th.ThreadTS}
	for _, p := range prompts {
		params.AddPrompt(truncateRunes(p, maxTitle), p)
	}
	a.background(ctx, func(ctx context.Context) {
		if err := a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params); err != nil {
			a.log.Warn("slack: suggested prompts not set", "channel", th.ChannelID, "err", safeErr(err))
		}
	})
}

// isAssistantThread reports whether a DM thread is a chat of the AI app
// container: one Slack announced, one whose message says so, or one the bot
// already holds a conversation for (after a restart).
func (a *Adapter) isAssistantThread(ev innerEvent, team string) bool {
	if ev.ThreadTS == "" {
		return false
	}
	if a.mem.assistant.Has(threadKey(ev.Channel, ev.ThreadTS)) || (len(ev.AssistantThread) > 0 && string(ev.AssistantThread) != "null") {
		return true
	}
	return a.knownThread(ev, team, a.mem.assistant)
}

// titleOnce names an assistant thread after its first question.
func (a *Adapter) titleOnce(channel, threadTS, question string) {
	if a.mem.assistant.Has("title:"+threadKey(channel, threadTS)) || strings.TrimSpace(question) == "" {
		return
	}
	a.mem.assistant.Add("title:" + threadKey(channel, threadTS))
	title := truncateRunes(strings.Join(strings.Fields(question), " "), maxTitle)
	a.background(a.runCtx(), func(ctx context.Context) {
		err := a.api.SetAssistantThreadsTitleContext(ctx, slackgo.AssistantThreadsSetTitleParameters{
			ChannelID: channel, ThreadTS: threadTS, Title: title,
		})
		if err != nil {
			a.log.Debug("slack: thread title not set", "channel", channel, "err", safeErr(err))
		}
	})
}

// background runs fn on a goroutine Run waits for, with a bounded context.
func (a *Adapter) background(ctx context.Context, fn func(context.Context)) {
	if ctx == nil || ctx.Err() != nil {
		return
	}
	a.bg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, assistantCallTimeout)
		defer cancel()
		fn(ctx)
	})
}
