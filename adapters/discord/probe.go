package discord

import (
	"context"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
)

// Probe checks the bot token (GET /users/@me) and, when target names a channel
// id, that the channel exists and the bot may see it (GET /channels/{id}).
// Nothing is posted and no gateway connection is opened.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	me, err := link.Get(ctx, a.link, "GET /users/@me", a.token, func(opts ...discordgo.RequestOption) (*discordgo.User, error) {
		return a.rest.User("@me", opts...)
	})
	out := []adapters.ProbeResult{adapters.Checked("discord bot token (GET /users/@me)", err,
		func() string { return "bot user " + me.Username + " (" + me.ID + ")" })}
	if target == "" {
		return out
	}
	ch, err := link.Get(ctx, a.link, "GET /channels/"+target, a.token,
		func(opts ...discordgo.RequestOption) (*discordgo.Channel, error) {
			return a.rest.Channel(target, opts...)
		})
	return append(out, adapters.Checked("discord admin channel "+target+" (GET /channels)", err, func() string {
		if ch.Name == "" {
			return "reachable"
		}
		return "#" + ch.Name
	}))
}
