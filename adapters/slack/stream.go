package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Streaming (L2, L3). A reply grows in one message of the thread through Slack's
// chat.startStream / chat.appendStream / chat.stopStream: the first text starts
// the stream at once, later text is appended at most every StreamInterval and
// within each method's per-minute limit (window.go), coalescing whatever arrived
// meanwhile. When the text stops extending what was streamed (an attempt failed
// and another model answers), the stream is stopped and the message edited in
// place with chat.update; further text edits it again. Finish edits the message
// into the final answer (mrkdwn, split at Slack's size into further messages),
// so the latest version of every message holds the final answer only.
//
// Where Slack refuses the streaming methods (a workspace or channel without
// them, a missing scope) or they are over their limit, nothing is shown until
// Finish, which posts the answer whole: no text is lost, none is shown twice.

// maxStreamed caps what one streamed message shows (Slack's markdown_text limit
// per call is 12,000 characters); the rest appears with the final answer.
const maxStreamed = 12000

// refusalMemory is how long a channel (or the workspace) that refused to stream
// is not asked again.
const refusalMemory = 10 * time.Minute

// workspaceRefusals are chat.startStream errors that no channel of the workspace
// will answer differently.
var workspaceRefusals = map[string]bool{"unknown_method": true, "not_allowed": true, "not_allowed_token_type": true,
	"missing_scope": true, "method_deprecated": true, "deprecated_endpoint": true, "feature_not_enabled": true,
	"enterprise_is_restricted": true}

// StartStream implements adapters.Streamer. It returns at once; the Slack calls
// run on the stream's own goroutine, which ends with Finish or when Run ends.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" {
		return nil, errors.New("slack: stream without a channel in reply_to")
	}
	s := &stream{a: a, t: t, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if t.ThreadTS == "" || t.slash() || !a.mayStream(t.Channel) {
		// Slack streams only replies in a thread: a top-level DM gets the whole
		// answer at the end.
		s.mode = modeWhole
	}
	s.team, s.user = recipient(in)
	// ctx is the attempt's that wrote the first words: the stream outlives it
	// (a fallback may finish it). Finish ends it, or the end of Run.
	parent := a.runCtx()
	if parent == nil {
		parent = context.WithoutCancel(ctx)
	}
	s.ctx, s.cancel = context.WithCancel(parent)
	s.throttleCtx, s.endThrottle = context.WithCancel(s.ctx)
	go s.run()
	return s, nil
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

type streamMode int

const (
	modeIdle      streamMode = iota // nothing shown yet
	modeStreaming                   // a stream is open: text is appended
	modeEdited                      // the stream is stopped: the message is edited
	modeWhole                       // no stream: Finish posts the answer whole
	modeLost                        // the message can no longer be edited: Finish posts anew
)

// stream is one growing reply.
type stream struct {
	a          *Adapter
	t          target
	team, user string
	kick       chan struct{} // wakes the goroutine (cap 1)
	done       chan struct{} // closed when the goroutine ends
	ctx        context.Context
	cancel     context.CancelFunc
	// throttleCtx ends a wait between two writes early when Finish is called.
	throttleCtx context.Context
	endThrottle context.CancelFunc

	mu     sync.Mutex
	want   string             // the whole text so far (Update)
	final  *adapters.Outbound // set by Finish
	result error              // Finish's outcome, set before done closes

	// Owned by the goroutine.
	mode   streamMode
	ts     string // the message
	shown  string // what was streamed (mode streaming)
	edited string // what the message shows (mode edited)
	last   time.Time
}

// Update implements adapters.Stream: it never waits for Slack.
func (s *stream) Update(ctx context.Context, text string) error {
	s.mu.Lock()
	if s.final == nil {
		s.want = text
	}
	s.mu.Unlock()
	s.wake()
	return nil
}

// Finish implements adapters.Stream: it waits until final replaced what was
// shown (or was posted whole), or ctx ends.
func (s *stream) Finish(ctx context.Context, final adapters.Outbound) error {
	s.mu.Lock()
	if s.final == nil {
		s.final = &final
	}
	s.mu.Unlock()
	s.endThrottle()
	s.wake()
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.result
	case <-ctx.Done():
		// The caller gives up (and may post final itself): stop posting it here.
		s.cancel()
		return ctx.Err()
	}
}

func (s *stream) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *stream) run() {
	var result error
	defer func() {
		s.mu.Lock()
		s.result = result
		s.mu.Unlock()
		close(s.done)
		s.cancel()
	}()
	for {
		select {
		case <-s.kick:
		case <-s.ctx.Done():
			result = s.ctx.Err()
			return
		}
		s.mu.Lock()
		final := s.final
		s.mu.Unlock()
		if final != nil {
			result = s.finish(*final)
			return
		}
		s.step()
	}
}

