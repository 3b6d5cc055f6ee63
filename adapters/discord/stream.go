package discord

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// defaultEditEvery is the least time between two edits of a growing reply: at
// most one per second, inside the five per five seconds Discord's message
// buckets usually hold; the transport still honours the bucket Discord reports.
const defaultEditEvery = time.Second

// StartStream prepares a reply that grows as the model writes it (L2), drawn by
// the live kit: the first text is posted as a reply to the asking message, later
// text edits it at most once per EditEvery (the newest text wins), past 2,000
// characters the text continues in further messages, and a text that does not
// extend what is shown replaces it in place (L3); continuation messages no
// longer needed are deleted. Answers to application commands are not streamed.
func (a *Adapter) StartStream(_ context.Context, in adapters.Inbound) (adapters.Stream, error) {
	if strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return nil, errors.New("discord: answers to application commands are not streamed")
	}
	ch, ref := target(in.ReplyTo, in.SessionKey)
	if ch == "" {
		return nil, errors.New("discord: stream without a channel")
	}
	r := live.New(&streamSurface{a: a, ch: ch, ref: ref}, live.Options{Limit: MaxMessageLen, Length: textLen,
		Every: a.cfg.EditEvery, Log: a.log, Render: func(_ adapters.Kind, text string) string {
			if strings.TrimSpace(text) == "" {
				return "(empty message)"
			}
			return text
		}})
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

func (s *streamSurface) Post(ctx context.Context, i int, text string) (string, error) {
	ref := ""
	if i == 0 {
		ref = s.ref
	}
	m, err := s.a.postOne(ctx, s.ch, ref, text, 0, nil)
	if err != nil {
		return "", err
	}
	if i == 0 {
		// The post cleared "is typing…"; renewed now, it would outlive the
		// answer, since edits do not clear it.
		s.a.stopTyping(s.ch)
	}
	return m.ID, nil
}

// Edit replaces the message's text; one deleted meanwhile is gone.
func (s *streamSurface) Edit(ctx context.Context, id, text string) error {
	e := &discordgo.MessageEdit{ID: id, Channel: s.ch, Content: &text, AllowedMentions: noMentions()}
	err := s.a.link.Call(ctx, "edit message", "", func(opts ...discordgo.RequestOption) error {
		_, err := s.a.rest.ChannelMessageEditComplex(e, opts...)
		return err
	})
	if restCode(err) == discordgo.ErrCodeUnknownMessage {
		return errors.Join(live.ErrGone, err)
	}
	return err
}

// Delete deletes one of the bot's messages; one already gone is no error.
func (s *streamSurface) Delete(ctx context.Context, id string) error {
	err := s.a.link.Call(ctx, "delete message", "", func(opts ...discordgo.RequestOption) error {
		return s.a.rest.ChannelMessageDelete(s.ch, id, opts...)
	})
	if restCode(err) == discordgo.ErrCodeUnknownMessage {
		return nil
	}
	return err
}

// Send posts out (the answer whole, or the notice above it) where the stream is.
func (s *streamSurface) Send(ctx context.Context, out adapters.Outbound) error {
	out.ReplyTo = s.ch + replySep + s.ref
	return s.a.Send(ctx, out)
}
