// The key tables of the configuration: every key the file may hold, section
// by section, and where its value goes.

package config

import (
	"time"

	"github.com/detourbot/detour/failover"
	"go.yaml.in/yaml/v3"
)

// keys maps each key of a section to what decodes its value.
type keys = map[string]func(*yaml.Node, string)

// section decodes a mapping of ks.
func (d *decoder) section(ks keys) func(*yaml.Node, string) {
	return func(v *yaml.Node, key string) { d.fields(v, key, ks) }
}

// root decodes the top level.
func (d *decoder) root(n *yaml.Node) {
	c := d.cfg
	d.fields(n, "", keys{
		"storage": d.section(keys{
			"driver": d.str(&c.Storage.Driver),
			"dsn":    d.str(&c.Storage.DSN),
		}),
		"channels":  d.channels,
		"providers": d.providers,
		"auth":      d.auth,
		"agents":    d.agents,
		"models":    d.models,
		"limits": d.section(keys{
			"max_paid_attempts_per_minute": d.integer(&c.Limits.MaxPaidAttemptsPerMinute, 0),
			"max_message_bytes":            d.integer(&c.Limits.MaxMessageBytes, 1),
			"max_response_bytes":           d.integer(&c.Limits.MaxResponseBytes, minResponseBytes),
			"max_answer_bytes":             d.integer(&c.Limits.MaxAnswerBytes, minAnswerBytes),
			"per_user_daily_paid_calls":    d.integer(&c.Limits.PerUserDailyPaidCalls, 0),
			"per_user_daily_usd":           d.number(&c.Limits.PerUserDailyUSD, 0, 1e9),
			"max_file_bytes":               d.integer(&c.Limits.MaxFileBytes, 1),
			"max_files":                    d.integer(&c.Limits.MaxFiles, 1),
			"max_text_file_bytes":          d.integer(&c.Limits.MaxTextFileBytes, 1),
		}),
		"notices": d.section(keys{
			"users": d.str(&c.Notices.Users),
		}),
		"admin": d.section(keys{
			"channel": d.str(&c.Admin.Channel),
			"users":   d.strings(&c.Admin.Users),
		}),
		"access": d.section(keys{
			"users":           d.strings(&c.Access.Users),
			"channels":        d.strings(&c.Access.Channels),
			"direct_messages": d.boolean(&c.Access.DirectMessages),
			"channel_model":   d.str(&c.Access.ChannelModel),
		}),
		"server": d.section(keys{
			"listen": d.str(&c.Server.Listen),
		}),
		"alerts": d.alerts,
	})
}

// channel decodes a channel whose env references matter only when enabled.
func (d *decoder) channel(enabled *bool, ks keys) func(*yaml.Node, string) {
	ks["enabled"] = d.boolean(enabled)
	return func(v *yaml.Node, key string) {
		var pending []error
		outer := d.envErrs
		d.envErrs = &pending
		d.fields(v, key, ks)
		d.envErrs = outer
		if *enabled {
			d.errs = append(d.errs, pending...)
		}
	}
}

func (d *decoder) channels(v *yaml.Node, key string) {
	ch := &d.cfg.Channels
	d.fields(v, key, keys{
		"console": d.section(keys{
			"enabled":  d.boolean(&ch.Console.Enabled),
			"format":   d.str(&ch.Console.Format),
			"stream":   d.boolean(&ch.Console.Stream),
			"progress": d.boolean(&ch.Console.Progress),
		}),
		"slack": d.channel(&ch.Slack.Enabled, keys{
			"app_token":         d.hinted("export it: the xapp-... app-level token; or set channels.slack.enabled: false", d.secret(&ch.Slack.AppToken)),
			"bot_token":         d.hinted("export it: the xoxb-... bot token; or set channels.slack.enabled: false", d.secret(&ch.Slack.BotToken)),
			"api_url":           d.str(&ch.Slack.APIURL),
			"events":            d.str(&ch.Slack.Events),
			"stream":            d.boolean(&ch.Slack.Stream),
			"progress":          d.boolean(&ch.Slack.Progress),
			"suggested_prompts": d.strings(&ch.Slack.SuggestedPrompts),
		}),
		"discord": d.channel(&ch.Discord.Enabled, keys{
			"token":           d.hinted("export it: the bot token; or set channels.discord.enabled: false", d.secret(&ch.Discord.Token)),
			"guild_id":        d.str(&ch.Discord.GuildID),
			"api_url":         d.str(&ch.Discord.APIURL),
			"message_content": d.boolean(&ch.Discord.MessageContent),
			"shard_id":        d.integer(&ch.Discord.ShardID, 0),
			"shard_count":     d.integer(&ch.Discord.ShardCount, 1),
			"stream":          d.boolean(&ch.Discord.Stream),
			"progress":        d.boolean(&ch.Discord.Progress),
			"threads":         d.boolean(&ch.Discord.Threads),
		}),
	})
}

