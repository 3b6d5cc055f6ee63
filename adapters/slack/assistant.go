package slack

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"
)

// Slack's AI app container (the manifest's assistant_view): each chat opened in
// its side panel is a thread of the app's DM channel, announced by
// assistant_thread_started. It is offered the suggested prompts, named after
// its first question, and is its own session ("slack:<team>:<dm>:<thread_ts>").

const (
	// maxSuggestedPrompts is how many prompts Slack shows
	// (https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts).
	maxSuggestedPrompts  = 4
	maxTitle             = 60               // a thread title taken from a question
	assistantCallTimeout = 10 * time.Second // one background call
)

// assistantStarted remembers an announced chat and offers it the prompts.
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
// container: announced, marked so in its message, or a session (after a restart).
func (a *Adapter) isAssistantThread(ev innerEvent, team string) bool {
	return ev.ThreadTS != "" && (a.mem.assistant.Has(threadKey(ev.Channel, ev.ThreadTS)) ||
		(len(ev.AssistantThread) > 0 && string(ev.AssistantThread) != "null") || a.knownThread(ev, team, a.mem.assistant))
}

// titleOnce names an assistant thread after its first question.
func (a *Adapter) titleOnce(channel, threadTS, question string) {
	key := "title:" + threadKey(channel, threadTS)
	if a.mem.assistant.Has(key) || strings.TrimSpace(question) == "" {
		return
	}
	a.mem.assistant.Add(key)
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
