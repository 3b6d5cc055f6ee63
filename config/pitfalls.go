// Pitfalls: settings that parse and even run, but not as the person who wrote
// them believes. Each is a doubt (`bot check` fails on it, `bot run` warns) or,
// when the bot merely runs with less protection than it could, a warning.

package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/suggest"
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
	d.checkTeam(line)
	d.checkImages(line)
	d.checkListen(line)
}

// platforms are the team chat channels: their people are many, and not all
// of them are the operator.
var platforms = []struct{ name, where, userID, how string }{
	{"slack", "the Slack workspace", "slack:U0123ABCD", "your profile → ⋯ → Copy member ID"},
	{"discord", "the Discord server", "discord:123456789012345678", "Developer Mode → right-click your name → Copy User ID"},
}

// checkTeam warns about a team platform that is on with nobody in charge
// there, or open to everyone in it.
func (d *decoder) checkTeam(line func(string) int) {
	c := d.cfg
	for _, p := range platforms {
		on := p.name == "slack" && c.Channels.Slack.Enabled || p.name == "discord" && c.Channels.Discord.Enabled
		if !on {
			continue
		}
		enabled := "channels." + p.name + ".enabled"
		if !slices.ContainsFunc(c.Admin.Users, func(u string) bool { return strings.HasPrefix(u, p.name+":") }) {
			k := "admin.users"
			if _, ok := d.lines[k]; !ok {
				k = enabled
			}
			d.warn(line(k), k, "%s is on but no admin can act there: admin.users names no %s: user, so nobody in %s may run /recover or set a channel's model (T9); add yourself, e.g. admin: {users: [\"%s\"]} (%s)",
				enabled, p.name, p.where, p.userID, p.how)
		}
		// Access is open there when no user list narrows it and the channel
		// list (if any) lets the whole platform in.
		open := len(c.Access.Users) == 0 &&
			(len(c.Access.Channels) == 0 || slices.Contains(c.Access.Channels, p.name))
		if open {
			k := "access"
			if _, ok := d.lines[k]; !ok {
				k = enabled
			}
			d.warn(line(k), k, "everyone in %s may talk to the bot and spend on its paid calls: access.users is empty and access.channels does not narrow %s; list who may (access: {users: [%s:...]}) or where (access: {channels: [\"%s:<team>:<channel>\"]}) (T5)",
				p.where, p.name, p.name, p.name)
		}
	}
}

// checkImages warns when the primary takes images and no other model of the
// default chain does: a message with images then has no fallback (I5). A
// chain without any fallback has its own warning.
func (d *decoder) checkImages(line func(string) int) {
	c := d.cfg
	m := c.Agents.Defaults.Model
	if m.Primary == "" || len(m.Fallbacks) == 0 || !c.Models[m.Primary].TakesImages() {
		return
	}
	for _, r := range append(slices.Clone(m.Fallbacks), m.ImageFallbacks...) {
		if r != m.Primary && c.Models[r].TakesImages() {
			return
		}
	}
	k := "agents.defaults.model.image_fallbacks"
	if _, ok := d.lines[k]; !ok {
		k = "agents.defaults.model.fallbacks"
	}
	d.warn(line(k), k, "only the primary %s takes images: when it fails, a message with images gets an error instead of a fallback's answer; name a model that takes them in image_fallbacks (declared under models with input: [text, image]) (I5)", m.Primary)
}

// checkListen warns about an operations endpoint reachable from other
// machines: it has no authentication.
func (d *decoder) checkListen(line func(string) int) {
	l := d.cfg.Server.Listen
	if l == "" {
		return
	}
	host, _, err := net.SplitHostPort(l)
	if err != nil || loopbackHost(host) {
		return
	}
	where := "every network this machine is on"
	if host != "" && net.ParseIP(host) != nil && !net.ParseIP(host).IsUnspecified() {
		where = host
	}
	d.warn(line("server.listen"), "server.listen", "serves /healthz, /readyz and /metrics without authentication to %s; keep it on loopback (listen: 127.0.0.1:9464) or behind your own proxy; in a container, publish it to loopback only (docker run -p 127.0.0.1:9464:9464)", where)
}

