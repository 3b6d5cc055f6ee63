package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/redact"
)

// runCheck is `bot check`: it validates a configuration and prints what it
// resolves to (providers, profiles with secrets shown only as set/missing, the
// candidate chains, limits) and what the bot runs without (warnings). Exit 2
// with file:line: key: errors on a bad one, and on settings that parse but
// cannot work (swapped or malformed tokens, an admin channel that cannot
// receive), which `bot run` only warns about. With --probe it also tries the
// database, each profile, Slack, Discord and the admin channel, prints a table
// of what works, and exits 1 when something does not.
func runCheck(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, path, envFile := configFlags("check")
	probe := fs.Bool("probe", false, "also try the database, one smallest model call per profile, Slack auth.test, Discord /users/@me and the admin channel")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *path == "" {
		if e := config.MisnamedConfig("."); e != nil {
			fmt.Fprintln(stderr, "warning: "+e.Error())
		}
	}
	src, cfg, closeDemo, code := loadConfig("bot check", *path, *envFile, *probe, stderr)
	if code != exitOK {
		return code
	}
	defer closeDemo()
	if refusedWithoutChannel(stderr, src, cfg) { // F1: bot run stops at once on this; so does check
		return exitUsage
	}
	if len(cfg.Doubts) > 0 {
		for _, e := range cfg.Doubts {
			fmt.Fprintln(stderr, e.Error())
		}
		fmt.Fprintf(stderr, "bot check: %d setting(s) would not work as meant (the bot would start, but not do this right)\n", len(cfg.Doubts))
		return exitUsage
	}
	printConfig(stdout, src, cfg)
	if *probe && runProbes(ctx, stdout, cfg) > 0 {
		return exitFailed
	}
	return exitOK
}

// refusedWithoutChannel prints F1's refusal, at the line of channels:, and
// reports whether there was one (check and run then exit 2).
func refusedWithoutChannel(w io.Writer, src configSource, cfg *config.Config) bool {
	e := cfg.NoChannelError(src.name())
	if e == nil {
		return false
	}
	fmt.Fprintln(w, e.Error())
	fmt.Fprintln(w, "bot: the configuration has 1 problem(s); nothing was started")
	return true
}

// printWarnings writes what the bot runs without, and (for `bot run`) the
// settings `bot check` doubts, one "warning:" line each.
func printWarnings(w io.Writer, cfg *config.Config, doubts bool) {
	for _, e := range cfg.Warnings {
		fmt.Fprintln(w, "warning: "+e.Error())
	}
	if doubts {
		for _, e := range cfg.Doubts {
			fmt.Fprintln(w, "warning: "+e.Error())
		}
	}
}

