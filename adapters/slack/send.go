package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Send posts one outbound message: replies and errors into the thread (split at
// Slack's limits, Markdown as mrkdwn), a notice as its own quiet context block
// there, a report to the channel ReplyTo names, and a slash command's answers
// ephemerally, to whoever typed it. Posts keep Slack's pace and wait out 429s: a
// reply is held until Slack takes it, never dropped for being rate limited.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) error {
	t := decodeTarget(out.ReplyTo)
	switch {
	case t.Channel == "":
		return errors.New("slack: outbound without a channel in reply_to")
	case strings.TrimSpace(out.Text) == "":
		return nil
	case out.Kind == adapters.KindReport:
		return a.postChunks(ctx, target{Channel: t.Channel}, ToMrkdwn(out.Text))
	case len(out.Choices) > 0:
		return a.sendPicker(ctx, t, out)
	case t.slash():
		return a.postChunks(ctx, t, ToMrkdwn(out.Text))
	}
	if t.ThreadTS != "" && !strings.HasPrefix(t.Channel, "D") {
		a.mem.threads.Add(threadKey(t.Channel, t.ThreadTS))
	}
	if out.Kind == adapters.KindNotice {
		return a.postNotice(ctx, t, out.Text)
	}
	return a.postChunks(ctx, t, ToMrkdwn(out.Text)) // reply, error and anything new
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

// postNotice posts a notice as a context block; the block is verbatim so
// names in it never become mentions (T3).
func (a *Adapter) postNotice(ctx context.Context, t target, text string) error {
	// The block alone: a top-level text beside it is shown by some clients
	// and read back by every API reader as a second copy (W1: a notice is
	// said once); Slack builds the notification text from the block ("do
	// not include a top-level text field if the message has blocks, and
	// allow Slack attempt to build it for you",
	// https://docs.slack.dev/reference/methods/chat.postMessage).
	block := slackgo.NewContextBlock("",
		slackgo.NewTextBlockObject(slackgo.MarkdownType, truncateRunes(ToMrkdwn(text), maxContextText), false, true))
	if err := a.postMessage(ctx, t, slackgo.MsgOptionBlocks(block)); err != nil {
		return fmt.Errorf("slack: posting notice: %w", err)
	}
	return nil
}

// postEphemeral shows a message to t.User alone: chat.postEphemeral, or the
// slash command's response_url where the bot cannot post (not a member).
func (a *Adapter) postEphemeral(ctx context.Context, t target, opts ...slackgo.MsgOption) error {
	in := slices.Clip(opts)
	if t.ThreadTS != "" {
		in = append(in, slackgo.MsgOptionTS(t.ThreadTS))
	}
	err := a.call(ctx, "chat.postEphemeral", "", func(ctx context.Context) error {
		_, err := a.api.PostEphemeralContext(ctx, t.Channel, t.User, in...)
		return err
	})
	if code := slackCode(err); code != "" && t.ResponseURL != "" {
		a.log.Debug("slack: postEphemeral refused; using response_url", "err", code)
		err = a.call(ctx, "response_url", "", func(ctx context.Context) error {
			_, _, err := a.api.PostMessageContext(ctx, t.Channel,
				append(slices.Clip(opts), slackgo.MsgOptionResponseURL(t.ResponseURL, slackgo.ResponseTypeEphemeral))...)
			return safeErr(err)
		})
	}
	return err
}

// call runs one Web API call within Slack's limits: a chat.postMessage waits for
// its channel's turn and pace, every call while its method is paused. A 429
// means Slack did not act, so the call is tried again after Retry-After (which
// pauses the method for every channel) until it goes through, ctx ends or
// MaxRateLimitRetries is spent. Other errors are not retried: a timed-out post
// may have landed.
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
// MaxRetryWait); 0 for any other error.
func (a *Adapter) retryAfter(err error) time.Duration {
	var rl *slackgo.RateLimitedError
	if !errors.As(err, &rl) {
		return 0
	}
	return min(max(rl.RetryAfter, time.Second), a.cfg.MaxRetryWait)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s // the usual case: no copy
	}
	return string([]rune(s)[:n-1]) + "…"
}

