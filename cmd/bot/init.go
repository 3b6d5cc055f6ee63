package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/detourbot/detour"
	"github.com/detourbot/detour/redact"
)

// provider is a preset bot init knows: where it answers, the protocol it
// speaks (docs/providers.md), a small model to start with, the variable its
// key goes in and the kind of key it takes (keyKind).
type provider struct {
	name, api, baseURL, model, keyVar, keyKind string
}

var presets = []provider{
	{"openai", "", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY", kindOpenAI},
	// Anthropic's own Messages API (api: anthropic), not the OpenAI-compatible
	// endpoint Anthropic calls a testing aid (docs/providers.md).
	{"anthropic", "anthropic", "", "claude-haiku-4-5", "ANTHROPIC_API_KEY", kindAnthropic},
	{"openrouter", "", "https://openrouter.ai/api/v1", "meta-llama/llama-3-70b", "OPENROUTER_API_KEY", kindOpenRouter},
	{"ollama", "", "http://127.0.0.1:11434/v1", "llama3.2", "", ""}, // a local server needs no key
}

// knownPrices are the list prices (USD per million tokens, input and output)
// of the models bot init offers; a local server's models cost nothing.
var knownPrices = map[string][2]float64{
	"openai/gpt-4o-mini":         {0.15, 0.6},
	"openai/gpt-4o":              {2.5, 10},
	"anthropic/claude-haiku-4-5": {1, 5},
}

// defaultDailyCap is each person's paid calls per UTC day on a team platform
// unless the answer says otherwise (limits.per_user_daily_paid_calls).
const defaultDailyCap = 200

// initPlan is what bot init writes: providers in chain order (the first
// answers, the others' models are the fallbacks), channels, secrets, and for
// Slack or Discord who runs and who may use the bot.
type initPlan struct {
	providers []provider
	models    []string // provider/model, primary first
	channels  []string // console, slack, discord
	secrets   [][2]string
	prices    map[string][2]float64 // provider/model -> USD per million tokens in, out

	admins       []string // slack:U…, discord:…
	everyone     bool     // access open to everyone (else the admins and accessUsers)
	accessUsers  []string // more people who may use the bot
	adminChannel string   // where all-models-down reports go; "" = the log
	dailyCap     int      // limits.per_user_daily_paid_calls
}

// team reports whether the plan has a team platform (Slack, Discord).
func (p *initPlan) team() bool {
	return slices.Contains(p.channels, "slack") || slices.Contains(p.channels, "discord")
}

// repeated is a flag that may be given several times, or once with commas.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*r = append(*r, s)
		}
	}
	return nil
}

// initFlags are bot init's answers given as flags.
type initFlags struct {
	provs, models, keyEnvs, chans, admins repeated
	access, adminChannel                  string
	dailyCap                              int
}

