package slack

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Streaming (L2, L3, A5) uses Slack's documented calls only
// (https://docs.slack.dev/reference/methods/chat.startStream, .../chat.appendStream,
// .../chat.stopStream), never chat.update: a reply that no longer extends what
// was streamed (another attempt answers) is deleted and streamed again below the
// fallback notice. Where Slack will not stream, the answer is posted whole at
// Finish. A refusal no retry changes is remembered for refusalMemory (for the
// channel or the workspace) and a 429 pauses chat.startStream; any other error
// costs only this answer its stream, so one flaky call never turns streaming
// off, and a lasting failure costs one call per answer, inside the window.

const (
	// maxStreamed: markdown_text takes at most 12,000 characters a call and a
	// message's markdown 12,000 in all
	// (https://docs.slack.dev/reference/block-kit/blocks/markdown-block); a
	// longer answer continues in a further streamed message.
	maxStreamed    = 12000
	streamInterval = time.Second // least time between two writes to a stream
	refusalMemory  = 10 * time.Minute
)

// refusals are chat.startStream errors retrying cannot change: true for the
// workspace, false for the channel.
var refusals = map[string]bool{"unknown_method": true, "not_allowed": true, "not_allowed_token_type": true,
	"missing_scope": true, "method_deprecated": true, "deprecated_endpoint": true, "feature_not_enabled": true,
	"enterprise_is_restricted": true, "method_not_supported_for_channel_type": false, "channel_type_not_supported": false,
	"not_in_channel": false, "is_archived": false, "restricted_action": false}

// StartStream implements adapters.Streamer. The Slack calls run on the reply's
// own goroutine, which ends with Finish or when Run ends.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" {
		return nil, errors.New("slack: stream without a channel in reply_to")
	}
	// ctx is the attempt's that wrote the first words: the stream outlives it.
	parent := cmp.Or(a.runCtx(), context.WithoutCancel(ctx))
	if parent.Err() != nil {
		return nil, errors.New("slack: not running")
	}
	// Slack needs the team and user to stream in a channel.
	s := &streamSurface{a: a, t: t, user: strings.TrimPrefix(in.User, "slack:")}
	if p := strings.Split(in.SessionKey, ":"); len(p) >= 2 && p[0] == "slack" {
		s.team = p[1]
	}
	r := live.New(s, live.Options{Limit: maxStreamed, Every: streamInterval, Now: a.cfg.Now, Sleep: a.cfg.Sleep,
		Log: a.log, Render: func(_ adapters.Kind, md string) string { return streamSafe(md) },
		// Slack streams only replies in a thread; a refused channel waits.
		Whole: t.ThreadTS == "" || t.slash() || !a.mayStream(t.Channel)})
	a.bg.Go(func() { r.Run(parent) })
	return r, nil
}

// streamSurface is one thread as a live.Surface and live.Appender.
type streamSurface struct {
	a          *Adapter
	t          target
	team, user string
}

// Post starts a stream holding md; past chat.startStream's window it fails at
// once, and the answer is posted whole.
func (s *streamSurface) Post(ctx context.Context, _ int, md string) (string, error) {
	done, wait := s.a.limits.Reserve("chat.startStream")
	if wait > 0 {
		return "", errors.New("slack: chat.startStream over its per-minute limit")
	}
	opts := []slackgo.MsgOption{slackgo.MsgOptionTS(s.t.ThreadTS), slackgo.MsgOptionMarkdownText(md)}
	if s.team != "" {
		opts = append(opts, slackgo.MsgOptionRecipientTeamID(s.team))
	}
	if s.user != "" {
		opts = append(opts, slackgo.MsgOptionRecipientUserID(s.user))
	}
	_, ts, err := s.a.api.StartStreamContext(ctx, s.t.Channel, opts...)
	done()
	if err == nil {
		s.a.posted(s.t)
		return ts, nil
	}
	if workspace, known := refusals[slackCode(err)]; known {
		s.a.refuseStreaming(s.t.Channel, slackCode(err), workspace)
	}
	if d := s.a.retryAfter(err); d > 0 {
		// Other replicas share the workspace's limit: none here until Slack allows.
		s.a.limits.Pause("chat.startStream", d)
	}
	return "", safeErr(err)
}

// Append streams more text into the message.
func (s *streamSurface) Append(ctx context.Context, ts, md string) error {
	return gone(s.a.limited(ctx, "chat.appendStream", func(ctx context.Context) error {
		_, _, err := s.a.api.AppendStreamContext(ctx, s.t.Channel, ts, slackgo.MsgOptionMarkdownText(md))
		return err
	}))
}

// Stop ends the stream with the rest of its text.
func (s *streamSurface) Stop(ctx context.Context, ts, md string) error {
	var opts []slackgo.MsgOption
	if md != "" {
		opts = append(opts, slackgo.MsgOptionMarkdownText(md))
	}
	err := s.a.limited(ctx, "chat.stopStream", func(ctx context.Context) error {
		_, _, err := s.a.api.StopStreamContext(ctx, s.t.Channel, ts, opts...)
		return err
	})
	if md == "" && slackCode(err) == "message_not_in_streaming_state" {
		return nil // ended already (by the person, or it expired), with all its text
	}
	return gone(err)
}

// Delete removes the message.
func (s *streamSurface) Delete(ctx context.Context, ts string) error {
	err := s.a.limited(ctx, "chat.delete", func(ctx context.Context) error {
		_, _, err := s.a.api.DeleteMessageContext(ctx, s.t.Channel, ts)
		return err
	})
	if slackCode(err) == "message_not_found" {
		return nil // gone already
	}
	return err
}

