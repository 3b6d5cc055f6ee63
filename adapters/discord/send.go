package discord

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
)

// MaxMessageLen is Discord's content limit per message.
const MaxMessageLen = 2000

// Typing indicator renewal: Discord shows one for about 10 seconds.
const (
	typingEvery = 8 * time.Second
	typingMax   = 5 * time.Minute
)

// noMentions lets nothing in a posted message ping anyone (@everyone, @here, roles,
// users, nor the author of the message replied to): T3.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: false}
}

// Send posts one outbound message: replies and errors in the conversation's channel
// or thread, the first part referencing the message it answers (without a ping),
// notices as their own quiet message (suppress-notifications flag), reports to the
// admin channel named in ReplyTo. Answers to an application command replace the
// deferred "thinking" response, then continue as follow-ups; they are never posted
// in the channel, even when the deferral failed.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) error {
	text := out.Text
	if strings.TrimSpace(text) == "" {
		text = "(empty message)"
	}
	var flags discordgo.MessageFlags
	if out.Kind == adapters.KindNotice {
		flags = discordgo.MessageFlagsSuppressNotifications
		text = smallText(text)
	}
	chunks := adapters.Split(text, MaxMessageLen, textLen)

	if out.Kind == adapters.KindReport {
		ch := strings.TrimPrefix(out.ReplyTo, Name+":")
		if ch == "" {
			return errors.New("discord: report without an admin channel id")
		}
		return a.postChannel(ctx, ch, "", chunks, flags)
	}
	if rest, ok := strings.CutPrefix(out.ReplyTo, interactionPrefix); ok {
		id, _, _ := strings.Cut(rest, ":")
		return a.sendInteraction(ctx, id, out.Kind, chunks, flags, out.Ephemeral)
	}
	ch, msg := target(out.ReplyTo, out.SessionKey)
	if ch == "" {
		return errors.New("discord: outbound message without a channel")
	}
	ref := ""
	if out.Kind == adapters.KindReply || out.Kind == adapters.KindError {
		defer a.stopTyping(ch, nil) // the turn has answered
		ref = msg
	}
	return a.postChannel(ctx, ch, ref, chunks, flags)
}

// target splits a ReplyTo ("<channel>" or "<channel>/<message>") into the channel
// and the message to reference, falling back to the session key's channel.
func target(replyTo, sessionKey string) (channel, message string) {
	channel, message, _ = strings.Cut(replyTo, replySep)
	if channel == "" {
		channel = channelFromKey(sessionKey)
	}
	return channel, message
}

// channelFromKey is the channel id at the end of a session key.
func channelFromKey(key string) string {
	if !strings.HasPrefix(key, Name+":") {
		return ""
	}
	return key[strings.LastIndexByte(key, ':')+1:]
}

// smallText renders a notice as Discord subtext ("-# " per line).
func smallText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "-# ") {
			lines[i] = "-# " + l
		}
	}
	return strings.Join(lines, "\n")
}

// failIfNotExists false: a reply to a message deleted meanwhile is still posted.
var failIfNotExists = false

func (a *Adapter) postChannel(ctx context.Context, channelID, reference string, chunks []string, flags discordgo.MessageFlags) error {
	for i, c := range chunks {
		msg := &discordgo.MessageSend{Content: c, Flags: flags, AllowedMentions: noMentions()}
		if i == 0 && reference != "" {
			msg.Reference = &discordgo.MessageReference{MessageID: reference, ChannelID: channelID, FailIfNotExists: &failIfNotExists}
		}
		err := a.call(ctx, "post message", "", func(opts ...discordgo.RequestOption) error {
			_, err := a.rest.ChannelMessageSendComplex(channelID, msg, opts...)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter) sendInteraction(ctx context.Context, id string, kind adapters.Kind, chunks []string, flags discordgo.MessageFlags, ephemeral bool) error {
	p := a.interactions.get(id)
	if p == nil || !p.deferred {
		// Unknown (a restart), expired, or never acknowledged: the answer was meant
		// for the asker alone and there is nowhere private to put it. It is never
		// posted in the channel.
		reason := "the interaction was not acknowledged"
		if p == nil {
			reason = "the interaction is unknown or expired"
		}
		a.log.Warn("discord interaction answer dropped, not posted in the channel: "+reason,
			"interaction_id", id, "kind", kind, "chars", len(strings.Join(chunks, "")))
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range chunks {
		content := c
		var err error
		if !p.edited {
			err = a.call(ctx, "edit interaction response", p.i.Token, func(opts ...discordgo.RequestOption) error {
				_, err := a.rest.InteractionResponseEdit(p.i, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions()}, opts...)
				return err
			})
			if err == nil {
				p.edited = true
			}
		} else {
			f := flags
			if ephemeral || p.ephemeral {
				f |= discordgo.MessageFlagsEphemeral
			}
			err = a.call(ctx, "interaction follow-up", p.i.Token, func(opts ...discordgo.RequestOption) error {
				_, err := a.rest.FollowupMessageCreate(p.i, true, &discordgo.WebhookParams{Content: content, Flags: f, AllowedMentions: noMentions()}, opts...)
				return err
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Typing shows the typing indicator in the conversation's channel and keeps it up
// (Discord shows it for about 10 seconds) until a reply or error is posted there, the
// turn has run for typingMax, or Run ends. It returns at once: the indicator is
// posted by its own goroutine, so a slow or rate-limited typing call never delays
// the turn. Commands answered through an interaction already show "thinking", so
// they get none.
func (a *Adapter) Typing(_ context.Context, in adapters.Inbound) error {
	if in.Native || strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return nil
	}
	ch, _ := target(in.ReplyTo, in.SessionKey)
	if ch == "" {
		return nil
	}
	a.keepTyping(ch)
	return nil
}

func (a *Adapter) typeOnce(ctx context.Context, ch string) error {
	return a.call(ctx, "typing", "", func(opts ...discordgo.RequestOption) error {
		return a.rest.ChannelTyping(ch, opts...)
	})
}

// typer is one channel's typing refresher.
type typer struct{ cancel context.CancelFunc }

// keepTyping starts the channel's refresher unless one runs; it belongs to Run.
func (a *Adapter) keepTyping(ch string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.stopping || a.typers[ch] != nil {
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	t := &typer{cancel: cancel}
	a.typers[ch] = t
	every := a.typingEvery
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.stopTyping(ch, t)
		tick := time.NewTicker(every)
		defer tick.Stop()
		limit := time.NewTimer(typingMax)
		defer limit.Stop()
		for {
			if err := a.typeOnce(ctx, ch); err != nil && ctx.Err() == nil {
				a.log.Debug("discord typing failed", "channel_id", ch, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-limit.C:
				return
			case <-tick.C:
			}
		}
	}()
}

// stopTyping ends the channel's refresher (only t, when t is non-nil), cutting a
// typing call in flight short.
func (a *Adapter) stopTyping(ch string, t *typer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.typers[ch]
	if cur == nil || (t != nil && cur != t) {
		if t != nil {
			t.cancel()
		}
		return
	}
	delete(a.typers, ch)
	cur.cancel()
}

// textLen counts like Discord's limit, in UTF-16 code units (never fewer than runes).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