// printConfig writes the resolved configuration. It never prints a secret.
func printConfig(w io.Writer, src configSource, cfg *config.Config) {
	fmt.Fprintf(w, "config %s: ok\n", src.name())
	dsn := redact.URL(cfg.Storage.DSN) // T8: never a password, whatever the driver
	if cfg.Storage.Driver == database.DriverPostgres {
		dsn = database.PostgresName(cfg.Storage.DSN)
	}
	fmt.Fprintf(w, "storage: %s %s\n", cfg.Storage.Driver, dsn)

	ch := cfg.Channels
	var chans []string
	if ch.Console.Enabled {
		chans = append(chans, "console ("+ch.Console.Format+")")
	}
	if ch.Slack.Enabled {
		chans = append(chans, fmt.Sprintf("slack (app_token %s, bot_token %s)", ch.Slack.AppToken.Status(), ch.Slack.BotToken.Status()))
	}
	if ch.Discord.Enabled {
		chans = append(chans, fmt.Sprintf("discord (token %s)", ch.Discord.Token.Status()))
	}
	if len(chans) == 0 {
		chans = []string{"none"}
	}
	fmt.Fprintf(w, "channels: %s\n", strings.Join(chans, ", "))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "providers:")
	for _, id := range cfg.ProviderIDs {
		p := cfg.Providers[id]
		base := redact.URL(p.BaseURL) // T8: credentials inside a URL are never printed
		if src.demo {
			base = "(the built-in fake, on a loopback port chosen at start)"
		}
		extra := ""
		if p.API != "" && p.API != config.APIOpenAI {
			extra = "\tapi " + p.API
			if p.APIVersion != "" {
				extra += " " + p.APIVersion
			}
		}
		if b := cfg.Policy.BillingBackoffByProvider[id]; b > 0 {
			extra += "\tbilling backoff " + b.String()
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", id, base, extra)
	}
	fmt.Fprintln(tw, "profiles:")
	if len(cfg.Auth.ProfileIDs) == 0 {
		fmt.Fprintln(tw, "  (none)")
	}
	for _, id := range cfg.Auth.ProfileIDs {
		p := cfg.Auth.Profiles[id]
		exp := ""
		if !p.ExpiresAt.IsZero() {
			exp = "\texpires " + p.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintf(tw, "  %s\tprovider %s\t%s\tkey %s%s\n", id, p.Provider, p.Type, p.Key.Status(), exp)
	}
	for _, p := range cfg.LeftOut {
		fmt.Fprintf(tw, "  %s\tprovider %s\t%s\tkey missing (%s not set): left out\n", p.ID, p.Provider, p.Type, strings.Join(p.Vars, ", "))
	}
	for _, prov := range cfg.ProviderIDs {
		if order, ok := cfg.Auth.Order[prov]; ok {
			fmt.Fprintf(tw, "  order %s:\t%s\n", prov, strings.Join(order, ", "))
		}
	}
	_ = tw.Flush()

	d := cfg.Agents.Defaults
	fmt.Fprintln(w, "chains (first answers; the rest are fallbacks in order):")
	sc := app.SessionsConfig(cfg) // the chains as the router derives them
	fmt.Fprintf(w, "  default: %s\n", joinRefs(sc.Chain("")))
	for _, a := range cfg.Agents.List {
		c := sc.Chain(a.ID)
		note := ""
		if len(c) == 1 {
			note = " (strict: no fallback)"
		}
		where := strings.Join(a.Channels, ", ")
		if where == "" {
			where = "no channel matches it"
		}
		fmt.Fprintf(w, "  agent %s [%s]: %s%s\n", a.ID, where, joinRefs(c), note)
	}

	b := cfg.Policy
	fmt.Fprintf(w, "timeouts: idle %s, attempt %s, run %s\n", d.IdleTimeout, b.AttemptTimeout, b.RunTimeout)
	cost := "no cost cap"
	switch {
	case cfg.CostCapInert(b.MaxTurnCostUSD):
		cost = fmt.Sprintf("no cost cap in effect (max_turn_cost_usd %g needs prices under models)", b.MaxTurnCostUSD) // F2
	case b.MaxTurnCostUSD > 0:
		cost = fmt.Sprintf("max $%.4g per turn", b.MaxTurnCostUSD)
	}
	fmt.Fprintf(w, "budget: %d paid attempts per turn, %s, %d paid attempts per minute overall\n",
		b.MaxPaidAttemptsPerTurn, cost, cfg.Limits.MaxPaidAttemptsPerMinute)
	admin := cfg.Admin.Channel
	if admin == "" {
		admin = "none"
	}
	fmt.Fprintf(w, "notices: %s; admin reports: %s; admins: %s\n", cfg.Notices.Users, admin, adminsLine(cfg))
	if refs := cfg.ModelRefs(); len(refs) > 0 {
		names := make([]string, len(refs))
		for i, r := range refs {
			names[i] = string(r)
			if m, ok := cfg.Models[r]; ok && len(m.Aliases) > 0 {
				names[i] += " (" + strings.Join(m.Aliases, ", ") + ")"
			}
		}
		allow := ""
		if a := d.Model.Allow; len(a) > 0 {
			allow = "; also any model matching " + strings.Join(a, ", ")
		}
		fmt.Fprintf(w, "models people can choose: %s%s\n", strings.Join(names, ", "), allow)
	}
	if len(cfg.Warnings) > 0 {
		fmt.Fprintln(w, "warnings (the bot runs without these):")
		for _, e := range cfg.Warnings {
			fmt.Fprintln(w, "  "+e.Error())
		}
	}
}

// adminsLine says who may run /recover: admin.users, and the console's
// people while the console is on.
func adminsLine(cfg *config.Config) string {
	users := slices.Clone(cfg.Admin.Users)
	console := cfg.Channels.Console.Enabled
	switch {
	case len(users) == 0 && console:
		return "console only"
	case len(users) == 0:
		return "none (admin.users is empty and the console is off)"
	case console:
		users = append(users, "the console")
	}
	return strings.Join(users, ", ")
}

func joinRefs(refs []failover.ModelRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = string(r)
	}
	return strings.Join(s, " -> ")
}
