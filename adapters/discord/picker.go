package discord

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/commands"
)

// pickID is the custom_id of detour's select menus (L4). The option values are
// the commands the choices say, so a pick needs no memory of the menu: it
// survives a restart and works on any replica.
const pickID = "detour:pick"

// Discord's select menu limits.
// https://discord.com/developers/docs/components/reference#string-select
const (
	maxMenuOptions = 25
	maxMenuText    = 100 // label and value
)

const pickPlaceholder = "Choose one"

// pickerComponents renders choices as one string select menu, nil when there are
// none. Past Discord's 25 options, or for a label or command longer than 100
// characters, a choice is left out of the menu (the text still lists it, and
// autocomplete offers it).
func pickerComponents(choices []adapters.Choice, log *slog.Logger) []discordgo.MessageComponent {
	var opts []discordgo.SelectMenuOption
	left := 0
	for _, c := range choices {
		label, value := strings.TrimSpace(c.Label), strings.TrimSpace(c.Command)
		if len(opts) == maxMenuOptions || label == "" || value == "" ||
			slices.ContainsFunc(opts, func(o discordgo.SelectMenuOption) bool { return o.Value == value }) ||
			utf8.RuneCountInString(label) > maxMenuText || utf8.RuneCountInString(value) > maxMenuText {
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
		discordgo.SelectMenu{MenuType: discordgo.StringSelectMenu, CustomID: pickID, Placeholder: pickPlaceholder, Options: opts},
	}}}
}

// component handles a pick in one of detour's menus: it acknowledges it at once
// (deferred update: the menu's message is edited with the answer later) and hands
// the chosen command to the router like a slash command, in its channel's order.
func (a *Adapter) component(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok || d.CustomID != pickID {
		return // not ours
	}
	text := ""
	if len(d.Values) == 1 {
		text = strings.TrimSpace(d.Values[0])
	}
	// Only a command can come from a menu (anything else is a forged payload).
	if c, ok := commands.Parse(text); !ok || c.Unknown != "" {
		a.log.Warn("discord pick ignored: not a command", "interaction_id", i.ID, "values", len(d.Values))
		return
	}
	p := &pending{i: i, created: time.Now(), update: true,
		ephemeral: i.Message != nil && i.Message.Flags&discordgo.MessageFlagsEphemeral != 0}
	a.acknowledge(ctx, i, received, p, text, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
}
