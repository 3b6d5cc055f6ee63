package main

import (
	"log/slog"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
)

func init() { adapterFactories["discord"] = newDiscordAdapter }

// newDiscordAdapter builds the Discord channel from channels.discord.
func newDiscordAdapter(cfg *config.Config, log *slog.Logger) (adapters.Adapter, error) {
	d := cfg.Channels.Discord
	models := refStrings(cfg.ModelRefs())
	profiles := cfg.ProfileIDs()
	return discord.New(discord.Config{
		Token:    d.Token.Reveal(),
		GuildID:  d.GuildID,
		APIURL:   d.APIURL,
		Log:      log,
		Models:   func() []string { return models },
		Profiles: func() []string { return profiles },
	})
}

// refStrings turns model refs into the plain strings pickers show.
func refStrings(refs []failover.ModelRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = string(r)
	}
	return out
}
