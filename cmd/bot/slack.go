package main

import (
	"log/slog"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/config"
)

func init() { adapterFactories["slack"] = newSlackAdapter }

// newSlackAdapter builds the Slack channel from channels.slack.
func newSlackAdapter(cfg *config.Config, log *slog.Logger) (adapters.Adapter, error) {
	s := cfg.Channels.Slack
	models := refStrings(cfg.ModelRefs())
	return slack.New(slack.Config{
		AppToken: s.AppToken.Reveal(),
		BotToken: s.BotToken.Reveal(),
		APIURL:   s.APIURL,
		Log:      log,
		Models:   func() []string { return models },
	})
}
