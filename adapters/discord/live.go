package discord

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/adapters/live"
)

// defaultEditEvery: one edit per second fits the five per five seconds Discord's
// message buckets usually hold; the transport still honours the reported bucket.
const defaultEditEvery = time.Second

// StartStream prepares a reply that grows as the model writes it (L2, the live
// kit): the first text replies to the asking message, later text edits it at
// most once per EditEvery, past 2,000 characters it continues in further
// messages, and a text that does not extend what is shown replaces it (L3).
// Answers to application commands are not streamed.
func (a *Adapter) StartStream(_ context.Context, in adapters.Inbound) (adapters.Stream, error) {
	if strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return nil, errors.New("discord: answers to application commands are not streamed")
	}
	ch, ref := target(in.ReplyTo, in.SessionKey)
	if ch == "" {
		return nil, errors.New("discord: stream without a channel")
	}
	r := live.New(&streamSurface{a: a, ch: ch, ref: ref}, live.Options{Limit: MaxMessageLen, Length: textLen,
		Every: a.cfg.EditEvery, Log: a.log, Render: func(_ adapters.Kind, text string) string { return orEmpty(text) }})
	if !a.goOwned(r.Run) {
		return nil, errors.New("discord: not running")
	}
	return r, nil
}

// streamSurface is one channel or thread as a live.Surface and live.Editor.
type streamSurface struct {
	a       *Adapter
	ch, ref string // the channel, and the asking message the first part replies to
}

// Post posts a part, the first as the reply to the asking message. The post
// cleared "is typing…", which renewed would outlive the answer.
func (s *streamSurface) Post(ctx context.Context, i int, text string) (string, error) {
	ref := s.ref
	if i > 0 {
		ref = ""
	}
	m, err := s.a.postOne(ctx, s.ch, ref, text, 0, nil)
	if err != nil {
		return "", err
	}
	s.a.stopTyping(s.ch)
	return m.ID, nil
}

// Edit replaces the message's text; one deleted meanwhile is gone.
func (s *streamSurface) Edit(ctx context.Context, id, text string) error {
	e := &discordgo.MessageEdit{ID: id, Channel: s.ch, Content: &text, AllowedMentions: noMentions()}
	_, err := s.a.rest.ChannelMessageEditComplex(e, discordgo.WithContext(ctx))
	if link.Code(err) == discordgo.ErrCodeUnknownMessage {
		return errors.Join(live.ErrGone, err)
	}
	return link.Err("edit message", "", err)
}

// Delete deletes one of the bot's messages; one already gone is no error.
func (s *streamSurface) Delete(ctx context.Context, id string) error {
	err := s.a.rest.ChannelMessageDelete(s.ch, id, discordgo.WithContext(ctx))
	if link.Code(err) == discordgo.ErrCodeUnknownMessage {
		return nil
	}
	return link.Err("delete message", "", err)
}

// Send posts out (the answer whole, or the notice above it) where the stream is.
func (s *streamSurface) Send(ctx context.Context, out adapters.Outbound) error {
	out.ReplyTo = s.ch + replySep + s.ref
	return s.a.Send(ctx, out)
}

// Typing indicator: Discord shows one for about 10 seconds, or until the bot
// posts in the channel. A channel that refused it (no permission, gone) is not
// asked again for noTypingFor: every refusal counts toward Discord's 10,000
// invalid requests in 10 minutes.
const (
	typingEvery = 8 * time.Second
	typingMax   = 5 * time.Minute
	noTypingFor = time.Hour
)

// StartProgress shows "is typing…" in the conversation's channel (L1), renewed
// every 8 s, until Stop, the reply (or a streamed reply's first words), five
// minutes, or the end of Run. It returns at once: the typing calls run on their
// own goroutine, and one that would wait for a rate limit is dropped, so
// progress never delays the turn nor takes a bucket a reply needs. A channel
// that refuses it (401, 403, 404) is not asked again for an hour. Commands
// answered through an interaction already show "thinking…".
func (a *Adapter) StartProgress(_ context.Context, in adapters.Inbound) adapters.Indicator {
	ch, _ := target(in.ReplyTo, in.SessionKey)
	if in.Native || strings.HasPrefix(in.ReplyTo, interactionPrefix) || ch == "" || a.noTyping.Has(ch) {
		return live.NoIndicator{}
	}
	ind := live.NewIndicator(func(ctx context.Context, status string) error { return a.typeOnce(ctx, ch, status) },
		"typing", a.typingEvery, typingMax)
	if _, busy := a.typers.LoadOrStore(ch, ind); busy {
		return live.NoIndicator{} // another turn's indicator runs in the channel
	}
	started := a.goOwned(func(ctx context.Context) {
		defer a.endTyping(ch, ind)
		ind.Run(ctx)
	})
	if !started {
		a.endTyping(ch, ind)
		return live.NoIndicator{}
	}
	return typing{a: a, ch: ch, ind: ind}
}

// typing is one turn's typing indicator.
type typing struct {
	a   *Adapter
	ch  string
	ind *live.Indicator
}

// Status is shown nowhere: Discord has no status text for a bot, only the typing
// indicator, which keeps running through a wait.
func (typing) Status(string) {}

// Stop ends the typing indicator's renewal.
func (t typing) Stop() { t.a.endTyping(t.ch, t.ind) }

// typeOnce shows the typing indicator once ("" clears nothing: Discord has no
// call for it); under a rate limit it is dropped.
func (a *Adapter) typeOnce(ctx context.Context, ch, status string) error {
	if status == "" {
		return nil
	}
	err := a.rest.ChannelTyping(ch, discordgo.WithContext(link.Dropping(ctx)))
	if code := link.Status(err); code == 401 || code == 403 || code == 404 {
		a.noTyping.Add(ch)
		a.log.Info("discord refused the typing indicator; not asked again in this channel for a while",
			"channel_id", ch, "status", code, "for", noTypingFor)
		return live.ErrStop
	}
	if err != nil && ctx.Err() == nil {
		a.log.Debug("discord typing not shown", "channel_id", ch, "err", err)
	}
	return err
}

// stopTyping quiets the channel's indicator: the bot posted there.
func (a *Adapter) stopTyping(ch string) {
	if ind, ok := a.typers.Load(ch); ok {
		ind.(*live.Indicator).Quiet()
	}
}

// endTyping stops ind and forgets it as the channel's indicator.
func (a *Adapter) endTyping(ch string, ind *live.Indicator) {
	a.typers.CompareAndDelete(ch, ind)
	ind.Stop()
}