// runInit is `bot init`: a team's onboarding. It asks for the providers, their
// keys and the channels, and for Slack or Discord the admins, who may use the
// bot, the admin channel and a daily cap (or takes them from flags with
// --non-interactive); a wrong answer is said at once and asked again. It writes
// config.yaml, the env file with the secrets (0600; the configuration refers to
// them as ${VAR}) and, for Slack, the app manifest, runs bot check on the
// result and shows how to run it as a service. It never overwrites a file
// without --force (F9).
func runInit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	nonInteractive := fs.Bool("non-interactive", false, "ask nothing: take everything from the flags, and keys from the environment variables --key-env names")
	var f initFlags
	fs.Var(&f.provs, "provider", "a provider: openai, anthropic, openrouter, ollama, or name=https://host/v1 for any OpenAI-compatible one; repeat it (or use commas) for fallbacks, the first answers first")
	fs.Var(&f.models, "model", "a model as provider/model; the first is the primary, the others the fallbacks in order (default: one model of each provider)")
	fs.Var(&f.keyEnvs, "key-env", "the variable that holds a provider's key, provider=VAR (default OPENAI_API_KEY, ANTHROPIC_API_KEY, ...); with --non-interactive its value is read from the environment")
	fs.Var(&f.chans, "channel", "console, slack or discord; repeat it or use commas (default console)")
	fs.Var(&f.admins, "admin", "Slack or Discord: an admin, slack:U0123ABCD or discord:123456789012345678 (may run /recover, gets the reports); repeat it or use commas")
	fs.StringVar(&f.access, "access", "admins", "Slack or Discord: who may use the bot: admins (the admins only), everyone, or a comma-separated list of slack:U…/discord:… besides the admins")
	fs.StringVar(&f.adminChannel, "admin-channel", "", `where all-models-down reports go: slack:C0123ABCD, discord:123…, console, or "" for the log only`)
	fs.IntVar(&f.dailyCap, "daily-cap", defaultDailyCap, "Slack or Discord: each person's paid calls per UTC day (0 = no cap)")
	cfgPath := fs.String("config", "config.yaml", "the configuration to write")
	envPath := fs.String("env-file", defaultEnvFile, "the env file to write the secrets to (mode 0600)")
	force := fs.Bool("force", false, "overwrite files that exist")
	noCheck := fs.Bool("no-check", false, "do not run bot check on the result")
	setUsage(fs, "Usage: bot init [--non-interactive] [--provider NAME]... [--model PROVIDER/MODEL]... [--key-env PROVIDER=VAR]... [--channel NAME]...\n"+
		"                [--admin slack:U…|discord:…]... [--access admins|everyone|IDS] [--admin-channel ID] [--daily-cap N] [--config PATH] [--env-file PATH] [--force] [--no-check]\n")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	manifest := manifestPath(*cfgPath)
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf("bot init: "+format+"; nothing was written", a...)
		// A key given as a flag's value (--provider sk-...) is not quoted back (P4).
		for _, arg := range args {
			for _, v := range strings.FieldsFunc(arg, func(r rune) bool { return r == ',' || r == '=' }) {
				if v = strings.TrimSpace(v); secretKind(v) != "" {
					msg = strings.ReplaceAll(strings.ReplaceAll(msg, v, redact.Marker), strings.ToLower(v), redact.Marker)
				}
			}
		}
		fmt.Fprintln(stderr, msg)
		return exitUsage
	}

	ask := !*nonInteractive
	q := &asker{in: bufio.NewReader(stdin), out: stdout, errOut: stderr, file: fileOf(stdin)}
	var plan *initPlan
	if ask {
		fmt.Fprintf(stdout, "detour init: writes %s, %s (your keys, mode 0600) and, for Slack, %s.\n", *cfgPath, *envPath, manifest)
		fmt.Fprintln(stdout, "Answers are not case-sensitive; a wrong one is asked again. Ctrl-C stops without writing anything.")
		var err error
		if plan, err = q.plan(f); err != nil {
			return fail("%v", err)
		}
	} else {
		var err error
		if plan, err = planInit(orDefault(f.provs, "openai"), f.models, f.keyEnvs, orDefault(f.chans, "console")); err != nil {
			return fail("%v", err)
		}
	}
	targets := []string{*cfgPath, *envPath}
	if slices.Contains(plan.channels, "slack") {
		targets = append(targets, manifest)
	}
	for _, p := range targets {
		// Lstat: a link, dangling or not, is refused, never followed (H1).
		exists, err := initTarget(p)
		if err != nil {
			return fail("%v", err)
		}
		if exists && !*force {
			return fail("%s exists (bot init --force overwrites it)", p)
		}
	}
	// Models, secrets, prices and the team's settings: asked, or from the
	// flags and the environment.
	if err := plan.fill(q, ask); err != nil {
		return fail("%v", err)
	}
	if plan.team() {
		var err error
		if ask {
			err = q.team(plan)
		} else {
			err = plan.teamFromFlags(f)
		}
		if err != nil {
			return fail("%v", err)
		}
	} else if !ask {
		if err := plan.consoleFromFlags(fs, f); err != nil {
			return fail("%v", err)
		}
	}
	if err := writeInit(plan, *cfgPath, *envPath, manifest); err != nil {
		fmt.Fprintf(stderr, "bot init: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s\nwrote %s (mode 0600: it holds the keys; keep it out of version control)\n", *cfgPath, *envPath)
	if slices.Contains(plan.channels, "slack") {
		fmt.Fprintf(stdout, "wrote %s (create the Slack app from it: docs/slack.md)\n", manifest)
	}
	for _, s := range plan.secrets {
		if s[1] == "" {
			fmt.Fprintf(stdout, "to do: put %s=... in %s\n", s[0], *envPath)
		}
	}
	start := "bot"
	if *cfgPath != "config.yaml" || *envPath != defaultEnvFile {
		start = fmt.Sprintf("bot --config %s --env-file %s", *cfgPath, *envPath)
	}
	if *noCheck {
		fmt.Fprintf(stdout, "next: bot check, then %s\n", start)
		serviceHint(stdout, *cfgPath, *envPath)
		return exitOK
	}
	fmt.Fprintln(stdout, "checking it (bot check):")
	code := runCheck(ctx, []string{"--config", *cfgPath, "--env-file", *envPath}, nil, stdout, stderr)
	if code == exitOK {
		fmt.Fprintf(stdout, "next: start it with %s (bot check --probe tries every model and key first)\n", start)
		serviceHint(stdout, *cfgPath, *envPath)
	}
	return code
}

// manifestPath is where bot init writes the Slack app manifest: named after
// the configuration ("config.yaml" -> "config.slack-manifest.yaml"), so that
// it never takes the name of the repository's own slack-manifest.yaml (or
// slack-manifest-mentions.yaml), nor another configuration's manifest.
func manifestPath(cfgPath string) string {
	base := filepath.Base(cfgPath)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	return filepath.Join(filepath.Dir(cfgPath), base+".slack-manifest.yaml")
}