// Send posts out as Adapter.Send does (the answer whole, or a notice).
func (s *streamSurface) Send(ctx context.Context, out adapters.Outbound) error {
	out.ReplyTo = s.t.encode()
	return s.a.Send(ctx, out)
}

// limited runs one call of method inside its per-minute window and call's 429
// handling.
func (a *Adapter) limited(ctx context.Context, method string, fn func(context.Context) error) error {
	done, err := a.limits.Take(ctx, method)
	if err != nil {
		return err
	}
	defer done()
	return a.call(ctx, method, "", fn)
}

// gone marks the errors of a stream that can no longer take text.
func gone(err error) error {
	switch slackCode(err) {
	case "message_not_in_streaming_state", "message_not_found":
		return errors.Join(live.ErrGone, err)
	}
	return err
}

// slackCode is the error code of a Slack error answer ("" for none).
func slackCode(err error) string {
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}

// mayStream reports whether channel is not known to refuse streaming.
func (a *Adapter) mayStream(channel string) bool {
	return a.limits.Left("stream:") <= 0 && a.limits.Left("stream:"+channel) <= 0
}

// refuseStreaming remembers that Slack refused to stream in channel or workspace.
func (a *Adapter) refuseStreaming(channel, code string, workspace bool) {
	key := "stream:" + channel
	if workspace {
		key = "stream:"
	}
	a.limits.Pause(key, refusalMemory)
	a.log.Warn("slack refused to stream a reply; answers there are posted whole for a while",
		"channel", channel, "error", code, "workspace_wide", workspace, "for", refusalMemory)
}

// streamSafe makes model Markdown safe to stream (T3): "<" and "@" get a
// zero-width space after them (no <!here>, <@U…>, <#C…> or @channel can form)
// and a link to anything but an http(s) or mailto URL is broken up. It is
// prefix-stable, so the stream only ever appends: a tail it cannot judge yet
// ("](htt") is held back.
func streamSafe(md string) string {
	const zw = "\u200b"
	var b strings.Builder
	b.Grow(len(md) + 8)
	for i := 0; i < len(md); i++ {
		c := md[i]
		switch c {
		case '<', '@':
			b.WriteByte(c)
			b.WriteString(zw)
		case ']':
			if i == len(md)-1 {
				return b.String() // "]" may still become "]("
			}
			if md[i+1] == '(' {
				ok, decided := linkScheme(md[i+2:])
				if !decided {
					return b.String()
				}
				if !ok {
					b.WriteString("]" + zw)
					continue
				}
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// linkScheme judges a Markdown link's target by its start: whether it may be a
// link, and whether that can be told yet.
func linkScheme(rest string) (ok, decided bool) {
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if n := min(len(rest), len(scheme)); strings.EqualFold(rest[:n], scheme[:n]) {
			return true, n == len(scheme)
		}
	}
	return false, true
}

// Thinking is the status shown while a turn runs (L1).
const Thinking = "is thinking…"

// statusCallTimeout bounds one status call, so a slow Slack cannot keep an
// indicator alive long after its turn.
const statusCallTimeout = 5 * time.Second

// StartProgress implements adapters.Progress: the thread shows Slack's
// assistant status (assistant.threads.setStatus) until the answer is posted,
// which clears it, or Stop; it is set again every StatusRefresh, as Slack drops
// it after two minutes. A rate-limited status call is dropped, and none is made
// until its Retry-After has passed: progress never holds up a reply. A message
// outside a thread has no status.
func (a *Adapter) StartProgress(ctx context.Context, in adapters.Inbound) adapters.Indicator {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" || t.ThreadTS == "" || t.slash() {
		return live.NoIndicator{}
	}
	ind := live.NewIndicator(func(ctx context.Context, status string) error {
		return a.setStatus(ctx, t, status)
	}, Thinking, a.cfg.StatusRefresh, 0)
	key := threadKey(t.Channel, t.ThreadTS)
	a.indicators.Store(key, ind)
	go func() { // ends with Stop
		defer a.indicators.CompareAndDelete(key, ind)
		ind.Run(context.WithoutCancel(ctx))
	}()
	return ind
}

// posted quiets the thread's indicator: Slack cleared the status, and a refresh
// would put "is thinking…" under an answer already growing.
func (a *Adapter) posted(t target) {
	if v, ok := a.indicators.Load(threadKey(t.Channel, t.ThreadTS)); ok && t.ThreadTS != "" {
		v.(*live.Indicator).Quiet()
	}
}

var errDropped = errors.New("slack: status calls paused after a 429")

// setStatus makes one assistant.threads.setStatus call; a 429 pauses them all.
func (a *Adapter) setStatus(ctx context.Context, t target, status string) error {
	const method = "assistant.threads.setStatus"
	if a.limits.Left(method) > 0 {
		return errDropped
	}
	ctx, cancel := context.WithTimeout(ctx, statusCallTimeout)
	defer cancel()
	err := a.api.SetAssistantThreadsStatusContext(ctx, slackgo.AssistantThreadsSetStatusParameters{
		ChannelID: t.Channel, ThreadTS: t.ThreadTS, Status: status,
	})
	if d := a.retryAfter(err); d > 0 {
		a.limits.Pause(method, d)
		a.log.Debug("slack status rate limited; dropped", "retry_after", d)
	} else if err != nil {
		a.log.Debug("slack status not set", "channel", t.Channel, "err", safeErr(err))
	}
	return err
}