// target is where answers go, in ReplyTo as "<channel>|<thread_ts>|<user>|<response_url>"
// without trailing empty fields: a thread is "C123|1712.000100", and a bare channel
// id ("C0123" or "slack:C0123") is an admin report's target. user and response_url
// are a native slash command's, whose answers are ephemeral.
type target struct{ Channel, ThreadTS, User, ResponseURL string }

func (t target) encode() string {
	s := t.Channel + "|" + t.ThreadTS + "|" + t.User + "|" + t.ResponseURL
	return strings.TrimRight(s, "|")
}

// slash reports whether the target is a slash command's.
func (t target) slash() bool { return t.User != "" }

func decodeTarget(s string) target {
	p := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "slack:"), "|", 4)
	p = append(p, "", "", "")
	return target{Channel: p[0], ThreadTS: p[1], User: p[2], ResponseURL: p[3]}
}

// Per-minute limits of the live-reply methods per workspace, in Slack's tiers
// (https://docs.slack.dev/apis/web-api/rate-limits/), kept by live.Window so a
// busy workspace gets slower streams rather than 429s.
var methodLimits = map[string]int{
	"chat.startStream":  20,  // Tier 2 (https://docs.slack.dev/reference/methods/chat.startStream)
	"chat.appendStream": 100, // Tier 4 (https://docs.slack.dev/reference/methods/chat.appendStream)
	"chat.stopStream":   20,  // Tier 2 (https://api.slack.com/methods/chat.stopStream)
	"chat.delete":       50,  // Tier 3 (https://docs.slack.dev/reference/methods/chat.delete)
	"views.publish":     100, // Tier 4 (https://docs.slack.dev/reference/methods/views.publish)
}

// pacer keeps chat.postMessage to about one message per second per channel, and
// a 429 pauses its method for every channel until its Retry-After has passed.
// One post holds its channel's lane from its first try to its last retry, so a
// channel's posts go out in order and a slow channel delays no other; the next
// post there waits a full interval from this one's answer, after Slack saw it
// (a token bucket reserved before the request would let two posts land closer
// than Slack allows when the first is slow).
type pacer struct {
	interval     time.Duration
	*live.Pauses // method → no call before; "post:<channel>" → the channel's next post

	mu    sync.Mutex
	lanes map[string]*lane
}

// lane is one channel's turn (a one-slot semaphore) while posts hold or want it.
type lane struct {
	channel string
	turn    chan struct{}
	users   int // guarded by pacer.mu
}

func newPacer(interval time.Duration, p *live.Pauses) *pacer {
	return &pacer{interval: interval, Pauses: p, lanes: map[string]*lane{}}
}

// acquire waits for channel's turn.
func (p *pacer) acquire(ctx context.Context, channel string) (*lane, error) {
	p.mu.Lock()
	l := p.lanes[channel]
	if l == nil {
		l = &lane{channel: channel, turn: make(chan struct{}, 1)}
		p.lanes[channel] = l
	}
	l.users++
	p.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		p.leave(l)
		return nil, ctx.Err()
	}
}

// release gives the turn to the channel's next post.
func (p *pacer) release(l *lane) {
	<-l.turn
	p.leave(l)
}

func (p *pacer) leave(l *lane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(p.lanes, l.channel)
	}
}

// wait blocks while method is paused and, for a lane, until its channel's pace
// allows the next post.
func (p *pacer) wait(ctx context.Context, method string, l *lane) error {
	if err := p.Wait(ctx, method, 0); err != nil || l == nil {
		return err
	}
	return p.Wait(ctx, "post:"+l.channel, 0)
}

// posted records that l's channel just took a post (or a try Slack refused).
func (p *pacer) posted(l *lane) {
	if l != nil {
		p.Pause("post:"+l.channel, p.interval)
	}
}