// serviceHint shows how to run the written configuration as a service: the
// container command and the systemd unit the docs describe.
func serviceHint(w io.Writer, cfgPath, envPath string) {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	fmt.Fprintf(w, `to run it as a service (docs/operations.md#docker, docs/operations.md#systemd):
  in a container (docker build -t detour . first):
    docker run -d --name detour --stop-timeout 45 --restart on-failure -v detour-state:/var/lib/detour -v "%s:/etc/detour/config.yaml:ro" --env-file %s detour
  with systemd: install the binary, %s as /etc/detour/config.yaml and %s as /etc/detour/detour.env (0600),
    then packaging/detour.service (its first lines say how), which runs
    ExecStart=/usr/local/bin/bot run --config /etc/detour/config.yaml --log-format json
`, abs(cfgPath), envPath, cfgPath, envPath)
}

func orDefault(r repeated, def string) repeated {
	if len(r) == 0 {
		return repeated{def}
	}
	return r
}

// planInit turns the answers into a plan, or says what is wrong with them.
// Provider and channel names are not case-sensitive.
func planInit(provs, models, keyEnvs, chans []string) (*initPlan, error) {
	p := &initPlan{prices: map[string][2]float64{}}
	var err error
	if p.providers, err = parseProviders(provs); err != nil {
		return nil, err
	}
	for _, kv := range keyEnvs {
		name, v, ok := strings.Cut(kv, "=")
		if !ok && len(p.providers) == 1 {
			name, v, ok = p.providers[0].name, kv, true
		}
		name = strings.ToLower(strings.TrimSpace(name))
		i := slices.IndexFunc(p.providers, func(x provider) bool { return x.name == name })
		if !ok || i < 0 || !validVar(v) {
			return nil, fmt.Errorf("bad --key-env %q: want provider=VARIABLE for one of the providers", kv)
		}
		p.providers[i].keyVar = v
	}
	for _, m := range models {
		if err := oneLine("--model", m, true); err != nil {
			return nil, err
		}
		prov, _, _ := strings.Cut(m, "/")
		if !strings.Contains(m, "/") || !slices.ContainsFunc(p.providers, func(x provider) bool { return x.name == prov }) {
			return nil, fmt.Errorf("bad --model %q: want provider/model for one of the providers", m)
		}
	}
	p.models = append(p.models, models...)
	if p.channels, err = parseChannels(chans); err != nil {
		return nil, err
	}
	return p, nil
}

