package discord

import (
	"context"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
)

// Probe checks the bot token (GET /users/@me) and, when target names a channel
// id, that the channel exists and the bot may see it (GET /channels/{id}).
// Nothing is posted and no gateway connection is opened.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	var me *discordgo.User
	err := a.link.Call(ctx, "GET /users/@me", a.token, func(opts ...discordgo.RequestOption) error {
		var err error
		me, err = a.rest.User("@me", opts...)
		return err
	})
	out := []adapters.ProbeResult{adapters.Checked("discord bot token (GET /users/@me)", err,
		func() string { return "bot user " + me.Username + " (" + me.ID + ")" })}
	if target == "" {
		return out
	}
	var ch *discordgo.Channel
	err = a.link.Call(ctx, "GET /channels/"+target, a.token, func(opts ...discordgo.RequestOption) error {
		var err error
		ch, err = a.rest.Channel(target, opts...)
		return err
	})
	return append(out, adapters.Checked("discord admin channel "+target+" (GET /channels)", err, func() string {
		if ch.Name == "" {
			return "reachable"
		}
		return "#" + ch.Name
	}))
}
