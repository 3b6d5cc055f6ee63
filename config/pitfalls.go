// Pitfalls: settings that parse and even run, but not as the person who wrote
// them believes. Each is a doubt (`bot check` fails on it, `bot run` warns) or,
// when the bot merely runs with less protection than it could, a warning.

package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/detourbot/detour/failover"
)

// literalSecret is a key or token written into the file itself.
type literalSecret struct {
	key  string // auth.profiles.openai:main.key, channels.slack.bot_token, ...
	line int
}

// noteLiteral remembers a secret whose raw text holds no ${...} reference.
func (d *decoder) noteLiteral(key string, line int, raw string) {
	if raw != "" && !strings.Contains(raw, "${") {
		d.literals = append(d.literals, literalSecret{key, line})
	}
}

// checkChains doubts a fallback that repeats the primary or an earlier
// fallback: it looks like protection and is none (S1). It runs on the chains as
// written, before profiles without a key are left out.
func (d *decoder) checkChains(line func(string) int) {
	c := d.cfg
	check := func(path string, primary failover.ModelRef, fallbacks []failover.ModelRef) {
		for i, r := range fallbacks {
			k := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case r == primary:
				d.doubt(line(k), k, "%s is the primary model itself, so it is no fallback: when it fails, trying it again as a \"fallback\" fails the same way; name another model, ideally of another provider", r)
			default:
				for j := range i {
					if fallbacks[j] == r {
						d.doubt(line(k), k, "%s is already %s[%d]: a model is tried once per turn, so this entry adds nothing; remove it or name another model", r, path, j)
						break
					}
				}
			}
		}
	}
	df := c.Agents.Defaults.Model
	check("agents.defaults.model.fallbacks", df.Primary, df.Fallbacks)
	for i, a := range c.Agents.List {
		if a.Fallbacks == nil {
			continue
		}
		base := a.Model
		if base == "" {
			base = df.Primary
		}
		check(fmt.Sprintf("agents.list[%d].fallbacks", i), base, *a.Fallbacks)
	}
}

// checkPitfalls runs once the configuration is complete (profiles without a
// key already left out).
func (d *decoder) checkPitfalls(line func(string) int) {
	c := d.cfg
	// A base_url copied from an API reference with the endpoint on it.
	for _, id := range c.ProviderIDs {
		base := c.Providers[id].BaseURL
		if fixed, ok := TrimEndpoint(base); ok {
			k := "providers." + id + ".base_url"
			d.doubt(line(k), k, "ends in %s, which the bot adds itself: every call would go to .../chat/completions/chat/completions and fail (usually 404); set base_url: %s", endpointOf(base), fixed)
		}
	}

	// Keys and tokens written into the file.
	for _, s := range d.literals {
		if d.localSecret(s.key) {
			continue // a server on this machine (a local model, a fake): its "key" guards nothing
		}
		v := envNameFor(s.key)
		d.doubt(s.line, s.key, "the secret is written in the file: whoever reads config.yaml (a backup, a repository, a screen share) has it; put it in the environment or in detour.env as %s=... and write ${%s} here", v, v)
	}

	// A default chain without a fallback keeps no promise of this bot.
	df := c.Agents.Defaults.Model
	if df.Primary != "" && len(df.Fallbacks) == 0 {
		k := "agents.defaults.model.fallbacks"
		l, written := d.lines[k]
		if !written {
			l = line("agents.defaults.model.primary")
		}
		why := "none is configured"
		if written && len(d.droppedFallbacks) > 0 {
			why = "every one is left out (see the lines above)"
		}
		d.warn(l, k, "%s: when %s fails, people get an error instead of another model's answer; add one, ideally of another provider (fallbacks: [provider/model])", why, df.Primary)
	}

	// Spending caps in dollars need prices to count with.
	unpriced := c.UnpricedModels()
	all := len(unpriced) == len(c.ModelRefs())
	for _, cp := range []struct {
		key string
		usd float64
		per string
	}{
		{"agents.defaults.budget.max_turn_cost_usd", c.Policy.MaxTurnCostUSD, "per turn"},
		{"limits.per_user_daily_usd", c.Limits.PerUserDailyUSD, "per user and day"},
	} {
		switch {
		case cp.usd <= 0 || len(unpriced) == 0:
		case all:
			d.doubt(line(cp.key), cp.key, "the cap of $%g %s can never act: no model has a price, so every call counts as $0; add prices under models (models: {%s: {usd_per_mtok_in: 0.15, usd_per_mtok_out: 0.6}}), or cap calls instead (max_paid_attempts_per_turn, per_user_daily_paid_calls)", cp.usd, cp.per, unpriced[0])
		default:
			d.warn(line(cp.key), cp.key, "calls to %s count as $0 (no price under models), so the cap of $%g %s sees only part of the cost", joinModels(unpriced), cp.usd, cp.per)
		}
	}
}

