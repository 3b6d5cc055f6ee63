package config

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/detourbot/detour/failover"
)

// Which profiles exist never depends on the environment alone: a profile whose
// key variable is unset is an error naming the file, the line, the key and the
// variable, unless the file marks it optional: true. A newcomer who exports one
// API key still gets a running bot from config.example.yaml, whose extra
// profiles are optional: such a profile is left out with a warning (and `bot
// check` lists it), and so are the fallbacks only such profiles could reach.
// When the bot cannot do without a key (no key is set for the provider a
// primary model needs), one error says so, optional or not.

func (d *decoder) warn(line int, key, format string, args ...any) {
	d.cfg.Warnings = append(d.cfg.Warnings, &Error{File: d.file, Line: line, Key: key, Msg: d.hideEnv(key, fmt.Sprintf(format, args...))})
}

func (d *decoder) doubt(line int, key, format string, args ...any) {
	d.cfg.Doubts = append(d.cfg.Doubts, &Error{File: d.file, Line: line, Key: key, Msg: d.hideEnv(key, fmt.Sprintf(format, args...))})
}

// variables renders "environment variable X is" or "environment variables X, Y are".
func variables(vars []string) string {
	if len(vars) == 1 {
		return "environment variable " + vars[0] + " is"
	}
	return "environment variables " + strings.Join(vars, ", ") + " are"
}

// varsNear is didYouMean for the first of vars that has a neighbour.
func (d *decoder) varsNear(vars []string) string {
	for _, v := range vars {
		if s := d.didYouMean(v); s != "" {
			return s
		}
	}
	return ""
}

