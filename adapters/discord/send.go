package discord

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
)

// MaxMessageLen is Discord's content limit per message.
const MaxMessageLen = 2000

// textLen counts like Discord's limit, in UTF-16 code units (never fewer than runes).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// noMentions lets a posted message ping no one, not even the author replied to (T3).
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: false}
}

// orEmpty is what a blank text shows as: Discord refuses an empty message.
func orEmpty(text string) string {
	if strings.TrimSpace(text) == "" {
		return "(empty message)"
	}
	return text
}

// Send posts one outbound message: replies and errors in the conversation's channel
// or thread, the first part referencing the message it answers (without a ping),
// notices as their own quiet message, reports to the admin channel named in
// ReplyTo. Answers to an application command replace the deferred "thinking"
// response, then continue as follow-ups; they are never posted in the channel.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) error {
	text := orEmpty(out.Text)
	var flags discordgo.MessageFlags
	if out.Kind == adapters.KindNotice {
		flags, text = discordgo.MessageFlagsSuppressNotifications, smallText(text)
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
// and the message to reference, falling back to the session key's channel id.
func target(replyTo, sessionKey string) (channel, message string) {
	channel, message, _ = strings.Cut(replyTo, replySep)
	if channel == "" && strings.HasPrefix(sessionKey, Name+":") {
		channel = sessionKey[strings.LastIndexByte(sessionKey, ':')+1:]
	}
	return channel, message
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

// postChannel posts chunks in order, the first referencing reference (when
// set), the last with components.
func (a *Adapter) postChannel(ctx context.Context, channelID, reference string, chunks []string, flags discordgo.MessageFlags, components []discordgo.MessageComponent) error {
	for i, c := range chunks {
		if _, err := a.postOne(ctx, channelID, reference, c, flags, onLast(i, chunks, components)); err != nil {
			return err
		}
		reference = ""
	}
	return nil
}

// onLast is components for the last of chunks, nil for the others.
func onLast(i int, chunks []string, components []discordgo.MessageComponent) []discordgo.MessageComponent {
	if i == len(chunks)-1 {
		return components
	}
	return nil
}

// postOne posts one message, replying to reference when set, without pinging anyone.
func (a *Adapter) postOne(ctx context.Context, channelID, reference, content string, flags discordgo.MessageFlags, components []discordgo.MessageComponent) (*discordgo.Message, error) {
	msg := &discordgo.MessageSend{Content: content, Flags: flags, AllowedMentions: noMentions(), Components: components}
	if reference != "" {
		msg.Reference = &discordgo.MessageReference{MessageID: reference, ChannelID: channelID, FailIfNotExists: new(false)} // still posted when the message is gone
	}
	m, err := a.rest.ChannelMessageSendComplex(channelID, msg, discordgo.WithContext(ctx))
	if err == nil && m == nil {
		err = errors.New("no message in the answer")
	}
	return m, link.Err("post message", "", err)
}

// sendInteraction answers an interaction: the first part replaces its original
// response (the deferred "thinking…" of a command, or the message whose menu was
// used, whose menu goes), the others are follow-ups.
func (a *Adapter) sendInteraction(ctx context.Context, id string, kind adapters.Kind, chunks []string, flags discordgo.MessageFlags, ephemeral bool, components []discordgo.MessageComponent) error {
	p := a.interaction(id)
	if p == nil || !p.deferred {
		// Meant for the asker alone, with nowhere private to put it.
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
	if ephemeral || p.ephemeral {
		flags |= discordgo.MessageFlagsEphemeral // a follow-up's own; the edited response keeps the deferral's
	}
	for i, c := range chunks {
		comps := onLast(i, chunks, components)
		var err error
		if !p.edited {
			edit := &discordgo.WebhookEdit{Content: &c, AllowedMentions: noMentions()}
			if comps != nil || p.update {
				// A picked menu is replaced by the answer (or a new menu).
				c := append([]discordgo.MessageComponent{}, comps...)
				edit.Components = &c
			}
			_, err = a.rest.InteractionResponseEdit(p.i, edit, discordgo.WithContext(ctx))
			p.edited = err == nil
			err = link.Err("edit interaction response", p.i.Token, err)
		} else {
			params := &discordgo.WebhookParams{Content: c, Flags: flags, AllowedMentions: noMentions(), Components: comps}
			_, err = a.rest.FollowupMessageCreate(p.i, true, params, discordgo.WithContext(ctx))
			err = link.Err("interaction follow-up", p.i.Token, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pickID is the custom_id of detour's select menus (L4; Discord allows 100
// characters). The option values are the choices' commands, so a pick needs no
// memory of the menu: it survives a restart and works on any replica.
const pickID = "detour:pick"

// pickerComponents renders choices as one string select menu, nil for none. A
// choice past the limits is left out of the menu (the text still lists it).
func pickerComponents(choices []adapters.Choice, log *slog.Logger) []discordgo.MessageComponent {
	var opts []discordgo.SelectMenuOption
	left := 0
	for _, c := range choices {
		label, value := strings.TrimSpace(c.Label), strings.TrimSpace(c.Command)
		if len(opts) == maxChoices || label == "" || value == "" ||
			slices.ContainsFunc(opts, func(o discordgo.SelectMenuOption) bool { return o.Value == value }) ||
			utf8.RuneCountInString(label) > maxChoiceLen || utf8.RuneCountInString(value) > maxChoiceLen {
			left++
			continue
		}
		opts = append(opts, discordgo.SelectMenuOption{Label: label, Value: value})
	}
	if left > 0 && log != nil {
		log.Debug("discord picker: choices left out of the menu", "left_out", left, "shown", len(opts))
	}
	if len(opts) == 0 {
		return nil
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.SelectMenu{MenuType: discordgo.StringSelectMenu, CustomID: pickID, Placeholder: "Choose one", Options: opts},
	}}}
}
