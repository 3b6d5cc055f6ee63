package slack

import (
	"context"
	"errors"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Streaming (L2, L3, A5) with Slack's documented calls only
// (https://docs.slack.dev/reference/methods/chat.startStream, .../chat.appendStream,
// .../chat.stopStream): the live kit's growing reply is drawn with
// chat.startStream (a message per part of at most maxStreamed characters),
// chat.appendStream (what the text adds) and chat.stopStream (the rest, then the
// stream ends: a finished answer is the streamed Markdown). Text that no longer
// extends what was streamed (another attempt answers) is not edited: the
// stream is deleted and started again, below the fallback notice. Streams are
// never edited with chat.update.
//
// Where Slack will not stream, nothing shows until Finish, which posts the answer
// whole: a refusal that no retry changes (the method or scope is missing, the
// channel type cannot stream) is remembered for refusalMemory, for the channel or
// the workspace; a 429 pauses chat.startStream for its Retry-After; any other
// error (a timeout, a 5xx, an unknown code) costs this answer its stream only,
// and the next answer tries again. So one flaky call never turns streaming off
// for everyone, and a persistent failure costs one call per answer, inside the
// method's per-minute window.

// maxStreamed caps what one streamed message holds: markdown_text takes at most
// 12,000 characters a call, and a message's markdown at most 12,000 in all
// (https://docs.slack.dev/reference/block-kit/blocks/markdown-block); a longer
// answer continues in a further streamed message.
const maxStreamed = 12000

// streamInterval is the least time between two writes to a streamed reply.
const streamInterval = time.Second

// refusalMemory is how long a refusal to stream is remembered.
const refusalMemory = 10 * time.Minute

// refusals are chat.startStream errors retrying cannot change; the workspace
// ones no channel answers differently.
var refusals = map[string]bool{"unknown_method": true, "not_allowed": true, "not_allowed_token_type": true,
	"missing_scope": true, "method_deprecated": true, "deprecated_endpoint": true, "feature_not_enabled": true,
	"enterprise_is_restricted": true, "method_not_supported_for_channel_type": false, "channel_type_not_supported": false,
	"not_in_channel": false, "is_archived": false, "restricted_action": false}

// StartStream implements adapters.Streamer. It returns at once; the Slack calls
// run on the reply's own goroutine, which ends with Finish or when Run ends.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" {
		return nil, errors.New("slack: stream without a channel in reply_to")
	}
	// ctx is the attempt's that wrote the first words: the stream outlives it.
	parent := a.runCtx()
	if parent == nil {
		parent = context.WithoutCancel(ctx)
	}
	if parent.Err() != nil {
		return nil, errors.New("slack: not running")
	}
	s := &streamSurface{a: a, t: t}
	s.team, s.user = recipient(in)
	r := live.New(s, live.Options{Limit: maxStreamed, Every: streamInterval, Now: a.cfg.Now, Sleep: a.cfg.Sleep,
		Log: a.log, Render: func(_ adapters.Kind, md string) string { return streamSafe(md) },
		// Slack streams only replies in a thread; a refused channel waits.
		Whole: t.ThreadTS == "" || t.slash() || !a.mayStream(t.Channel)})
	a.bg.Go(func() { r.Run(parent) })
	return r, nil
}

// recipient is who a streamed reply is for: the team and user Slack needs to
// stream in a channel.
func recipient(in adapters.Inbound) (team, user string) {
	user = strings.TrimPrefix(in.User, "slack:")
	parts := strings.Split(in.SessionKey, ":")
	if len(parts) >= 2 && parts[0] == "slack" {
		team = parts[1]
	}
	return team, user
}

// streamSurface is one thread as a live.Surface and live.Appender.
type streamSurface struct {
	a          *Adapter
	t          target
	team, user string
}

// Post starts a stream holding md. Past chat.startStream's per-minute window it
// fails at once, and the answer is posted whole.
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
		return nil
	}
	return err
}

// Send posts out as Send does (the answer whole, or the notice above it).
func (s *streamSurface) Send(ctx context.Context, out adapters.Outbound) error {
	out.ReplyTo = s.t.encode()
	return s.a.Send(ctx, out)
}

// limited runs one call of method inside its per-minute window (waiting for a
// slot) and Slack's 429s (call).
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

// refuseStreaming remembers that Slack refused to stream in channel (or in the
// whole workspace).
func (a *Adapter) refuseStreaming(channel, code string, workspace bool) {
	key := "stream:" + channel
	if workspace {
		key = "stream:"
	}
	a.limits.Pause(key, refusalMemory)
	a.log.Warn("slack refused to stream a reply; answers there are posted whole for a while",
		"channel", channel, "error", code, "workspace_wide", workspace, "for", refusalMemory)
}

// streamSafe makes model Markdown safe to stream (SPEC T3): the streamed text is
// rendered by Slack as Markdown, so "<" and "@" get a zero-width space after them
// (no <!here>, <@U…>, <#C…> or @channel can form) and a link to anything but an
// http(s) or mailto URL is broken up. It is prefix-stable: text it returns for a
// prefix is a prefix of what it returns for a longer text, so the stream only
// ever appends; a tail it cannot judge yet ("](htt") is held back.
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
				switch linkScheme(md[i+2:]) {
				case schemeUndecided:
					return b.String()
				case schemeRefused:
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

type schemeVerdict int

const (
	schemeAllowed schemeVerdict = iota
	schemeRefused
	schemeUndecided
)

// linkScheme judges the target of a Markdown link by its start.
func linkScheme(rest string) schemeVerdict {
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		n := min(len(rest), len(scheme))
		if strings.EqualFold(rest[:n], scheme[:n]) {
			if n == len(scheme) {
				return schemeAllowed
			}
			return schemeUndecided
		}
	}
	return schemeRefused
}

// Thinking is the status shown while a turn runs (L1).
const Thinking = "is thinking…"

// statusCallTimeout bounds one status call: a slow Slack must not keep an
// indicator (and its goroutine) alive long after its turn.
const statusCallTimeout = 5 * time.Second

// StartProgress implements adapters.Progress: the thread shows Slack's
// assistant status ("detour is thinking…", assistant.threads.setStatus) until
// the answer is posted, which clears it, or Stop. Slack drops a status after two
// minutes without a message, so it is set again every StatusRefresh while the
// turn runs. The calls run on the indicator's own goroutine; one that Slack rate
// limits is dropped, not retried, and no indicator makes a status call until
// its Retry-After has passed: progress never waits and never holds up a reply.
// A message outside a thread (a top-level direct message) has no status.
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

// posted tells the thread's running indicator that the bot posted there: Slack
// cleared the status, and refreshing it would put "is thinking…" under an
// answer that is already growing. A later Status shows again.
func (a *Adapter) posted(t target) {
	if v, ok := a.indicators.Load(threadKey(t.Channel, t.ThreadTS)); ok && t.ThreadTS != "" {
		v.(*live.Indicator).Quiet()
	}
}

// errDropped is a status call not made: Slack asked to wait.
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