// parseProviders reads provider answers: a preset's name in any case, or
// name=https://host/v1.
func parseProviders(provs []string) ([]provider, error) {
	var out []provider
	for _, spec := range provs {
		if err := oneLine("--provider", spec, true); err != nil {
			return nil, err
		}
		name, url, custom := strings.Cut(spec, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		var pr provider
		if custom {
			if !validProviderID.MatchString(name) {
				return nil, fmt.Errorf("bad provider name %q: want letters, digits, - or _ before the =", name)
			}
			pr = provider{name: name, baseURL: strings.TrimSpace(url), keyVar: strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"}
		} else {
			i := slices.IndexFunc(presets, func(x provider) bool { return x.name == name })
			if i < 0 {
				return nil, fmt.Errorf("unknown provider %q: want openai, anthropic, openrouter, ollama, or name=https://host/v1", name)
			}
			pr = presets[i]
		}
		if slices.ContainsFunc(out, func(x provider) bool { return x.name == pr.name }) {
			return nil, fmt.Errorf("provider %s is named twice", pr.name)
		}
		out = append(out, pr)
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one provider")
	}
	return out, nil
}

var validProviderID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// parseChannels reads channel answers in any case.
func parseChannels(chans []string) ([]string, error) {
	var out []string
	for _, c := range chans {
		c = strings.ToLower(strings.TrimSpace(c))
		if !slices.Contains([]string{"console", "slack", "discord"}, c) {
			return nil, fmt.Errorf("unknown channel %q: want console, slack or discord", c)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one channel")
	}
	return out, nil
}

// controlIn names the first control character of s (C0, DEL), or "" when it
// has none. A value bot init writes is one line of a file: a line break in
// it would add lines to the env file or the configuration (H1).
func controlIn(s string) string {
	for _, r := range s {
		switch {
		case r == '\n':
			return "a line break (\\n)"
		case r == '\r':
			return "a carriage return (\\r)"
		case r == 0:
			return "a NUL byte"
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("a control character (U+%04X)", r)
		}
	}
	return ""
}

// oneLine refuses a value with a control character, naming the field it is
// in; quote shows the value too (never for a secret).
func oneLine(field, v string, quote bool) error {
	c := controlIn(v)
	if c == "" {
		return nil
	}
	if quote {
		return fmt.Errorf("%s %q holds %s: a value must be one line without control characters", field, v, c)
	}
	return fmt.Errorf("%s holds %s: a value must be one line without control characters", field, c)
}

func validVar(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == ""
}

// The kinds of secret bot init recognises by their look, so that a key pasted
// at the wrong question is caught as it is typed.
const (
	kindOpenAI     = "an OpenAI API key (sk-...)"
	kindAnthropic  = "an Anthropic API key (sk-ant-...)"
	kindOpenRouter = "an OpenRouter API key (sk-or-...)"
	kindGoogle     = "a Google API key (AIza...)"
	kindSlackBot   = "a Slack bot token (xoxb-...)"
	kindSlackApp   = "a Slack app-level token (xapp-...)"
	kindSlackUser  = "a Slack user token (xoxp-...)"
	kindSlackOther = "a Slack token of another kind (xox...-)"
	kindDiscord    = "a Discord bot token"
)

var discordTokenShape = regexp.MustCompile(`^[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}$`)

// secretPrefixes are the secrets bot init knows by their start, the longer
// prefix of a family first.
var secretPrefixes = []struct{ prefix, kind string }{
	{"sk-ant-", kindAnthropic}, {"sk-or-", kindOpenRouter}, {"sk-", kindOpenAI}, {"AIza", kindGoogle},
	{"xoxb-", kindSlackBot}, {"xapp-", kindSlackApp}, {"xoxp-", kindSlackUser}, {"xox", kindSlackOther},
}

// secretKind says what kind of secret s looks like, or "" when it does not
// look like any bot init knows.
func secretKind(s string) string {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(s, p.prefix) {
			return p.kind
		}
	}
	if discordTokenShape.MatchString(strings.TrimPrefix(s, "Bot ")) {
		return kindDiscord
	}
	return ""
}

// wrongKind says why val cannot be the secret wanted (a kind, or "" for a
// provider whose keys look like anything but a chat platform's token), or ""
// when it may be. It never quotes the value.
func wrongKind(val, want, what string) string {
	got := secretKind(val)
	if got == "" || got == want {
		return ""
	}
	if want == "" {
		switch got {
		case kindSlackBot, kindSlackApp, kindSlackUser, kindSlackOther, kindDiscord:
		default:
			return "" // a custom provider may take another provider's key (a proxy)
		}
	}
	return fmt.Sprintf("that looks like %s, not the %s", got, what)
}

// fill completes the models and prices and collects the secrets: asked for
// when ask, else read from the environment (left empty, to fill in later, when
// unset). An answer that cannot be right is asked again.
func (p *initPlan) fill(q *asker, ask bool) error {
	if len(p.models) == 0 {
		for _, pr := range p.providers {
			m := pr.model
			if ask {
				var err error
				m, err = q.until("Model of "+pr.name, m, func(m string) (string, error) {
					if m == "" {
						return "", fmt.Errorf("provider %s needs a model (--model %s/<model>)", pr.name, pr.name)
					}
					return m, oneLine("the model of "+pr.name, m, true)
				})
				if err != nil {
					return err
				}
			}
			if m == "" {
				return fmt.Errorf("provider %s needs a model (--model %s/<model>)", pr.name, pr.name)
			}
			if err := oneLine("the model of "+pr.name, m, true); err != nil {
				return err
			}
			p.models = append(p.models, pr.name+"/"+strings.TrimPrefix(m, pr.name+"/"))
		}
	}
	secret := func(v, what, want string) error {
		check := func(val string) (string, error) {
			val = strings.TrimSpace(val)
			// Never written, never shown: a value with a line break would
			// add lines to the env file (H1).
			if err := oneLine("the value of "+v, val, false); err != nil {
				return "", err
			}
			if msg := wrongKind(val, want, what); msg != "" {
				return "", fmt.Errorf("the value of %s: %s", v, msg)
			}
			return val, nil
		}
		var val string
		var err error
		if ask {
			val, err = q.secretUntil(fmt.Sprintf("%s (stored in the env file as %s; Enter to fill it in later)", what, v), check)
		} else {
			val, err = check(os.Getenv(v))
		}
		if err != nil {
			return err
		}
		p.secrets = append(p.secrets, [2]string{v, val})
		return nil
	}
	for _, pr := range p.providers {
		if pr.keyVar == "" {
			continue
		}
		if err := secret(pr.keyVar, "API key of "+pr.name, pr.keyKind); err != nil {
			return err
		}
	}
	if slices.Contains(p.channels, "slack") {
		if err := secret("SLACK_APP_TOKEN", "Slack app-level token (xapp-...)", kindSlackApp); err != nil {
			return err
		}
		if err := secret("SLACK_BOT_TOKEN", "Slack bot token (xoxb-...)", kindSlackBot); err != nil {
			return err
		}
	}
	if slices.Contains(p.channels, "discord") {
		if err := secret("DISCORD_BOT_TOKEN", "Discord bot token", kindDiscord); err != nil {
			return err
		}
	}
	// Prices: known ones, a local server's nothing, others asked (B1: the
	// cost cap and /status's estimate need them).
	for _, m := range p.models {
		prov, _, _ := strings.Cut(m, "/")
		if pr, ok := knownPrices[m]; ok {
			p.prices[m] = pr
			continue
		}
		if i := slices.IndexFunc(p.providers, func(x provider) bool { return x.name == prov }); i >= 0 && p.providers[i].name == "ollama" {
			p.prices[m] = [2]float64{0, 0}
			continue
		}
		if !ask {
			continue
		}
		_, err := q.until("Price of "+m+" in USD per million tokens, input and output (e.g. 0.15 0.6; Enter if unknown)", "", func(s string) (string, error) {
			if s == "" {
				return "", nil
			}
			pr, err := parsePrices(s)
			if err == nil {
				p.prices[m] = pr
			}
			return s, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// parsePrices reads "0.15 0.6" (or "0.15/0.6", "0.15, 0.6").
func parsePrices(s string) ([2]float64, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '/' || r == ',' || r == '\t' })
	bad := fmt.Errorf("%q: want two prices in USD per million tokens, input then output, such as 0.15 0.6", s)
	if len(f) != 2 {
		return [2]float64{}, bad
	}
	var out [2]float64
	for i, v := range f {
		x, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
		if err != nil || x < 0 || x > 1e6 {
			return [2]float64{}, bad
		}
		out[i] = x
	}
	return out, nil
}

// plan asks for the providers and the channels, each again until the answer
// is one bot init can use.
func (q *asker) plan(f initFlags) (*initPlan, error) {
	provs, chans := []string(f.provs), []string(f.chans)
	if len(provs) == 0 {
		if _, err := q.until("Providers (openai, anthropic, openrouter, ollama, or name=https://host/v1), the first answers first", "openai", func(s string) (string, error) {
			provs = splitList(s)
			_, err := parseProviders(provs)
			return s, err
		}); err != nil {
			return nil, err
		}
	}
	if len(chans) == 0 {
		if _, err := q.until("Channels (console, slack, discord)", "console", func(s string) (string, error) {
			chans = splitList(s)
			_, err := parseChannels(chans)
			return s, err
		}); err != nil {
			return nil, err
		}
	}
	return planInit(provs, f.models, f.keyEnvs, chans)
}

func splitList(s string) []string {
	var r repeated
	_ = r.Set(s)
	return r
}

// Ids as the platforms show them.
var (
	slackUserID      = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackChannelIDRe = regexp.MustCompile(`^[CG][A-Z0-9]{2,}$`)
	discordIDRe      = regexp.MustCompile(`^[0-9]{15,21}$`)
)

// parseUser reads a user id of platform ("slack" or "discord"), with or
// without its "slack:" prefix, in any case; "" platform takes either prefix.
func parseUser(s, platform string) (string, error) {
	s = strings.TrimSpace(s)
	name, id, ok := strings.Cut(s, ":")
	if !ok {
		name, id = platform, s
	}
	name = strings.ToLower(name)
	switch {
	case name == "slack" && slackUserID.MatchString(strings.ToUpper(id)):
		return "slack:" + strings.ToUpper(id), nil
	case name == "discord" && discordIDRe.MatchString(id):
		return "discord:" + id, nil
	case name == "slack":
		return "", fmt.Errorf("%q is not a Slack member id: it looks like U0123ABCD (in Slack: the person's profile → ⋮ → Copy member ID)", s)
	case name == "discord":
		return "", fmt.Errorf("%q is not a Discord user id: a long number such as 123456789012345678 (Developer Mode on, then right-click the person → Copy User ID)", s)
	}
	return "", fmt.Errorf("%q: want slack:U0123ABCD or discord:123456789012345678", s)
}

// parseAdminChannel reads where all-models-down reports go.
func parseAdminChannel(s string, channels []string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") || strings.EqualFold(s, "log") {
		return "", nil
	}
	name, id, _ := strings.Cut(s, ":")
	name = strings.ToLower(name)
	if !slices.Contains(channels, name) {
		return "", fmt.Errorf("%q: reports can go to an enabled channel only (%s), or none", s, strings.Join(channels, ", "))
	}
	switch {
	case name == "console" && id == "":
		return "console", nil
	case name == "slack" && slackChannelIDRe.MatchString(strings.ToUpper(id)):
		return "slack:" + strings.ToUpper(id), nil
	case name == "discord" && discordIDRe.MatchString(id):
		return "discord:" + id, nil
	case name == "slack":
		return "", fmt.Errorf("%q: Slack needs the channel's id, such as slack:C0123ABCD (channel details → Copy channel ID); invite the bot there", s)
	case name == "discord":
		return "", fmt.Errorf("%q: Discord needs the channel's id, such as discord:123456789012345678 (Developer Mode → right-click the channel → Copy Channel ID)", s)
	}
	return "", fmt.Errorf("%q: want console, slack:C0123ABCD, discord:123… or none", s)
}

// parseAccess reads who may use the bot: "admins", "everyone", or ids.
func (p *initPlan) parseAccess(s string) error {
	s = strings.TrimSpace(s)
	p.everyone, p.accessUsers = false, nil
	switch strings.ToLower(s) {
	case "", "admins", "admin":
		return nil
	case "everyone", "all":
		p.everyone = true
		return nil
	}
	for _, u := range splitList(s) {
		id, err := parseUser(u, p.onlyTeam())
		if err != nil {
			return err
		}
		if !slices.Contains(p.accessUsers, id) && !slices.Contains(p.admins, id) {
			p.accessUsers = append(p.accessUsers, id)
		}
	}
	return nil
}

// onlyTeam is the one team platform of the plan, or "" when it has both.
func (p *initPlan) onlyTeam() string {
	s, d := slices.Contains(p.channels, "slack"), slices.Contains(p.channels, "discord")
	switch {
	case s && !d:
		return "slack"
	case d && !s:
		return "discord"
	}
	return ""
}

// teamPlatforms are the plan's team platforms, in a fixed order.
func (p *initPlan) teamPlatforms() []string {
	var out []string
	for _, c := range []string{"slack", "discord"} {
		if slices.Contains(p.channels, c) {
			out = append(out, c)
		}
	}
	return out
}

var platformName = map[string]string{"slack": "Slack", "discord": "Discord"}

// team asks, for Slack or Discord, who the admins are, who may use the bot,
// where reports go and the daily cap; every question states its default.
func (q *asker) team(p *initPlan) error {
	for _, pl := range p.teamPlatforms() {
		example := "U0123ABCD: the person's profile → ⋮ → Copy member ID"
		if pl == "discord" {
			example = "123456789012345678: Developer Mode, then right-click the person → Copy User ID"
		}
		if _, err := q.until(fmt.Sprintf("%s admins, who may run /recover and get the reports (ids such as %s; comma-separated)", platformName[pl], example), "", func(s string) (string, error) {
			var ids []string
			for _, u := range splitList(s) {
				id, err := parseUser(u, pl)
				if err != nil {
					return "", err
				}
				if !strings.HasPrefix(id, pl+":") {
					return "", fmt.Errorf("%s is not a %s admin", id, platformName[pl])
				}
				ids = append(ids, id)
			}
			if len(ids) == 0 {
				return "", fmt.Errorf("name at least one %s admin: without one nobody there can run /recover", platformName[pl])
			}
			for _, id := range ids {
				if !slices.Contains(p.admins, id) {
					p.admins = append(p.admins, id)
				}
			}
			return s, nil
		}); err != nil {
			return err
		}
	}
	if _, err := q.until("Who may use the bot: admins (only the admins above), everyone (anyone in the workspace or server), or more ids besides the admins, comma-separated", "admins", func(s string) (string, error) {
		return s, p.parseAccess(s)
	}); err != nil {
		return err
	}
	if _, err := q.until("Admin channel for the reports when every model is down (slack:C0123ABCD, discord:123…, console; none = the log only)", "none", func(s string) (string, error) {
		ch, err := parseAdminChannel(s, p.channels)
		p.adminChannel = ch
		return s, err
	}); err != nil {
		return err
	}
	_, err := q.until("Daily cap: each person's paid calls per UTC day (0 = no cap)", strconv.Itoa(defaultDailyCap), func(s string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return "", fmt.Errorf("%q: want a whole number, 0 for no cap", s)
		}
		p.dailyCap = n
		return s, nil
	})
	return err
}

// teamFromFlags takes the team's settings from the flags; Slack or Discord
// needs an admin there (--admin).
func (p *initPlan) teamFromFlags(f initFlags) error {
	for _, a := range f.admins {
		id, err := parseUser(a, p.onlyTeam())
		if err != nil {
			return fmt.Errorf("bad --admin: %w", err)
		}
		if !slices.Contains(p.admins, id) {
			p.admins = append(p.admins, id)
		}
	}
	for _, pl := range p.teamPlatforms() {
		if !slices.ContainsFunc(p.admins, func(a string) bool { return strings.HasPrefix(a, pl+":") }) {
			return fmt.Errorf("--channel %s needs an admin there: --admin %s (who may run /recover and gets the reports)", pl, map[string]string{"slack": "slack:U0123ABCD", "discord": "discord:123456789012345678"}[pl])
		}
	}
	if err := p.parseAccess(f.access); err != nil {
		return fmt.Errorf("bad --access: %w", err)
	}
	ch, err := parseAdminChannel(f.adminChannel, p.channels)
	if err != nil {
		return fmt.Errorf("bad --admin-channel: %w", err)
	}
	p.adminChannel = ch
	if f.dailyCap < 0 {
		return fmt.Errorf("bad --daily-cap %d: want 0 (no cap) or more", f.dailyCap)
	}
	p.dailyCap = f.dailyCap
	return nil
}

// consoleFromFlags takes the flags that apply without Slack or Discord: the
// admin channel (console, or none). The team's own flags are refused rather
// than dropped, so a script learns they did nothing.
func (p *initPlan) consoleFromFlags(fs *flag.FlagSet, f initFlags) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if err == nil && (fl.Name == "admin" || fl.Name == "access" || fl.Name == "daily-cap") {
			err = fmt.Errorf("--%s is for Slack or Discord (--channel slack or --channel discord); with the console alone it would do nothing", fl.Name)
		}
	})
	if err != nil {
		return err
	}
	ch, err := parseAdminChannel(f.adminChannel, p.channels)
	if err != nil {
		return fmt.Errorf("bad --admin-channel: %w", err)
	}
	p.adminChannel = ch
	return nil
}