// localSecret reports whether the secret at key is sent only to this machine:
// a profile of a provider on loopback, or a channel token whose api_url is.
func (d *decoder) localSecret(key string) bool {
	c := d.cfg
	switch {
	case strings.HasPrefix(key, "auth.profiles."):
		id := strings.TrimSuffix(strings.TrimPrefix(key, "auth.profiles."), ".key")
		p, ok := c.Auth.Profiles[id]
		return ok && loopback(c.Providers[p.Provider].BaseURL)
	case strings.HasPrefix(key, "channels.slack."):
		return loopback(c.Channels.Slack.APIURL)
	case strings.HasPrefix(key, "channels.discord."):
		return loopback(c.Channels.Discord.APIURL)
	}
	return false
}

// UnpricedModels lists the models people can reach (ModelRefs) that have no
// price under models:, so cost caps count their calls as $0.
func (c *Config) UnpricedModels() []failover.ModelRef {
	var out []failover.ModelRef
	for _, r := range c.ModelRefs() {
		if m := c.Models[r]; m.USDPerMTokIn == 0 && m.USDPerMTokOut == 0 {
			out = append(out, r)
		}
	}
	return out
}

// CostCapInert reports whether a dollar cap is set and cannot act because no
// model has a price.
func (c *Config) CostCapInert(usd float64) bool {
	return usd > 0 && len(c.UnpricedModels()) == len(c.ModelRefs())
}

// endpoints are API paths people paste into base_url by mistake; the client
// adds them itself.
var endpoints = []string{"/chat/completions", "/completions"}

// TrimEndpoint returns base without an endpoint path the client adds itself
// (".../v1/chat/completions" → ".../v1"), and whether it had one.
func TrimEndpoint(base string) (string, bool) {
	u, err := url.Parse(base)
	if err != nil {
		return base, false
	}
	p := strings.TrimRight(u.Path, "/")
	for _, e := range endpoints {
		if strings.HasSuffix(p, e) {
			u.Path = strings.TrimSuffix(p, e)
			u.RawPath = ""
			return u.String(), true
		}
	}
	return base, false
}

func endpointOf(base string) string {
	p := base
	if u, err := url.Parse(base); err == nil {
		p = strings.TrimRight(u.Path, "/")
	}
	for _, e := range endpoints {
		if strings.HasSuffix(p, e) {
			return e
		}
	}
	return ""
}

// loopback reports whether a base URL points at this machine.
func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// envNameFor proposes the environment variable of a secret's key path:
// auth.profiles.openai:main.key → OPENAI_API_KEY, openai:backup →
// OPENAI_API_KEY_BACKUP, channels.slack.bot_token → SLACK_BOT_TOKEN.
func envNameFor(key string) string {
	up := func(s string) string {
		return strings.ToUpper(strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, s))
	}
	if id, ok := strings.CutPrefix(key, "auth.profiles."); ok {
		id = strings.TrimSuffix(id, ".key")
		prov, name, _ := strings.Cut(id, ":")
		v := up(prov) + "_API_KEY"
		if name != "" && name != "main" && name != "default" {
			v += "_" + up(name)
		}
		return v
	}
	switch key {
	case "channels.discord.token":
		return "DISCORD_BOT_TOKEN"
	}
	return up(strings.TrimPrefix(key, "channels."))
}

func joinModels(refs []failover.ModelRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = string(r)
	}
	if len(s) > 4 {
		s = append(s[:4], fmt.Sprintf("and %d more", len(s)-4))
	}
	return strings.Join(s, ", ")
}
