// Checks that need the whole configuration: values, cross references and the
// doubts bot check reports.

package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/llm"
)

var (
	providerID   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)
	anthropicVer = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	channelID    = regexp.MustCompile(`^(slack|discord):[A-Za-z0-9_.:-]+$`)
	serverURL    = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`) // scheme://...
)

// The smallest caps on provider responses (T1) that still leave room for a
// provider's error JSON and a short answer.
const (
	minResponseBytes = 64 << 10
	minAnswerBytes   = 1 << 10
)

// validate checks values and cross references once everything is decoded.
func (d *decoder) validate() {
	c := d.cfg
	line := func(key string) int {
		for k := key; k != ""; {
			if l, ok := d.lines[k]; ok {
				return l
			}
			i := strings.LastIndexAny(k, ".[")
			if i < 0 {
				break
			}
			k = k[:i]
		}
		return 1
	}
	bad := func(key, format string, args ...any) { d.errAt(line(key), key, format, args...) }
	d.checkEnums(bad)

	switch c.Storage.Driver {
	case "sqlite":
		if c.Storage.DSN == "" {
			bad("storage.dsn", "must name the database file, e.g. detour.db")
		} else if m := serverURL.FindStringSubmatch(c.Storage.DSN); m != nil && !strings.EqualFold(m[1], "file") {
			// Never quoted: a server's URL may hold a password (T8).
			hint := "give a file path such as detour.db"
			if s := strings.ToLower(m[1]); s == "postgres" || s == "postgresql" {
				hint = "set storage.driver: postgres for a Postgres server, or " + hint
			}
			bad("storage.dsn", "is a %s:// URL, not a SQLite database file: %s", m[1], hint)
		}
	case "postgres":
		if p := postgresDSNProblem(c.Storage.DSN); p != "" {
			bad("storage.dsn", "%s: want postgres://user:password@host:5432/dbname?sslmode=disable or \"host=... dbname=...\"", p)
		}
	}

	if l := c.Limits; l.MaxAnswerBytes > l.MaxResponseBytes {
		bad("limits.max_answer_bytes", "%d is more than limits.max_response_bytes (%d): the answer is part of the response", l.MaxAnswerBytes, l.MaxResponseBytes)
	}

	if s := c.Channels.Slack; s.Enabled {
		if s.AppToken == "" {
			bad("channels.slack.app_token", "is required when slack is enabled (an xapp-... token)")
		}
		if s.BotToken == "" {
			bad("channels.slack.bot_token", "is required when slack is enabled (an xoxb-... token)")
		}
	}
	if dc := c.Channels.Discord; dc.Enabled && dc.Token == "" {
		bad("channels.discord.token", "is required when discord is enabled")
	}
	if dc := c.Channels.Discord; dc.ShardID >= dc.ShardCount {
		bad("channels.discord.shard_id", "shard %d does not exist: want 0 <= shard_id < shard_count (%d)", dc.ShardID, dc.ShardCount)
	}
	for key, u := range map[string]string{"channels.slack.api_url": c.Channels.Slack.APIURL, "channels.discord.api_url": c.Channels.Discord.APIURL} {
		if u != "" && !httpURL(u) {
			bad(key, "bad URL %q: want http:// or https://", u)
		}
	}

	for _, id := range c.ProviderIDs {
		p := c.Providers[id]
		key := "providers." + id
		if !providerID.MatchString(id) {
			bad(key, "bad provider id %q: use letters, digits, '-', '_' or '.'", id)
		}
		if p.BaseURL == "" {
			bad(key+".base_url", "is required")
		} else if !httpURL(p.BaseURL) {
			bad(key+".base_url", "bad URL %q: want http:// or https://", p.BaseURL)
		}
		d.checkAPI(key, p, bad)
	}

	for _, id := range c.Auth.ProfileIDs {
		p := c.Auth.Profiles[id]
		key := "auth.profiles." + id
		prefix, name, ok := strings.Cut(id, ":")
		if !ok || prefix == "" || name == "" {
			bad(key, "bad profile id %q: want provider:name", id)
		}
		switch {
		case p.Provider == "":
			bad(key+".provider", "is required")
		case !d.hasProvider(p.Provider):
			bad(key+".provider", "unknown provider %q (configured: %s)", p.Provider, d.providerList())
		case ok && prefix != p.Provider:
			bad(key, "profile id %q must start with its provider %q", id, p.Provider+":")
		}
		if _, unset := d.unsetKeys[id]; p.Key == "" && !unset {
			bad(key+".key", "is empty (set it from an environment variable, e.g. key: ${OPENAI_API_KEY})")
		}
	}
	for _, prov := range sortedKeys(c.Auth.Order) {
		key := "auth.order." + prov
		if !d.hasProvider(prov) {
			bad(key, "unknown provider %q (configured: %s)", prov, d.providerList())
			continue
		}
		for i, id := range c.Auth.Order[prov] {
			k := fmt.Sprintf("%s[%d]", key, i)
			p, ok := c.Auth.Profiles[id]
			switch {
			case !ok:
				bad(k, "unknown profile %q", id)
			case p.Provider != prov:
				bad(k, "profile %q belongs to provider %q, not %q", id, p.Provider, prov)
			}
		}
	}
	pol := c.Policy
	if pol.BillingMax < pol.BillingBackoff {
		bad("auth.cooldowns.billing_max_hours", "must be at least billing_backoff_hours")
	}
	if pol.AuthPermanentMax < pol.AuthPermanentBackoff {
		bad("auth.cooldowns.auth_permanent_max_minutes", "must be at least auth_permanent_backoff_minutes")
	}

	df := c.Agents.Defaults
	if df.Model.Primary == "" {
		bad("agents.defaults.model.primary", "is required (a provider/model reference)")
	} else {
		d.checkRef("agents.defaults.model.primary", df.Model.Primary, line)
	}
	for i, r := range df.Model.Fallbacks {
		d.checkRef(fmt.Sprintf("agents.defaults.model.fallbacks[%d]", i), r, line)
	}
	for i, r := range df.Model.ImageFallbacks {
		k := fmt.Sprintf("agents.defaults.model.image_fallbacks[%d]", i)
		d.checkRef(k, r, line)
		if !c.Models[r].TakesImages() {
			bad(k, "%s does not take images: declare it under models with input: [text, image] (I5)", r)
		}
	}
	if df.IdleTimeout <= 0 {
		bad("agents.defaults.timeouts.idle_seconds", "must be positive")
	}
	if pol.AttemptTimeout <= 0 {
		bad("agents.defaults.timeouts.attempt_seconds", "must be positive")
	}
	if pol.RunTimeout < pol.AttemptTimeout {
		bad("agents.defaults.timeouts.run_seconds", "must be at least attempt_seconds")
	}
	if df.PrimaryProbeInterval <= 0 {
		bad("agents.defaults.failover.primary_probe_interval", "must be positive")
	}
	if pol.SharedProbeIntervalMax < pol.SharedProbeInterval {
		bad("agents.defaults.failover.probe_interval_max_seconds", "must be at least probe_interval_seconds (E2: the interval between checks doubles up to it)")
	}
	if pol.MaxParsedWait < pol.MinParsedWait {
		bad("agents.defaults.failover.max_parsed_wait", "must be at least min_parsed_wait")
	}
	ids := map[string]bool{}
	for i, a := range c.Agents.List {
		key := fmt.Sprintf("agents.list[%d]", i)
		if a.ID == "" {
			bad(key+".id", "is required")
		} else if ids[a.ID] {
			bad(key+".id", "duplicate agent id %q", a.ID)
		}
		ids[a.ID] = true
		if a.Model != "" {
			d.checkRef(key+".model", a.Model, line)
		}
		if a.Fallbacks != nil {
			for j, r := range *a.Fallbacks {
				d.checkRef(fmt.Sprintf("%s.fallbacks[%d]", key, j), r, line)
			}
		}
	}
	for _, r := range sortedKeys(c.Models) {
		d.checkRef("models."+string(r), r, line)
		if in := c.Models[r].Input; in != nil {
			key := "models." + string(r) + ".input"
			if !slices.Contains(in, InputText) {
				bad(key, "must include text: every model takes the conversation as text")
			}
		}
		if dep := c.Models[r].Deployment; dep != "" {
			key := "models." + string(r) + ".deployment"
			prov, _ := r.Split()
			if p, ok := c.Providers[prov]; ok && p.API != APIAzure {
				bad(key, "only a model of an azure provider has a deployment, and provider %q speaks %s", prov, p.API)
			} else if llm.ValidDeployment(dep) != nil { // the client's own rule (issue 37)
				bad(key, "bad deployment name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", dep)
			}
		}
	}
	d.checkChoices(bad)
	d.checkChains(line)
	d.leaveOutUnsetKeys()
	d.checkReach(line)
	d.checkPitfalls(line)

	if ch := c.Admin.Channel; ch != "" && ch != "console" && !channelID.MatchString(ch) {
		bad("admin.channel", "bad channel %q: want console, slack:<channel id> or discord:<channel id>", ch)
	}
	for i, u := range c.Admin.Users {
		if !channelID.MatchString(u) {
			bad(fmt.Sprintf("admin.users[%d]", i), "bad user %q: want slack:<user id> or discord:<user id> (console users are always admins)", u)
		}
	}
	for i, u := range c.Access.Users {
		if !accessUser.MatchString(u) {
			bad(fmt.Sprintf("access.users[%d]", i), "bad user %q: want slack:<user id>, discord:<user id> or console:<name>", u)
		}
	}
	for i, ch := range c.Access.Channels {
		if !accessChannel.MatchString(ch) {
			bad(fmt.Sprintf("access.channels[%d]", i), "bad channel %q: want a channel name (slack, discord, console) or a session-key prefix such as slack:T0123:C0456", ch)
		}
	}
	d.checkAlerts(bad)
	if l := c.Server.Listen; l != "" {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			bad("server.listen", "bad address %q: want host:port, for example 127.0.0.1:9464", l)
		}
	}
}

var (
	accessUser    = regexp.MustCompile(`^(slack|discord|console):[^\s:]+$`)
	accessChannel = regexp.MustCompile(`^(slack|discord|console)(:[^\s]+)?$`)
)

func (d *decoder) checkRef(key string, r failover.ModelRef, line func(string) int) {
	prov, model := r.Split()
	if prov == "" || model == "" {
		d.errAt(line(key), key, "bad model %q: want provider/model, e.g. openai/gpt-4o-mini", r)
		return
	}
	if !d.hasProvider(prov) {
		d.errAt(line(key), key, "model %q uses provider %q, which is not configured under providers (configured: %s)", r, prov, d.providerList())
		return
	}
	if d.cfg.Providers[prov].API == APIAzure && d.cfg.Models[r].Deployment == "" && llm.ValidDeployment(model) != nil {
		d.errAt(line(key), key, "model %q of azure provider %q names no deployment, and %q cannot be one (letters, digits, '.', '_' or '-'): set models.%s.deployment to the deployment's name", r, prov, model, r)
	}
}

// checkAPI checks a provider's protocol and the keys that go with it.
func (d *decoder) checkAPI(key string, p Provider, bad func(key, format string, args ...any)) {
	switch p.API {
	case APIOpenAI, APIGemini:
		if p.APIVersion != "" {
			bad(key+".api_version", "applies to api: azure (its api-version) and api: anthropic (its anthropic-version), not to api: %s", p.API)
		}
	case APIAzure:
		switch {
		case p.APIVersion == "":
			bad(key+".api_version", "is required for api: azure: the api-version of your Azure OpenAI resource, e.g. 2024-10-21")
		case !azureVersion.MatchString(p.APIVersion):
			bad(key+".api_version", "bad api-version %q: want a date such as 2024-10-21 or 2025-04-01-preview", p.APIVersion)
		}
		if strings.Contains(p.BaseURL, "/openai/deployments") || strings.Contains(p.BaseURL, "api-version=") {
			bad(key+".base_url", "give the resource endpoint only, e.g. https://NAME.openai.azure.com: detour adds /openai/deployments/<deployment>/chat/completions?api-version=...")
		}
	case APIAnthropic:
		if p.APIVersion != "" && !anthropicVer.MatchString(p.APIVersion) {
			bad(key+".api_version", "bad anthropic-version %q: want a date such as 2023-06-01", p.APIVersion)
		}
		if strings.HasSuffix(strings.TrimRight(p.BaseURL, "/"), "/messages") {
			bad(key+".base_url", "give the API's base, e.g. https://api.anthropic.com/v1: detour adds /messages")
		}
	}
}

func (d *decoder) hasProvider(id string) bool {
	_, ok := d.cfg.Providers[id]
	return ok
}

func (d *decoder) providerList() string {
	if len(d.cfg.ProviderIDs) == 0 {
		return "none"
	}
	return strings.Join(d.cfg.ProviderIDs, ", ")
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// postgresKeyword is the start of a keyword/value connection string ("host=...").
var postgresKeyword = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// postgresDSNProblem says what is wrong with the shape of a Postgres DSN, "" when
// nothing is. It never quotes the DSN, which may hold a password; the driver
// checks the rest when the bot connects.
func postgresDSNProblem(dsn string) string {
	switch {
	case strings.TrimSpace(dsn) == "":
		return "must name the Postgres database"
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return "does not parse as a URL"
		}
		if u.Hostname() == "" && u.Query().Get("host") == "" {
			return "names no host"
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return "has a bad port"
			}
		}
		return ""
	case strings.Contains(dsn, "://"):
		return "is a URL of another scheme than postgres://"
	case !postgresKeyword.MatchString(dsn):
		return "is neither a postgres:// URL nor a keyword=value string"
	}
	return ""
}
