package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Send posts one outbound message. Replies go into the thread (split at Slack's
// limits, Markdown converted to mrkdwn); a notice is its own quiet message (a context
// block) in the same thread; errors go into the thread; reports go to the channel named
// by ReplyTo. Answers to a native slash command are ephemeral, shown only to the user
// who typed it. Posts keep Slack's pace (one per second per channel) and wait out
// HTTP 429s: a reply is held until Slack takes it, never dropped for being rate
// limited.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) error {
	t := decodeTarget(out.ReplyTo)
	if t.Channel == "" {
		return errors.New("slack: outbound without a channel in reply_to")
	}
	if strings.TrimSpace(out.Text) == "" {
		return nil
	}
	if out.Kind == adapters.KindReport {
		return a.postChunks(ctx, target{Channel: t.Channel}, ToMrkdwn(out.Text))
	}
	if len(out.Choices) > 0 {
		return a.sendPicker(ctx, t, out)
	}
	if t.slash() {
		return a.postChunks(ctx, t, ToMrkdwn(out.Text))
	}
	if t.ThreadTS != "" && !strings.HasPrefix(t.Channel, "D") {
		a.mem.threads.Add(threadKey(t.Channel, t.ThreadTS))
	}
	switch out.Kind {
	case adapters.KindNotice:
		return a.postNotice(ctx, t, out.Text)
	default: // reply, error and anything new
		return a.postChunks(ctx, t, ToMrkdwn(out.Text))
	}
}

// postChunks posts text in order, one message per chunk.
func (a *Adapter) postChunks(ctx context.Context, t target, text string) error {
	for i, chunk := range adapters.Split(text, maxChunk, utf8.RuneCountInString) {
		if err := a.postMessage(ctx, t, slackgo.MsgOptionText(chunk, false)); err != nil {
			return fmt.Errorf("slack: posting part %d: %w", i+1, err)
		}
	}
	return nil
}

// postMessage makes one chat.postMessage in t's thread, in the channel's pace;
// with t.User set, the message is ephemeral, for that user alone.
func (a *Adapter) postMessage(ctx context.Context, t target, opts ...slackgo.MsgOption) error {
	if t.User != "" {
		return a.postEphemeral(ctx, t, opts...)
	}
	if t.ThreadTS != "" {
		opts = append(opts, slackgo.MsgOptionTS(t.ThreadTS))
	}
	err := a.call(ctx, "chat.postMessage", t.Channel, func(ctx context.Context) error {
		_, _, err := a.api.PostMessageContext(ctx, t.Channel, opts...)
		return err
	})
	if err == nil {
		a.posted(t)
	}
	return err
}

// postNotice posts a status notice as a context block with a plain-text fallback.
// Both are escaped, and the block is verbatim so Slack does not turn names in it
// into mentions (T3).
func (a *Adapter) postNotice(ctx context.Context, t target, text string) error {
	fallback := escapeMrkdwn(truncateRunes(text, maxContextText))
	block := slackgo.NewContextBlock("",
		slackgo.NewTextBlockObject(slackgo.MarkdownType, truncateRunes(ToMrkdwn(text), maxContextText), false, true))
	if err := a.postMessage(ctx, t, slackgo.MsgOptionText(fallback, false), slackgo.MsgOptionBlocks(block)); err != nil {
		return fmt.Errorf("slack: posting notice: %w", err)
	}
	return nil
}

// postEphemeral shows a message to t.User alone where t answers:
// chat.postEphemeral, falling back to the slash command's response_url when the
// bot cannot post there (not a member).
func (a *Adapter) postEphemeral(ctx context.Context, t target, opts ...slackgo.MsgOption) error {
	in := slices.Clip(opts)
	if t.ThreadTS != "" {
		in = append(in, slackgo.MsgOptionTS(t.ThreadTS))
	}
	err := a.call(ctx, "chat.postEphemeral", "", func(ctx context.Context) error {
		_, err := a.api.PostEphemeralContext(ctx, t.Channel, t.User, in...)
		return err
	})
	var se slackgo.SlackErrorResponse
	if err != nil && errors.As(err, &se) && t.ResponseURL != "" {
		a.log.Debug("slack: postEphemeral refused; using response_url", "err", se.Err)
		err = a.call(ctx, "response_url", "", func(ctx context.Context) error {
			_, _, err := a.api.PostMessageContext(ctx, t.Channel,
				append(slices.Clip(opts), slackgo.MsgOptionResponseURL(t.ResponseURL, slackgo.ResponseTypeEphemeral))...)
			return safeErr(err)
		})
	}
	return err
}

// call runs one Web API call within Slack's limits. A chat.postMessage waits for
// its channel's turn and pace; every call waits while its method is paused
// workspace-wide. An HTTP 429 means Slack did not act, so the call is tried again
// after Retry-After (capped at MaxRetryWait) until it goes through, ctx ends, or
// MaxRateLimitRetries (0 = no limit) is spent; the wait pauses the method for
// every channel. Other errors are not retried, for the reverse reason: a timed-out
// post may have landed.
func (a *Adapter) call(ctx context.Context, method, channel string, fn func(context.Context) error) error {
	var l *lane
	if method == "chat.postMessage" && channel != "" {
		var err error
		if l, err = a.pace.acquire(ctx, channel); err != nil {
			return fmt.Errorf("%s: waiting for the channel's turn: %w", method, err)
		}
		defer a.pace.release(l)
	}
	for attempt := 0; ; attempt++ {
		if err := a.pace.wait(ctx, method, l); err != nil {
			return fmt.Errorf("%s: waiting to post: %w", method, err)
		}
		err := fn(ctx)
		a.pace.posted(l)
		if err == nil {
			return nil
		}
		wait := a.retryAfter(err)
		if wait == 0 || (a.cfg.MaxRateLimitRetries > 0 && attempt >= a.cfg.MaxRateLimitRetries) {
			return fmt.Errorf("%s: %w", method, safeErr(err))
		}
		a.pace.Pause(method, wait)
		a.log.Warn("slack rate limited; the message waits its turn", "method", method, "channel", channel,
			"retry_after", wait, "attempt", attempt+1)
	}
}

// retryAfter is the wait a 429 asks for (1 s when it names none, at most
// MaxRetryWait); 0 when err is not a 429.
func (a *Adapter) retryAfter(err error) time.Duration {
	var rl *slackgo.RateLimitedError
	if !errors.As(err, &rl) {
		return 0
	}
	return min(max(rl.RetryAfter, time.Second), a.cfg.MaxRetryWait)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// target is where answers go, carried in Inbound.ReplyTo / Outbound.ReplyTo as
// "<channel>|<thread_ts>|<user>|<response_url>". Trailing empty fields are dropped, so a
// thread reply target looks like "C123|1712.000100" and a bare channel id ("C0123",
// also accepted as "slack:C0123") is a valid target for admin reports. user (and
// response_url) are set only for native slash commands, whose answers are ephemeral.
type target struct {
	Channel     string
	ThreadTS    string
	User        string
	ResponseURL string
}

func (t target) encode() string {
	s := t.Channel + "|" + t.ThreadTS + "|" + t.User + "|" + t.ResponseURL
	return strings.TrimRight(s, "|")
}

// slash reports whether the target is a slash command's (answers are ephemeral).
func (t target) slash() bool { return t.User != "" }

func decodeTarget(s string) target {
	p := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "slack:"), "|", 4)
	p = append(p, "", "", "")
	return target{Channel: p[0], ThreadTS: p[1], User: p[2], ResponseURL: p[3]}
}