// leaveOutUnsetKeys handles the profiles whose key variables are unset: an
// error for a profile that is not optional, or for the keys of a provider a
// primary model (the default one, an agent's) needs when none of them is set;
// the other optional ones are left out with a warning.
func (d *decoder) leaveOutUnsetKeys() {
	c := d.cfg
	if len(d.unsetKeys) == 0 {
		return
	}
	keyed := map[string]bool{} // providers with a key that is set
	for _, id := range c.Auth.ProfileIDs {
		if _, unset := d.unsetKeys[id]; !unset {
			keyed[c.Auth.Profiles[id].Provider] = true
		}
	}
	// The models the bot cannot run without, by provider.
	needs := map[string]string{}
	need := func(ref failover.ModelRef, what string) {
		if p, _ := ref.Split(); p != "" {
			if _, ok := needs[p]; !ok {
				needs[p] = what
			}
		}
	}
	need(c.Agents.Defaults.Model.Primary, "the primary model "+string(c.Agents.Defaults.Model.Primary))
	for _, a := range c.Agents.List {
		if a.Model != "" {
			need(a.Model, fmt.Sprintf("the model of agent %s, %s,", a.ID, a.Model))
		}
	}

	left := map[string]bool{}
	goneVars := map[string][]string{} // providers left without any key -> their variables
	// A provider a primary needs, with no key set: one error, at its first profile.
	type blocked struct {
		line int
		key  string
		vars []string
	}
	stuck := map[string]*blocked{}
	var stuckOrder []string
	for _, id := range c.Auth.ProfileIDs {
		u, unset := d.unsetKeys[id]
		if !unset {
			continue
		}
		p := c.Auth.Profiles[id]
		key := "auth.profiles." + id + ".key"
		_, needed := needs[p.Provider]
		if needed && !keyed[p.Provider] {
			b, ok := stuck[p.Provider]
			if !ok {
				b = &blocked{line: u.line, key: key}
				stuck[p.Provider] = b
				stuckOrder = append(stuckOrder, p.Provider)
			}
			for _, v := range u.vars {
				if !slices.Contains(b.vars, v) {
					b.vars = append(b.vars, v)
				}
			}
			continue
		}
		if !p.Optional {
			d.errAt(u.line, key, "%s not set: profile %s has no key (export %s=...; or mark the profile optional: true to run without it while the key is unset)%s",
				variables(u.vars), id, u.vars[0], d.varsNear(u.vars))
			continue
		}
		left[id] = true
		c.LeftOut = append(c.LeftOut, LeftOutProfile{ID: id, Provider: p.Provider, Type: p.Type, Vars: u.vars})
		d.warn(u.line, key, "%s not set: profile %s is left out, and the bot runs without it%s", variables(u.vars), id, d.varsNear(u.vars))
		if !keyed[p.Provider] {
			goneVars[p.Provider] = append(goneVars[p.Provider], u.vars...)
		}
	}
	for _, prov := range stuckOrder {
		b := stuck[prov]
		export := "export " + b.vars[0] + "=..."
		if len(b.vars) > 1 {
			export = "export one of them, e.g. " + b.vars[0] + "=..."
		}
		d.errAt(b.line, b.key, "%s not set: %s needs a key of provider %s (%s; only the keys of profiles marked optional: true may stay unset)%s",
			variables(b.vars), needs[prov], prov, export, d.varsNear(b.vars))
	}
	if len(left) == 0 {
		return
	}
	ids := c.Auth.ProfileIDs[:0]
	for _, id := range c.Auth.ProfileIDs {
		if left[id] {
			delete(c.Auth.Profiles, id)
			continue
		}
		ids = append(ids, id)
	}
	c.Auth.ProfileIDs = ids
	for prov, order := range c.Auth.Order {
		order = slices.DeleteFunc(order, func(id string) bool { return left[id] })
		if len(order) == 0 {
			delete(c.Auth.Order, prov)
		} else {
			c.Auth.Order[prov] = order
		}
	}
	if len(goneVars) == 0 {
		return
	}

	// The models only the left-out profiles could reach leave the chains and
	// the models people can choose.
	why := func(ref failover.ModelRef) (string, bool) {
		p, _ := ref.Split()
		vars, gone := goneVars[p]
		if !gone {
			return "", false
		}
		return fmt.Sprintf("no key of provider %s is set (%s)", p, strings.Join(vars, ", ")), true
	}
	drop := func(path string, refs []failover.ModelRef) []failover.ModelRef {
		out := make([]failover.ModelRef, 0, len(refs))
		for i, r := range refs {
			k := fmt.Sprintf("%s[%d]", path, i)
			if w, gone := why(r); gone {
				d.warn(d.lines[k], k, "%s is left out of the fallbacks: %s", r, w)
				d.droppedFallbacks = append(d.droppedFallbacks, r)
				continue
			}
			out = append(out, r)
		}
		return out
	}
	df := &c.Agents.Defaults.Model
	df.Fallbacks = drop("agents.defaults.model.fallbacks", df.Fallbacks)
	for i := range c.Agents.List {
		if a := &c.Agents.List[i]; a.Fallbacks != nil {
			fb := drop(fmt.Sprintf("agents.list[%d].fallbacks", i), *a.Fallbacks)
			a.Fallbacks = &fb
		}
	}
	for _, r := range sortedKeys(c.Models) {
		m := c.Models[r]
		if w, gone := why(r); gone && (m.Selectable || len(m.Aliases) > 0) {
			k := "models." + string(r)
			d.warn(d.lines[k], k, "%s is left out of the models people can choose: %s", r, w)
			m.Selectable, m.Aliases = false, nil
			c.Models[r] = m
		}
	}
}

var (
	slackChannelID   = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	discordChannelID = regexp.MustCompile(`^[0-9]+$`)
)