func (d *decoder) providers(v *yaml.Node, key string) {
	c := d.cfg
	d.entries(v, key, func(name string, _, v *yaml.Node, key string) {
		p := Provider{ID: name}
		var billing time.Duration // 0 = auth.cooldowns.billing_backoff_hours
		d.fields(v, key, keys{
			"api":                   d.str(&p.API),
			"base_url":              d.str(&p.BaseURL),
			"api_version":           d.str(&p.APIVersion),
			"billing_backoff_hours": d.units(&billing, time.Hour),
		})
		if billing > 0 {
			if c.Policy.BillingBackoffByProvider == nil {
				c.Policy.BillingBackoffByProvider = map[string]time.Duration{}
			}
			c.Policy.BillingBackoffByProvider[name] = billing
		}
		if p.API == "" {
			p.API = APIOpenAI
		}
		if p.BaseURL == "" {
			p.BaseURL = defaultBaseURLs[p.API]
		}
		c.Providers[name] = p
		c.ProviderIDs = append(c.ProviderIDs, name)
	})
}

func (d *decoder) auth(v *yaml.Node, key string) {
	a := &d.cfg.Auth
	pol := &d.cfg.Policy
	d.fields(v, key, keys{
		"profiles": func(v *yaml.Node, key string) {
			d.entries(v, key, func(id string, _, v *yaml.Node, key string) {
				p := Profile{ID: id, Type: failover.ProfileAPIKey}
				var typ, expires string
				d.fields(v, key, keys{
					"provider":   d.str(&p.Provider),
					"type":       d.str(&typ),
					"key":        d.profileKey(id, &p.Key),
					"expires_at": d.str(&expires),
					"optional":   d.boolean(&p.Optional),
				})
				if typ != "" {
					p.Type = failover.ProfileType(typ)
				}
				if expires != "" {
					t, err := time.Parse(time.RFC3339, expires)
					if err != nil {
						d.errAt(d.lines[key+".expires_at"], key+".expires_at", "bad time %q: want RFC 3339, e.g. 2026-01-31T00:00:00Z", expires)
					}
					p.ExpiresAt = t
				}
				a.Profiles[id] = p
				a.ProfileIDs = append(a.ProfileIDs, id)
			})
		},
		"order": func(v *yaml.Node, key string) {
			d.entries(v, key, func(provider string, _, v *yaml.Node, key string) {
				var ids []string
				d.strings(&ids)(v, key)
				a.Order[provider] = ids
			})
		},
		"cooldowns": d.section(keys{
			"billing_backoff_hours":          d.units(&pol.BillingBackoff, time.Hour),
			"billing_max_hours":              d.units(&pol.BillingMax, time.Hour),
			"auth_permanent_backoff_minutes": d.units(&pol.AuthPermanentBackoff, time.Minute),
			"auth_permanent_max_minutes":     d.units(&pol.AuthPermanentMax, time.Minute),
			"failure_window_hours":           d.units(&pol.FailureWindow, time.Hour),
			"overloaded_profile_rotations":   d.integer(&pol.OverloadedProfileRotations, 0),
			"overloaded_backoff_ms":          d.units(&pol.OverloadedBackoff, time.Millisecond),
			"rate_limited_profile_rotations": d.integer(&pol.RateLimitedProfileRotations, 0),
			"ladder":                         d.durations(&pol.CooldownLadder),
			"transient_ladder":               d.durations(&pol.TransientLadder),
			"failure_window_minutes":         d.units(&pol.TransientWindow, time.Minute),
			"jitter":                         d.number(&pol.Jitter, 0, 0.5),
		}),
	})
}

