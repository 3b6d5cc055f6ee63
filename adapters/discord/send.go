package discord

import (
	"context"
	"errors"
	"strings"
	"unicode/utf16"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
)

// MaxMessageLen is Discord's content limit per message.
const MaxMessageLen = 2000

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
	picker := pickerComponents(out.Choices, a.log) // L4: a select menu on the last part

	if out.Kind == adapters.KindReport {
		ch := strings.TrimPrefix(out.ReplyTo, Name+":")
		if ch == "" {
			return errors.New("discord: report without an admin channel id")
		}
		return a.postChannel(ctx, ch, "", chunks, flags, nil)
	}
	if rest, ok := strings.CutPrefix(out.ReplyTo, interactionPrefix); ok {
		id, _, _ := strings.Cut(rest, ":")
		return a.sendInteraction(ctx, id, out.Kind, chunks, flags, out.Ephemeral, picker)
	}
	ch, msg := target(out.ReplyTo, out.SessionKey)
	if ch == "" {
		return errors.New("discord: outbound message without a channel")
	}
	ref := ""
	if out.Kind == adapters.KindReply || out.Kind == adapters.KindError {
		defer a.stopTyping(ch) // the turn has answered
		ref = msg
	}
	return a.postChannel(ctx, ch, ref, chunks, flags, picker)
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

// postChannel posts chunks in order, the first referencing reference (when set),
// the last carrying components (when any).
func (a *Adapter) postChannel(ctx context.Context, channelID, reference string, chunks []string, flags discordgo.MessageFlags, components []discordgo.MessageComponent) error {
	for i, c := range chunks {
		ref, comps := "", []discordgo.MessageComponent(nil)
		if i == 0 {
			ref = reference
		}
		if i == len(chunks)-1 {
			comps = components
		}
		if _, err := a.postOne(ctx, channelID, ref, c, flags, comps); err != nil {
			return err
		}
	}
	return nil
}

// postOne posts one message, replying to reference when set, without pinging anyone.
func (a *Adapter) postOne(ctx context.Context, channelID, reference, content string, flags discordgo.MessageFlags, components []discordgo.MessageComponent) (*discordgo.Message, error) {
	msg := &discordgo.MessageSend{Content: content, Flags: flags, AllowedMentions: noMentions(), Components: components}
	if reference != "" {
		msg.Reference = &discordgo.MessageReference{MessageID: reference, ChannelID: channelID, FailIfNotExists: &failIfNotExists}
	}
	m, err := link.Get(ctx, a.link, "post message", "", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
		return a.rest.ChannelMessageSendComplex(channelID, msg, opts...)
	})
	if err == nil && m == nil {
		err = errors.New("discord: post message: no message in the answer")
	}
	return m, err
}

// sendInteraction answers an interaction: the first part replaces its original
// response (the deferred "thinking…" of a command, or the message whose menu was
// used, whose menu goes), the others are follow-ups; components go on the last part.
func (a *Adapter) sendInteraction(ctx context.Context, id string, kind adapters.Kind, chunks []string, flags discordgo.MessageFlags, ephemeral bool, components []discordgo.MessageComponent) error {
	p := a.interaction(id)
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
	for i, c := range chunks {
		content := c
		var comps []discordgo.MessageComponent
		if i == len(chunks)-1 {
			comps = components
		}
		var err error
		if !p.edited {
			edit := &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions()}
			if comps != nil || p.update {
				// A picked menu is replaced by the answer (or a new menu).
				c := append([]discordgo.MessageComponent{}, comps...)
				edit.Components = &c
			}
			_, err = link.Get(ctx, a.link, "edit interaction response", p.i.Token,
				func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
					return a.rest.InteractionResponseEdit(p.i, edit, opts...)
				})
			if err == nil {
				p.edited = true
			}
		} else {
			f := flags
			if ephemeral || p.ephemeral {
				f |= discordgo.MessageFlagsEphemeral
			}
			params := &discordgo.WebhookParams{Content: content, Flags: f, AllowedMentions: noMentions(), Components: comps}
			_, err = link.Get(ctx, a.link, "interaction follow-up", p.i.Token,
				func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
					return a.rest.FollowupMessageCreate(p.i, true, params, opts...)
				})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// textLen counts like Discord's limit, in UTF-16 code units (never fewer than runes).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
