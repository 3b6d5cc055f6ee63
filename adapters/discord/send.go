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

// noMentions lets nothing in a posted message ping anyone (@everyone, roles, users).
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// Send posts one outbound message: replies and errors in the conversation's channel
// or thread, notices as their own quiet message (suppress-notifications flag), reports
// to the admin channel named in ReplyTo. Answers to an application command replace the
// deferred "thinking" response, then continue as follow-ups.
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
		return a.postChannel(ctx, ch, chunks, flags)
	}
	if rest, ok := strings.CutPrefix(out.ReplyTo, interactionPrefix); ok {
		id, ch, _ := strings.Cut(rest, ":")
		return a.sendInteraction(ctx, id, ch, chunks, flags, out.Ephemeral)
	}
	ch := out.ReplyTo
	if ch == "" {
		ch = channelFromKey(out.SessionKey)
	}
	if ch == "" {
		return errors.New("discord: outbound message without a channel")
	}
	if out.Kind == adapters.KindReply || out.Kind == adapters.KindError {
		defer a.stopTyping(ch, nil) // the turn has answered
	}
	return a.postChannel(ctx, ch, chunks, flags)
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

func (a *Adapter) postChannel(ctx context.Context, channelID string, chunks []string, flags discordgo.MessageFlags) error {
	for _, c := range chunks {
		msg := &discordgo.MessageSend{Content: c, Flags: flags, AllowedMentions: noMentions()}
		err := a.callBucket(ctx, "post message", "", discordgo.EndpointChannelMessages(channelID), func(opts ...discordgo.RequestOption) error {
			_, err := a.s.ChannelMessageSendComplex(channelID, msg, opts...)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter) sendInteraction(ctx context.Context, id, channelID string, chunks []string, flags discordgo.MessageFlags, ephemeral bool) error {
	p := a.interactions.get(id)
	if p == nil || !p.deferred {
		// Unknown (restart), expired or never deferred: answer in the channel.
		if channelID == "" {
			return errors.New("discord: interaction answer without a channel")
		}
		return a.postChannel(ctx, channelID, chunks, flags)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range chunks {
		content := c
		var err error
		if !p.edited {
			err = a.call(ctx, "edit interaction response", p.i.Token, func(opts ...discordgo.RequestOption) error {
				_, err := a.s.InteractionResponseEdit(p.i, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions()}, opts...)
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
				_, err := a.s.FollowupMessageCreate(p.i, true, &discordgo.WebhookParams{Content: content, Flags: f, AllowedMentions: noMentions()}, opts...)
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
// turn has run for typingMax, or Run ends. Commands answered through an interaction
// already show "thinking", so they get none.
func (a *Adapter) Typing(ctx context.Context, in adapters.Inbound) error {
	if in.Native || strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return nil
	}
	ch := in.ReplyTo
	if ch == "" {
		ch = channelFromKey(in.SessionKey)
	}
	if ch == "" {
		return nil
	}
	if err := a.typeOnce(ctx, ch); err != nil {
		return err
	}
	a.keepTyping(ch)
	return nil
}

func (a *Adapter) typeOnce(ctx context.Context, ch string) error {
	return a.call(ctx, "typing", "", func(opts ...discordgo.RequestOption) error {
		return a.s.ChannelTyping(ch, opts...)
	})
}

// keepTyping starts the channel's refresher unless one runs; it belongs to Run.
func (a *Adapter) keepTyping(ch string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.stopping || a.typers[ch] != nil {
		return
	}
	stop := make(chan struct{})
	a.typers[ch] = stop
	ctx := a.ctx
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.stopTyping(ch, stop)
		t := time.NewTicker(a.typingEvery)
		defer t.Stop()
		limit := time.NewTimer(typingMax)
		defer limit.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-limit.C:
				return
			case <-t.C:
				if err := a.typeOnce(ctx, ch); err != nil {
					a.log.Debug("discord typing refresh failed", "channel_id", ch, "err", err)
				}
			}
		}
	}()
}

// stopTyping ends the channel's refresher (only the one given, when stop is non-nil).
func (a *Adapter) stopTyping(ch string, stop chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.typers[ch]
	if cur == nil || (stop != nil && cur != stop) {
		return
	}
	delete(a.typers, ch)
	if stop == nil {
		close(cur)
	}
}

// textLen counts like Discord's limit, in UTF-16 code units (never fewer than runes).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