func (d *decoder) agents(v *yaml.Node, key string) {
	ag := &d.cfg.Agents
	df := &ag.Defaults
	pol := &d.cfg.Policy
	d.fields(v, key, keys{
		"defaults": d.section(keys{
			"model": d.section(keys{
				"primary":         d.ref(&df.Model.Primary),
				"fallbacks":       d.refs(&df.Model.Fallbacks),
				"image_fallbacks": d.refs(&df.Model.ImageFallbacks),
				"allow":           d.strings(&df.Model.Allow),
			}),
			"system_prompt": d.str(&df.SystemPrompt),
			"max_tokens":    d.integer(&df.MaxTokens, 0),
			"thread_context": d.section(keys{
				"max_messages": d.integer(&df.ThreadContext.MaxMessages, 0),
			}),
			"compaction": d.section(keys{
				"summary":            d.boolean(&df.Compaction.Summary),
				"summary_max_tokens": d.integer(&df.Compaction.SummaryMaxTokens, 16),
				"target_ratio":       d.number(&df.Compaction.TargetRatio, 0.1, 0.9),
			}),
			"timeouts": d.section(keys{
				"idle_seconds":    d.units(&df.IdleTimeout, time.Second),
				"attempt_seconds": d.units(&pol.AttemptTimeout, time.Second),
				"run_seconds":     d.units(&pol.RunTimeout, time.Second),
			}),
			"budget": d.section(keys{
				"max_paid_attempts_per_turn": d.integer(&pol.MaxPaidAttemptsPerTurn, 1),
				"max_turn_cost_usd":          d.number(&pol.MaxTurnCostUSD, 0, 1e9),
			}),
			"failover": d.section(keys{
				"retry_after_max_wait":       d.duration(&pol.RetryAfterMaxWait),
				"timeout_switch_threshold":   d.integer(&pol.TimeoutSwitchThreshold, 1),
				"fallback_skip_ttl":          d.duration(&pol.FallbackSkipTTL),
				"primary_probe_interval":     d.duration(&df.PrimaryProbeInterval),
				"cooldown_probe_interval":    d.duration(&pol.ProbeInterval),
				"cooldown_probe_window":      d.duration(&pol.ProbeWindow),
				"probe_interval_seconds":     d.units(&pol.SharedProbeInterval, time.Second),
				"probe_interval_max_seconds": d.units(&pol.SharedProbeIntervalMax, time.Second),
				"probe_wait_seconds":         d.units(&pol.SharedProbeWait, time.Second),
				"billing_probe_interval":     d.duration(&pol.BillingProbeInterval),
				"idle_retries":               d.integer(&pol.IdleRetries, 0),
				"breaker_trip":               d.integer(&pol.BreakerTrip, 1),
				"empty_output_retries":       d.integer(&pol.EmptyOutputRetries, 0),
				"min_parsed_wait":            d.duration(&pol.MinParsedWait),
				"max_parsed_wait":            d.duration(&pol.MaxParsedWait),
				"timeout_compact_ratio":      d.number(&pol.TimeoutCompactRatio, 0.05, 1),
			}),
		}),
		"list": func(v *yaml.Node, key string) {
			d.list(v, key, func(_ int, v *yaml.Node, key string) {
				var a Agent
				d.lines[key] = resolve(v).Line
				d.fields(v, key, keys{
					"id":    d.str(&a.ID),
					"model": d.ref(&a.Model),
					"fallbacks": func(v *yaml.Node, key string) {
						fb := []failover.ModelRef{}
						d.refs(&fb)(v, key)
						a.Fallbacks = &fb
					},
					"system_prompt": d.str(&a.SystemPrompt),
					"channels":      d.strings(&a.Channels),
				})
				ag.List = append(ag.List, a)
			})
		},
	})
}

func (d *decoder) models(v *yaml.Node, key string) {
	c := d.cfg
	d.entries(v, key, func(name string, _, v *yaml.Node, key string) {
		var m Model
		d.fields(v, key, keys{
			"deployment":       d.str(&m.Deployment),
			"context_window":   d.integer(&m.ContextWindow, 0),
			"usd_per_mtok_in":  d.number(&m.USDPerMTokIn, 0, 1e9),
			"usd_per_mtok_out": d.number(&m.USDPerMTokOut, 0, 1e9),
			"selectable":       d.boolean(&m.Selectable),
			"aliases":          d.strings(&m.Aliases),
			"input":            d.strings(&m.Input),
		})
		c.Models[failover.ModelRef(name)] = m
	})
}