// secret is the value given for variable v ("" when none was).
func (p *initPlan) secret(v string) string {
	for _, s := range p.secrets {
		if s[0] == v {
			return s[1]
		}
	}
	return ""
}

// quoteList renders ids as a YAML flow list.
func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func price(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// yaml is the configuration the plan makes. Every secret is a ${VAR}
// reference; no value is in it.
func (p *initPlan) yaml(envPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by bot init. Every key is documented in config.example.yaml.\n")
	fmt.Fprintf(&b, "# Keys and tokens are in %s (KEY=value lines, mode 0600), never in this file:\n", envPath)
	fmt.Fprintf(&b, "# bot reads ./detour.env by itself (or --env-file), systemd as EnvironmentFile=, docker as --env-file.\n")
	b.WriteString("storage: {driver: sqlite, dsn: detour.db}\nchannels:\n")
	on := func(c string) bool { return slices.Contains(p.channels, c) }
	fmt.Fprintf(&b, "  console: {enabled: %t, format: text}\n", on("console"))
	if on("slack") {
		b.WriteString("  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\n")
	}
	if on("discord") {
		b.WriteString("  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}\n")
	}
	b.WriteString("providers:\n")
	for _, pr := range p.providers {
		switch {
		case pr.api != "" && pr.baseURL == "":
			fmt.Fprintf(&b, "  %s: {api: %s}   # docs/providers.md\n", pr.name, pr.api)
		case pr.api != "":
			fmt.Fprintf(&b, "  %s: {api: %s, base_url: %q}\n", pr.name, pr.api, pr.baseURL)
		default:
			fmt.Fprintf(&b, "  %s: {base_url: %q}\n", pr.name, pr.baseURL)
		}
	}
	keyed := slices.ContainsFunc(p.providers, func(x provider) bool { return x.keyVar != "" })
	if keyed {
		b.WriteString("auth:\n  profiles:\n")
		for _, pr := range p.providers {
			if pr.keyVar == "" {
				continue
			}
			// A key left to fill in later makes its profile optional (F11):
			// the bot runs without it until the env file has the key.
			if p.secret(pr.keyVar) == "" {
				fmt.Fprintf(&b, "    %s:main: {provider: %s, key: \"${%s}\", optional: true}   # no key yet: set %s in %s\n", pr.name, pr.name, pr.keyVar, pr.keyVar, envPath)
				continue
			}
			fmt.Fprintf(&b, "    %s:main: {provider: %s, key: \"${%s}\"}\n", pr.name, pr.name, pr.keyVar)
		}
	}
	b.WriteString("agents:\n  defaults:\n    model:\n")
	fmt.Fprintf(&b, "      primary: %s\n", p.models[0])
	if len(p.models) > 1 {
		fmt.Fprintf(&b, "      fallbacks: [%s]\n", strings.Join(p.models[1:], ", "))
	}
	b.WriteString("# Prices in USD per million tokens (the cost cap and /status's estimate need them).\nmodels:\n")
	for _, m := range p.models {
		if pr, ok := p.prices[m]; ok {
			fmt.Fprintf(&b, "  %q: {usd_per_mtok_in: %s, usd_per_mtok_out: %s}\n", m, price(pr[0]), price(pr[1]))
		} else {
			fmt.Fprintf(&b, "  %q: {}   # price unknown: add usd_per_mtok_in and usd_per_mtok_out\n", m)
		}
	}
	if !p.team() {
		b.WriteString("admin:\n  users: []      # who may run /recover and set a channel's model: slack:U0123, discord:456\n")
		if p.adminChannel != "" {
			fmt.Fprintf(&b, "  channel: %q   # where the reports go when every model is down\n", p.adminChannel)
		}
		return b.String()
	}
	b.WriteString("admin:\n")
	fmt.Fprintf(&b, "  users: %s   # may run /recover and set a channel's model\n", quoteList(p.admins))
	if p.adminChannel != "" {
		fmt.Fprintf(&b, "  channel: %q   # where the reports go when every model is down\n", p.adminChannel)
	} else {
		b.WriteString("  channel: \"\"   # reports when every model is down go to the log only; e.g. slack:C0123ABCD\n")
	}
	b.WriteString("access:\n")
	if p.everyone {
		b.WriteString("  users: []   # everyone in the workspace or server may use the bot\n")
	} else {
		users := append(slices.Clone(p.admins), p.accessUsers...)
		if on("console") {
			users = append(users, "console:local") // whoever types in this terminal
		}
		fmt.Fprintf(&b, "  users: %s   # only these people may use the bot (admins always may)\n", quoteList(users))
	}
	b.WriteString("limits:\n")
	fmt.Fprintf(&b, "  per_user_daily_paid_calls: %d   # each person's paid calls per UTC day; 0 = no cap\n", p.dailyCap)
	return b.String()
}

// writeInit writes the files, each through writeFileAtomic: the env file
// first, created 0600, so a key is never readable by others, not even for a
// moment, and never lands in a file that existed before (H1). On a failure
// the error says which files were written and which were not.
func writeInit(p *initPlan, cfgPath, envPath, manifest string) error {
	var env strings.Builder
	env.WriteString("# detour's secrets: KEY=value lines, read by bot, systemd (EnvironmentFile=) and docker (--env-file).\n")
	env.WriteString("# Mode 0600; keep it out of version control.\n")
	for _, s := range p.secrets {
		fmt.Fprintf(&env, "%s=%s\n", s[0], s[1])
	}
	type file struct {
		path string
		data []byte
		perm os.FileMode
	}
	files := []file{{envPath, []byte(env.String()), 0o600}, {cfgPath, []byte(p.yaml(envPath)), 0o644}}
	if slices.Contains(p.channels, "slack") {
		files = append(files, file{manifest, detour.SlackManifest, 0o644})
	}
	for i, f := range files {
		if err := writeFileAtomic(f.path, f.data, f.perm); err != nil {
			var done, left []string
			for j, g := range files {
				if j < i {
					done = append(done, g.path)
				} else {
					left = append(left, g.path)
				}
			}
			msg := fmt.Sprintf("%v; not written: %s", err, strings.Join(left, ", "))
			if len(done) > 0 {
				msg += "; written: " + strings.Join(done, ", ")
			}
			return errors.New(msg)
		}
	}
	return nil
}

// initTarget says whether a file bot init is to write exists. A symbolic
// link (dangling or not) or anything but a regular file is an error naming
// it: bot init writes no file through a link (H1).
func initTarget(path string) (bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return true, fmt.Errorf("%s is a symbolic link: bot init does not write through links (remove it, or choose another path)", path)
	case !fi.Mode().IsRegular():
		return true, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return true, nil
}

// renameFile is os.Rename; the tests make it fail.
var renameFile = os.Rename

// writeFileAtomic is the one way bot init writes a file: data goes to a new
// temporary file in the same folder (O_CREATE|O_EXCL, mode perm from its
// creation), is synced, and is renamed over path. path is therefore either
// what it was or the whole new file, an existing file is replaced (its
// mode, owner and other links keep nothing of the new contents) and never
// written to, and a link at path is refused (initTarget). On a failure the
// temporary file is removed.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	if _, err := initTarget(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var f *os.File
	for try := 0; ; try++ {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		f, err = os.OpenFile(filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 10 {
			return fmt.Errorf("%s: creating a temporary file beside it: %w", path, err)
		}
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("%s: writing %s: %w", path, tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("%s: syncing %s: %w", path, tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%s: closing %s: %w", path, tmp, err)
	}
	if err = renameFile(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil { // the rename itself survives a crash
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// asker asks questions on a terminal or reads the answers from a pipe.
type asker struct {
	in     *bufio.Reader
	out    io.Writer
	errOut io.Writer // why an answer is asked again
	file   *os.File  // stdin when it is a file or terminal, to hide typed keys
}

func fileOf(r io.Reader) *os.File {
	f, _ := r.(*os.File)
	return f
}

var errEOF = errors.New("input ended before every question was answered")

func (q *asker) read() (string, error) {
	s, err := q.in.ReadString('\n')
	if err != nil && (s == "" || !errors.Is(err, io.EOF)) {
		return "", errEOF
	}
	return strings.TrimSpace(s), nil
}

// line asks one question; Enter takes def.
func (q *asker) line(prompt, def string) (string, error) {
	if def != "" {
		prompt += " [" + def + "]"
	}
	fmt.Fprint(q.out, prompt+": ")
	s, err := q.read()
	if err != nil {
		return "", err
	}
	if s == "" {
		s = def
	}
	return s, nil
}

// until asks until check takes the answer (Enter takes def): a wrong answer
// is said at once, on errOut, and asked again, never found after the last
// question. It ends only when the input does.
func (q *asker) until(prompt, def string, check func(string) (string, error)) (string, error) {
	for {
		s, err := q.line(prompt, def)
		if err != nil {
			return "", err
		}
		// A key pasted at the wrong question is never taken (as a model
		// name, say) nor quoted back in the answer (P4).
		if kind := secretKind(strings.TrimSpace(s)); kind != "" {
			fmt.Fprintf(q.errOut, "bot init: that looks like %s, which this question does not take (keys and tokens have questions of their own); try again\n", kind)
			continue
		}
		v, err := check(s)
		if err == nil {
			return v, nil
		}
		fmt.Fprintf(q.errOut, "bot init: %v; try again\n", err)
	}
}

// secretUntil is until for a secret: asked without echo where the terminal
// allows, never shown, not even when it is wrong.
func (q *asker) secretUntil(prompt string, check func(string) (string, error)) (string, error) {
	for {
		s, err := q.secret(prompt)
		if err != nil {
			return "", err
		}
		v, err := check(s)
		if err == nil {
			return v, nil
		}
		fmt.Fprintf(q.errOut, "bot init: %v; try again\n", err)
	}
}

// secret asks for a key without showing it where the terminal allows.
func (q *asker) secret(prompt string) (string, error) {
	if q.file == nil || !isTerminal(q.file) {
		fmt.Fprint(q.out, prompt+": ")
		return q.read()
	}
	fmt.Fprint(q.out, prompt+": ")
	s, hidden, err := withoutEcho(q.file, q.read)
	if hidden {
		fmt.Fprintln(q.out) // the Enter was not echoed either
	}
	return s, err
}