// checkReach finds settings that parse but cannot work as meant (Doubts):
// swapped or malformed Slack and Discord tokens, an admin channel that cannot
// receive. Token values are never quoted: only their known prefixes.
func (d *decoder) checkReach(line func(string) int) {
	c := d.cfg
	at := func(key, format string, args ...any) { d.doubt(line(key), key, format, args...) }
	if s := c.Channels.Slack; s.Enabled && s.AppToken != "" && s.BotToken != "" {
		app, bot := s.AppToken.Reveal(), s.BotToken.Reveal()
		switch {
		case strings.HasPrefix(app, "xoxb-") && strings.HasPrefix(bot, "xapp-"):
			at("channels.slack.app_token", "the two Slack tokens are swapped: app_token holds the xoxb- bot token and bot_token the xapp- app-level token; swap the values of app_token and bot_token (SLACK_APP_TOKEN and SLACK_BOT_TOKEN)")
		default:
			if msg := slackToken(app, "xapp-", "an app-level token (xapp-...: Basic Information → App-Level Tokens, with the connections:write scope)"); msg != "" {
				at("channels.slack.app_token", "%s", msg)
			}
			if msg := slackToken(bot, "xoxb-", "the Bot User OAuth Token (xoxb-...: OAuth & Permissions, after installing the app)"); msg != "" {
				at("channels.slack.bot_token", "%s", msg)
			}
		}
	}
	if dc := c.Channels.Discord; dc.Enabled && dc.Token != "" {
		if msg := discordToken(dc.Token.Reveal()); msg != "" {
			at("channels.discord.token", "%s", msg)
		}
	}
	if ch := c.Admin.Channel; ch != "" {
		name, id, _ := strings.Cut(ch, ":")
		enabled := map[string]bool{"console": c.Channels.Console.Enabled, "slack": c.Channels.Slack.Enabled, "discord": c.Channels.Discord.Enabled}
		switch {
		case !enabled[name]:
			at("admin.channel", "reports sent to %s would go nowhere: channels.%s is not enabled; enable it, or choose an enabled channel", ch, name)
		case name == "slack" && !slackChannelID.MatchString(id):
			at("admin.channel", "%q looks like a channel name; Slack needs the channel's id, such as slack:C0123ABCD (channel details → Copy channel ID), and the bot must be invited there", ch)
		case name == "discord" && !discordChannelID.MatchString(id):
			at("admin.channel", "%q looks like a channel name; Discord needs the channel's id, a long number such as discord:123456789012345678 (Developer Mode → right-click the channel → Copy Channel ID)", ch)
		}
	}
}

// slackToken says what is wrong with a Slack token that should start with want.
func slackToken(tok, want, what string) string {
	tok = strings.TrimSpace(tok)
	if strings.HasPrefix(tok, want) && len(tok) > len(want)+8 {
		return ""
	}
	for _, p := range []struct{ prefix, name string }{
		{"xapp-", "an app-level token (xapp-)"}, {"xoxb-", "a bot token (xoxb-)"}, {"xoxp-", "a user token (xoxp-)"},
		{"xoxe-", "a token refresh token (xoxe-)"}, {"xoxc-", "a browser session token (xoxc-)"},
	} {
		if strings.HasPrefix(tok, p.prefix) && p.prefix != want {
			return fmt.Sprintf("this is %s; it must be %s", p.name, what)
		}
	}
	if strings.HasPrefix(tok, want) {
		return fmt.Sprintf("this %s token is too short to be real; it must be %s", want, what)
	}
	return fmt.Sprintf("this does not look like a Slack token; it must be %s", what)
}

// discordToken says what is wrong with a Discord bot token: three parts
// separated by dots, the first the bot's user id in base64.
func discordToken(tok string) string {
	tok = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tok), "Bot "))
	const where = "Discord Developer Portal → your application → Bot → Reset Token"
	switch {
	case discordChannelID.MatchString(tok):
		return "this is a number (an application, client or user id), not the bot token; copy the token from the " + where
	case strings.HasPrefix(tok, "xapp-") || strings.HasPrefix(tok, "xoxb-"):
		return "this is a Slack token, not a Discord bot token; copy the token from the " + where
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || len(parts[2]) < 20 {
		if len(parts) == 1 && len(tok) == 32 {
			return "this looks like the application's client secret, not the bot token; copy the token from the " + where
		}
		if len(parts) == 1 && len(tok) == 64 {
			return "this looks like the application's public key, not the bot token; copy the token from the " + where
		}
		return "this does not look like a Discord bot token (three parts separated by dots); copy the token from the " + where
	}
	id, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil || !discordChannelID.Match(id) {
		return "this does not look like a Discord bot token (its first part is not a bot's id); copy the token from the " + where
	}
	return ""
}