// latest returns the text Update gave last.
func (s *stream) latest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want
}

// finishing reports whether Finish was called.
func (s *stream) finishing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.final != nil
}

// step brings the message up to the latest text, once.
func (s *stream) step() {
	switch s.mode {
	case modeIdle:
		s.start()
	case modeStreaming:
		if !s.pace() {
			return
		}
		safe := streamSafe(s.latest())
		if strings.HasPrefix(safe, s.shown) {
			s.appendText(safe)
			return
		}
		// L3: the text was replaced (another attempt answers): what was
		// streamed gives way to the new text in the same message.
		if s.stop() {
			s.edit(s.latest())
		}
	case modeEdited:
		if s.pace() {
			s.edit(s.latest())
		}
	}
}

// pace waits until the next write is due; false when Finish cut the wait short
// (the final text is written instead).
func (s *stream) pace() bool {
	if d := s.last.Add(s.a.cfg.StreamInterval).Sub(s.a.cfg.Now()); d > 0 {
		if s.a.cfg.Sleep(s.throttleCtx, d) != nil {
			return false
		}
	}
	return !s.finishing()
}

// start opens the stream with the first text. A refusal, an error or a full
// per-minute window makes it a whole post at Finish: nothing was shown.
func (s *stream) start() {
	safe := streamSafe(s.latest())
	if safe == "" {
		return
	}
	done, wait := s.a.limits.reserve("chat.startStream")
	if wait > 0 {
		s.a.log.Debug("slack streams over their per-minute limit; this answer is posted whole", "channel", s.t.Channel)
		s.mode = modeWhole
		return
	}
	opts := []slackgo.MsgOption{slackgo.MsgOptionTS(s.t.ThreadTS), slackgo.MsgOptionMarkdownText(safe)}
	if s.team != "" {
		opts = append(opts, slackgo.MsgOptionRecipientTeamID(s.team))
	}
	if s.user != "" {
		opts = append(opts, slackgo.MsgOptionRecipientUserID(s.user))
	}
	_, ts, err := s.a.api.StartStreamContext(s.ctx, s.t.Channel, opts...)
	done()
	s.last = s.a.cfg.Now()
	if err != nil {
		s.mode = modeWhole
		var se slackgo.SlackErrorResponse
		if errors.As(err, &se) {
			s.a.refuseStreaming(s.t.Channel, se.Err)
			return
		}
		var rl *slackgo.RateLimitedError
		if errors.As(err, &rl) {
			// Other replicas share the workspace's limit: none here until Slack allows.
			s.a.limits.pause("chat.startStream", min(max(rl.RetryAfter, time.Second), s.a.cfg.MaxRetryWait))
		}
		s.a.log.Debug("slack chat.startStream failed; the answer is posted whole", "err", safeErr(err))
		return
	}
	s.mode, s.ts, s.shown = modeStreaming, ts, safe
	s.a.posted(s.t)
}

// appendText streams what safe adds to what was shown, within the limits of
// one call and of one message.
func (s *stream) appendText(safe string) {
	delta := safe[len(s.shown):]
	if room := maxStreamed - utf8.RuneCountInString(s.shown); utf8.RuneCountInString(delta) > room {
		delta = truncateAt(delta, room)
	}
	if delta == "" {
		return
	}
	done, err := s.limited("chat.appendStream")
	if err != nil {
		return
	}
	err = s.a.call(s.ctx, "chat.appendStream", "", func(ctx context.Context) error {
		_, _, err := s.a.api.AppendStreamContext(ctx, s.t.Channel, s.ts, slackgo.MsgOptionMarkdownText(delta))
		return err
	})
	done()
	s.last = s.a.cfg.Now()
	if err != nil {
		// The stream is gone (stopped by the person, expired): go on by editing.
		s.a.log.Debug("slack chat.appendStream failed; editing the message instead", "err", err)
		if s.stop() {
			s.edit(s.latest())
		}
		return
	}
	s.shown += delta
}

// stop ends the open stream. A stream that is no longer streaming is fine; any
// other failure leaves a message that cannot be edited (modeLost).
func (s *stream) stop() bool {
	done, err := s.limited("chat.stopStream")
	if err != nil {
		s.mode = modeLost
		return false
	}
	err = s.a.call(s.ctx, "chat.stopStream", "", func(ctx context.Context) error {
		_, _, err := s.a.api.StopStreamContext(ctx, s.t.Channel, s.ts)
		return err
	})
	done()
	s.last = s.a.cfg.Now()
	var se slackgo.SlackErrorResponse
	if err != nil && !(errors.As(err, &se) && se.Err == "message_not_in_streaming_state") {
		s.a.log.Warn("slack chat.stopStream failed; the answer will be posted anew", "err", err)
		s.mode = modeLost
		return false
	}
	// The message now shows the streamed Markdown: the next edit replaces it.
	s.mode, s.edited = modeEdited, ""
	return true
}