// MisnamedConfig returns a warning when dir holds config.yml but no
// config.yaml: without --config the bot reads only config.yaml, so it would
// run the demo and leave that file unread. nil when there is nothing to say.
func MisnamedConfig(dir string) *Error {
	yaml := filepath.Join(dir, "config.yaml")
	if _, err := os.Stat(yaml); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	yml := filepath.Join(dir, "config.yml")
	if fi, err := os.Stat(yml); err != nil || fi.IsDir() {
		return nil
	}
	return &Error{File: yml, Msg: fmt.Sprintf("is not read: without --config the bot reads %s only, so it runs the built-in demo; rename it (mv %s %s) or pass --config %s", yaml, yml, yaml, yml)}
}

// nearVar names a variable that is set and looks like the unset one was
// meant (${OPENAI_KEY} while OPENAI_API_KEY is set), or "". Only names are
// compared and said, never values. The candidates are the variables the file
// refers to, the usual ones, and the process environment's names; each is
// confirmed with getenv, so only what the bot would really read is offered.
func (d *decoder) nearVar(name string) string {
	seen := map[string]bool{name: true}
	best, bestD := "", -1
	consider := func(v string) {
		if seen[v] {
			return
		}
		seen[v] = true
		if !nearName(name, v) {
			return
		}
		if val, ok := d.getenv(v); !ok || val == "" {
			return
		}
		if dist := suggest.Distance(name, v); bestD < 0 || dist < bestD || dist == bestD && v < best {
			best, bestD = v, dist
		}
	}
	for _, ref := range d.envRefs {
		for _, m := range envRef.FindAllString(ref, -1) {
			n, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(m, "${"), "}"), ":-")
			consider(n)
		}
	}
	for _, v := range usualVars {
		consider(v)
	}
	for _, kv := range os.Environ() {
		n, _, _ := strings.Cut(kv, "=")
		consider(n)
	}
	return best
}

// didYouMean is the tail of a message about the unset variable name: "" or
// "; OPENAI_API_KEY is set: did you mean ${OPENAI_API_KEY}?".
func (d *decoder) didYouMean(name string) string {
	if v := d.nearVar(name); v != "" {
		return fmt.Sprintf("; %s is set: did you mean ${%s}?", v, v)
	}
	return ""
}

// usualVars are the variables bot init and the documentation use.
var usualVars = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY",
	"SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "DISCORD_BOT_TOKEN", "DETOUR_DB_PASSWORD",
}

// fillers are the words a variable's name may have or lack without naming
// something else: OPENAI_KEY and OPENAI_API_KEY mean one key, while
// SLACK_APP_TOKEN and SLACK_BOT_TOKEN, or OPENAI_API_KEY and
// OPENAI_API_KEY_BACKUP, are different ones.
var fillers = map[string]bool{"API": true, "BOT": true, "KEY": true, "TOKEN": true}

// nearName reports whether b looks like what a was meant to be: the same name
// in another case, a typo of at most two letters, or the same words but for
// filler words.
func nearName(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) >= 4 && len(b) >= 4 && suggest.Distance(a, b) <= 2 {
		return true
	}
	wa, wb := words(a), words(b)
	var ka, kb []string
	for _, w := range wa {
		if !fillers[w] {
			ka = append(ka, w)
		}
	}
	for _, w := range wb {
		if !fillers[w] {
			kb = append(kb, w)
		}
	}
	return len(ka) > 0 && slices.Equal(ka, kb)
}

// words splits a variable name into upper-case words.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToUpper(s), func(r rune) bool { return r == '_' })
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

// loopbackHost reports whether a listen address's host is this machine only
// ("" and 0.0.0.0 are every interface).
func loopbackHost(h string) bool {
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
