package app

import (
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/sessions"
)

// SessionsConfig maps a configuration onto the router's: the one mapping, so a
// drill runs exactly what the bot runs.
func SessionsConfig(cfg *config.Config) sessions.Config {
	d := cfg.Agents.Defaults
	sc := sessions.Config{
		Primary:      d.Model.Primary,
		Fallbacks:    append([]failover.ModelRef(nil), d.Model.Fallbacks...),
		Allow:        append([]string(nil), d.Model.Allow...),
		SystemPrompt: d.SystemPrompt,
		Models:       map[failover.ModelRef]sessions.ModelInfo{},
		Profiles:     cfg.EngineProfiles(),
		Order:        cfg.Auth.Order,
		Providers:    append([]string(nil), cfg.ProviderIDs...),
		Notices:      cfg.Notices.Users,
		AdminChannel: cfg.Admin.Channel,
		AdminUsers:   append([]string(nil), cfg.Admin.Users...),
		UserBudget:   sessions.UserBudget{Calls: cfg.Limits.PerUserDailyPaidCalls, USD: cfg.Limits.PerUserDailyUSD},
		Access: sessions.Access{
			Users:        append([]string(nil), cfg.Access.Users...),
			Channels:     append([]string(nil), cfg.Access.Channels...),
			RefuseDirect: !cfg.Access.DirectMessages,
			// T9
			ChannelModelEveryone: cfg.Access.ChannelModel == "everyone",
		},
		ProbeInterval:   d.PrimaryProbeInterval,
		MaxMessageBytes: cfg.Limits.MaxMessageBytes,
		MaxTokens:       d.MaxTokens,
		ImageFallbacks:  append([]failover.ModelRef(nil), d.Model.ImageFallbacks...),
		Files: sessions.FileLimits{MaxBytes: int64(cfg.Limits.MaxFileBytes), MaxFiles: cfg.Limits.MaxFiles,
			MaxTextBytes: int64(cfg.Limits.MaxTextFileBytes)},
		ThreadMessages:   d.ThreadContext.MaxMessages,
		Summary:          d.Compaction.Summary,
		SummaryMaxTokens: d.Compaction.SummaryMaxTokens,
		SummaryTarget:    d.Compaction.TargetRatio,
	}
	live := map[string]config.Live{"console": cfg.Channels.Console.Live, "slack": cfg.Channels.Slack.Live, "discord": cfg.Channels.Discord.Live}
	for name, l := range live {
		if !l.Stream {
			sc.NoStream = setFlag(sc.NoStream, name)
		}
		if !l.Progress {
			sc.NoProgress = setFlag(sc.NoProgress, name)
		}
	}
	for ref, m := range cfg.Models {
		sc.Models[ref] = sessions.ModelInfo{
			ContextWindow: m.ContextWindow,
			Price:         failover.Price{InPerMTok: m.USDPerMTokIn, OutPerMTok: m.USDPerMTokOut},
			Selectable:    m.Selectable,
			Aliases:       append([]string(nil), m.Aliases...),
			Images:        m.TakesImages(),
		}
	}
	for _, a := range cfg.Agents.List {
		sc.Agents = append(sc.Agents, sessions.Agent{
			ID: a.ID, Model: a.Model, Fallbacks: a.Fallbacks, SystemPrompt: a.SystemPrompt, Match: a.Channels,
		})
	}
	return sc
}