// edit shows text (converted to mrkdwn, first part only) in the message.
func (s *stream) edit(text string) {
	parts := adapters.Split(ToMrkdwn(text), maxChunk, utf8.RuneCountInString)
	if len(parts) == 0 || parts[0] == s.edited {
		return
	}
	if err := s.update(parts[0]); err != nil {
		s.a.log.Warn("slack chat.update failed; the answer will be posted anew", "err", err)
		s.mode = modeLost
		return
	}
	s.edited = parts[0]
}

// update replaces the message's text, and removes the blocks streaming left
// (chat.update keeps a message's blocks unless it is given new ones).
func (s *stream) update(text string) error {
	done, err := s.limited("chat.update")
	if err != nil {
		return err
	}
	err = s.a.call(s.ctx, "chat.update", "", func(ctx context.Context) error {
		_, _, _, err := s.a.api.UpdateMessageContext(ctx, s.t.Channel, s.ts,
			slackgo.MsgOptionText(text, false), slackgo.MsgOptionBlocks([]slackgo.Block{}...))
		return err
	})
	done()
	s.last = s.a.cfg.Now()
	return err
}

// limited waits until method fits its per-minute limit; the caller runs done
// when the call returns.
func (s *stream) limited(method string) (done func(), err error) {
	for {
		done, d := s.a.limits.reserve(method)
		if d <= 0 {
			return done, nil
		}
		if err := s.a.cfg.Sleep(s.ctx, d); err != nil {
			return nil, fmt.Errorf("%s: waiting for its limit: %w", method, err)
		}
	}
}

// finish replaces what was shown with final. Its first part goes into the
// message, the rest follows as further messages; with nothing shown (or a
// message that cannot be edited) it is posted whole.
func (s *stream) finish(final adapters.Outbound) error {
	ctx := s.ctx
	if s.mode == modeStreaming && !s.stop() {
		return s.postAnew(ctx, final)
	}
	switch s.mode {
	case modeIdle, modeWhole:
		return s.a.Send(ctx, final)
	case modeLost:
		return s.postAnew(ctx, final)
	}
	// modeEdited
	if strings.TrimSpace(final.Text) == "" {
		return s.delete(ctx)
	}
	parts := adapters.Split(ToMrkdwn(final.Text), maxChunk, utf8.RuneCountInString)
	if parts[0] != s.edited {
		if err := s.update(parts[0]); err != nil {
			s.a.log.Warn("slack chat.update of the final answer failed; posting it anew", "err", err)
			return s.postAnew(ctx, final)
		}
		s.edited = parts[0]
	}
	if err := s.a.postParts(ctx, s.t, parts[1:]); err != nil {
		return fmt.Errorf("slack: the rest of a streamed answer: %w", err)
	}
	return nil
}

// postAnew posts final as new messages and removes the message that could not
// be edited, so the partial text does not stay beside the answer.
func (s *stream) postAnew(ctx context.Context, final adapters.Outbound) error {
	if err := s.a.Send(ctx, final); err != nil {
		return err
	}
	if err := s.delete(ctx); err != nil {
		s.a.log.Warn("slack: a partial streamed message could not be removed", "err", err)
	}
	return nil
}

func (s *stream) delete(ctx context.Context) error {
	if s.ts == "" {
		return nil
	}
	done, err := s.limited("chat.delete")
	if err != nil {
		return err
	}
	defer done()
	return s.a.call(ctx, "chat.delete", "", func(ctx context.Context) error {
		_, _, err := s.a.api.DeleteMessageContext(ctx, s.t.Channel, s.ts)
		return err
	})
}

// mayStream reports whether channel is not known to refuse streaming.
func (a *Adapter) mayStream(channel string) bool {
	a.refusedMu.Lock()
	defer a.refusedMu.Unlock()
	now := a.cfg.Now()
	for _, k := range []string{"", channel} {
		if until, ok := a.refused[k]; ok {
			if now.Before(until) {
				return false
			}
			delete(a.refused, k)
		}
	}
	return true
}

// refuseStreaming remembers that Slack refused to stream in channel (or, for
// errors no channel answers differently, anywhere in the workspace).
func (a *Adapter) refuseStreaming(channel, code string) {
	key := channel
	if workspaceRefusals[code] {
		key = ""
	}
	a.refusedMu.Lock()
	a.refused[key] = a.cfg.Now().Add(refusalMemory)
	a.refusedMu.Unlock()
	a.log.Warn("slack refused to stream a reply; answers there are posted whole for a while",
		"channel", channel, "error", code, "workspace_wide", key == "", "for", refusalMemory)
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

// truncateAt returns at most n runes of s.
func truncateAt(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
