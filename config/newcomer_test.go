package config

import (
	"strings"
	"testing"
)

// base is a valid configuration the cases below extend.
const base = "providers:\n  openai: {base_url: https://api.openai.com/v1}\nagents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini}\n"

// Plain-word messages for what a newcomer gets wrong first: an empty file, a bad
// indentation (the right line, no parser words), numbers out of bounds. Exact
// texts.
func TestParse_PlainMessages(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty file", "",
			"c.yaml:1: the file is empty: start from config.example.yaml (cp config.example.yaml config.yaml), or set at least agents.defaults.model.primary"},
		{"only comments", "# nothing yet\n\n",
			"c.yaml:1: the file is empty: start from config.example.yaml (cp config.example.yaml config.yaml), or set at least agents.defaults.model.primary"},
		{"a list", "- openai\n",
			"c.yaml:1: the file must hold settings as key: value lines, like config.example.yaml, not a list"},
		{"indented too little",
			"agents:\n  defaults:\n    model:\n      primary: openai/gpt-4o-mini\n     fallbacks: [openai/gpt-4o]\n",
			`c.yaml:5: bad indentation: "fallbacks" starts at 5 spaces, but the keys above it start at 6 spaces (line 4) or 4 spaces (line 3); keys of one section must line up exactly`},
		{"indented too deep",
			"agents:\n  defaults:\n    model:\n      primary: openai/gpt-4o-mini\n        fallbacks: [openai/gpt-4o]\n",
			`c.yaml:5: bad indentation: "fallbacks" starts at 8 spaces, deeper than line 4, which already has its value; to put it beside line 4, start it at 6 spaces`},
		{"one space off at the top",
			"storage:\n  driver: sqlite\n dsn: x.db\n" + base,
			`c.yaml:3: bad indentation: "dsn" starts at 1 space, but the keys above it start at 2 spaces (line 2) or 0 spaces (line 1); keys of one section must line up exactly`},
		{"a tab", "providers:\n\topenai: {base_url: https://x}\n",
			"c.yaml:2: a tab indents this line; YAML needs spaces"},
		{"unclosed brace", "agents:\n  defaults:\n    model: {primary: openai/x\n",
			"c.yaml:3: a { ... } or [ ... ] opened on this line is never closed: a '}' or ']' is missing"},
		{"two colons", "providers:\n  openai: {base_url: https://api.openai.com/v1}\n  anthropic: x: y\n",
			"c.yaml:3: invalid YAML: a ':' where no key can start: put quotes around a value that contains ': ', or check the indentation"},
		{"negative timeout", base + "    timeouts: {idle_seconds: -5}\n",
			"c.yaml:6: agents.defaults.timeouts.idle_seconds: bad number -5: must not be negative"},
		{"huge timeout", base + "    timeouts: {run_seconds: 1e12}\n",
			"c.yaml:6: agents.defaults.timeouts.run_seconds: bad number 1e12: must be at most 315360000"},
		{"negative hours", "auth: {cooldowns: {billing_backoff_hours: -1}}\n" + base,
			"c.yaml:1: auth.cooldowns.billing_backoff_hours: bad number -1: must not be negative"},
		{"jitter above its bound", "auth: {cooldowns: {jitter: 0.9}}\n" + base,
			"c.yaml:1: auth.cooldowns.jitter: bad number 0.9: must be at most 0.5"},
		{"a word for a number", "limits: {max_message_bytes: lots}\n" + base,
			`c.yaml:1: limits.max_message_bytes: bad number "lots": want a whole number`},
		{"zero budget", base + "    budget: {max_paid_attempts_per_turn: 0}\n",
			"c.yaml:6: agents.defaults.budget.max_paid_attempts_per_turn: bad number 0: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.src), nil)
			if err == nil {
				t.Fatal("parsed")
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n%s\nwant\n%s", got, tc.want)
			}
			for _, jargon := range []string{"mapping values", "did not find expected", "e+", "not something else"} {
				if strings.Contains(err.Error(), jargon) {
					t.Errorf("parser jargon %q in %q", jargon, err)
				}
			}
		})
	}
}

// Models people can choose: aliases and allow patterns are validated with exact
// messages.
func TestParse_ModelChoices(t *testing.T) {
	const head = "providers:\n  openai: {base_url: https://api.openai.com/v1}\n  anthropic: {base_url: https://api.anthropic.com/v1/}\n"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"alias used twice",
			head + "agents: {defaults: {model: {primary: openai/a, fallbacks: [anthropic/b]}}}\nmodels:\n  openai/a: {aliases: [fast]}\n  anthropic/b: {aliases: [Fast]}\n",
			`c.yaml:7: models.anthropic/b.aliases[0]: alias "Fast" is already an alias of openai/a; each alias names one model`},
		{"alias like a model",
			head + "agents: {defaults: {model: {primary: openai/a}}}\nmodels:\n  openai/a: {aliases: [openai/b]}\n",
			`c.yaml:6: models.openai/a.aliases[0]: alias "openai/b" looks like a model (provider/model); an alias is one word, such as fast`},
		{"reserved word",
			head + "agents: {defaults: {model: {primary: openai/a}}}\nmodels:\n  openai/a: {aliases: [default]}\n",
			`c.yaml:6: models.openai/a.aliases[0]: alias "default" is a word /model keeps for itself (/model default, /model list)`},
		{"bad characters",
			head + "agents: {defaults: {model: {primary: openai/a}}}\nmodels:\n  openai/a: {aliases: [\"my model\"]}\n",
			`c.yaml:6: models.openai/a.aliases[0]: bad alias "my model": use letters, digits, '-', '_' or '.' (at most 64), starting with a letter or digit`},
		{"alias of a model nobody can choose",
			head + "agents: {defaults: {model: {primary: openai/a}}}\nmodels:\n  openai/b: {aliases: [big]}\n",
			"c.yaml:6: models.openai/b.aliases: openai/b has aliases but nobody can choose it: add selectable: true (or name it in a chain)"},
		{"pattern without a provider",
			head + "agents: {defaults: {model: {primary: openai/a, allow: [\"gpt-*\"]}}}\n",
			`c.yaml:4: agents.defaults.model.allow[0]: bad pattern "gpt-*": want provider/model, with * for any characters, e.g. openai/*`},
		{"pattern of an unknown provider",
			head + "agents: {defaults: {model: {primary: openai/a, allow: [\"mistral/*\"]}}}\n",
			`c.yaml:4: agents.defaults.model.allow[0]: pattern "mistral/*" names provider "mistral", which is not configured under providers (configured: openai, anthropic)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.src), nil)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
	cfg, err := Parse("c.yaml", []byte(head+"agents: {defaults: {model: {primary: openai/a, allow: [\"openai/*\"]}}}\nmodels:\n  openai/b: {aliases: [big]}\n  anthropic/c: {selectable: true, aliases: [smart]}\n  anthropic/d: {context_window: 1000}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinModelRefs(cfg); got != "openai/a,anthropic/c" {
		t.Errorf("ModelRefs = %s (a pattern match and a facts-only entry are not listed)", got)
	}
	if !allowed(cfg.Agents.Defaults.Model.Allow, "openai/b") || allowed(cfg.Agents.Defaults.Model.Allow, "anthropic/b") {
		t.Error("allow patterns")
	}
}

func joinModelRefs(c *Config) string {
	var s []string
	for _, r := range c.ModelRefs() {
		s = append(s, string(r))
	}
	return strings.Join(s, ",")
}

// The one-key path: following the README with only OPENAI_API_KEY exported, the
// example runs on the primary; every other profile is optional there and left
// out with a warning, and so are the fallbacks only they could reach. The key
// the primary needs stays an error, with advice that agrees with the rest (no
// ${X:-} hint that would lead to a second error); so does the key of a profile
// that is not optional: which profiles exist never depends on the environment
// alone. covers F11
func TestParse_F11_OneKeyPath(t *testing.T) {
	src := `providers:
  openai: {base_url: https://api.openai.com/v1}
  anthropic: {base_url: https://api.anthropic.com/v1/}
auth:
  profiles:
    openai:main: {provider: openai, key: "${OPENAI_API_KEY}"}
    openai:backup: {provider: openai, key: "${OPENAI_API_KEY_BACKUP:-}", optional: true}
    anthropic:main: {provider: anthropic, key: "${ANTHROPIC_API_KEY}", optional: true}
  order: {openai: [openai:main, openai:backup]}
agents:
  defaults:
    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5, openai/gpt-4o]}
models:
  anthropic/claude-haiku-4-5: {aliases: [haiku]}
`
	cfg, err := Parse("c.yaml", []byte(src), fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-CANARY-one"}))
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for _, w := range cfg.Warnings {
		warnings = append(warnings, w.Error())
	}
	want := []string{
		"c.yaml:7: auth.profiles.openai:backup.key: environment variable OPENAI_API_KEY_BACKUP is not set: profile openai:backup is left out, and the bot runs without it",
		"c.yaml:8: auth.profiles.anthropic:main.key: environment variable ANTHROPIC_API_KEY is not set: profile anthropic:main is left out, and the bot runs without it",
		"c.yaml:12: agents.defaults.model.fallbacks[0]: anthropic/claude-haiku-4-5 is left out of the fallbacks: no key of provider anthropic is set (ANTHROPIC_API_KEY)",
		"c.yaml:14: models.anthropic/claude-haiku-4-5: anthropic/claude-haiku-4-5 is left out of the models people can choose: no key of provider anthropic is set (ANTHROPIC_API_KEY)",
	}
	if got := strings.Join(warnings, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if got := strings.Join(cfg.Auth.ProfileIDs, ","); got != "openai:main" || len(cfg.Auth.Profiles) != 1 || strings.Join(cfg.Auth.Order["openai"], ",") != "openai:main" {
		t.Errorf("profiles %v, order %v", cfg.Auth.ProfileIDs, cfg.Auth.Order)
	}
	if got := cfg.Agents.Defaults.Model.Fallbacks; len(got) != 1 || got[0] != "openai/gpt-4o" {
		t.Errorf("fallbacks %v", got)
	}
	if len(cfg.LeftOut) != 2 || cfg.LeftOut[1].ID != "anthropic:main" || cfg.LeftOut[1].Vars[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("left out %+v", cfg.LeftOut)
	}

	// Without any key the primary cannot be reached: one error, advice that works.
	_, err = Parse("c.yaml", []byte(src), nil)
	if err == nil || err.Error() != "c.yaml:6: auth.profiles.openai:main.key: environment variables OPENAI_API_KEY, OPENAI_API_KEY_BACKUP are not set: the primary model openai/gpt-4o-mini needs a key of provider openai (export one of them, e.g. OPENAI_API_KEY=...; only the keys of profiles marked optional: true may stay unset)" {
		t.Errorf("no key: %v", err)
	}
	// A profile that is not optional is never left out: its unset key is an
	// error naming the file, the line, the key and the variable.
	required := strings.Replace(src, `key: "${ANTHROPIC_API_KEY}", optional: true}`, `key: "${ANTHROPIC_API_KEY}"}`, 1)
	_, err = Parse("c.yaml", []byte(required), fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-CANARY-one"}))
	if err == nil || err.Error() != "c.yaml:8: auth.profiles.anthropic:main.key: environment variable ANTHROPIC_API_KEY is not set: profile anthropic:main has no key (export ANTHROPIC_API_KEY=...; or mark the profile optional: true to run without it while the key is unset)" {
		t.Errorf("required profile without its key: %v", err)
	}
	// Set, the same profile is there whether or not it is optional.
	for _, text := range []string{src, required} {
		cfg, err := Parse("c.yaml", []byte(text), fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-CANARY-one", "ANTHROPIC_API_KEY": "sk-CANARY-two", "OPENAI_API_KEY_BACKUP": "sk-CANARY-three"}))
		if err != nil || len(cfg.Auth.Profiles) != 3 || len(cfg.LeftOut) != 0 || len(cfg.Warnings) != 0 {
			t.Errorf("every key set: %v, %v", cfg, err)
		}
	}
	// ${X:-} on the only key is the same as unset: the same single error.
	one := strings.Replace(src, `"${OPENAI_API_KEY}"`, `"${OPENAI_API_KEY:-}"`, 1)
	one = strings.Replace(one, "    openai:backup: {provider: openai, key: \"${OPENAI_API_KEY_BACKUP:-}\", optional: true}\n", "", 1)
	one = strings.Replace(one, "[openai:main, openai:backup]", "[openai:main]", 1)
	_, err = Parse("c.yaml", []byte(one), nil)
	if err == nil || err.Error() != "c.yaml:6: auth.profiles.openai:main.key: environment variable OPENAI_API_KEY is not set: the primary model openai/gpt-4o-mini needs a key of provider openai (export OPENAI_API_KEY=...; only the keys of profiles marked optional: true may stay unset)" {
		t.Errorf("empty default: %v", err)
	}
	// A channel token's advice is to export it or turn the channel off.
	_, err = Parse("c.yaml", []byte("channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: xoxb-1}\n"+base), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "c.yaml:2: channels.slack.app_token: environment variable SLACK_APP_TOKEN is not set (export it: the xapp-... app-level token; or set channels.slack.enabled: false)") {
		t.Errorf("slack token: %v", err)
	}
}

// bot check's doubts: swapped or malformed tokens, an admin channel that cannot
// receive. The configuration parses (the bot would start); token values are
// never quoted.
func TestParse_Doubts(t *testing.T) {
	const discordToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789ABCD"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"swapped slack tokens", "channels:\n  slack: {enabled: true, app_token: xoxb-CANARY-1234567890, bot_token: xapp-CANARY-1234567890}\n",
			"c.yaml:2: channels.slack.app_token: the two Slack tokens are swapped: app_token holds the xoxb- bot token and bot_token the xapp- app-level token; swap the values of app_token and bot_token (SLACK_APP_TOKEN and SLACK_BOT_TOKEN)"},
		{"user token as bot token", "channels:\n  slack: {enabled: true, app_token: xapp-CANARY-1234567890, bot_token: xoxp-CANARY-1234567890}\n",
			"c.yaml:2: channels.slack.bot_token: this is a user token (xoxp-); it must be the Bot User OAuth Token (xoxb-...: OAuth & Permissions, after installing the app)"},
		{"not a slack token", "channels:\n  slack: {enabled: true, app_token: CANARY-1234567890, bot_token: xoxb-CANARY-1234567890}\n",
			"c.yaml:2: channels.slack.app_token: this does not look like a Slack token; it must be an app-level token (xapp-...: Basic Information → App-Level Tokens, with the connections:write scope)"},
		{"discord application id", "channels:\n  discord: {enabled: true, token: \"123456789012345678\"}\n",
			"c.yaml:2: channels.discord.token: this is a number (an application, client or user id), not the bot token; copy the token from the Discord Developer Portal → your application → Bot → Reset Token"},
		{"discord client secret", "channels:\n  discord: {enabled: true, token: CANARYabcdefghijklmnopqrstuvwxyz}\n",
			"c.yaml:2: channels.discord.token: this looks like the application's client secret, not the bot token; copy the token from the Discord Developer Portal → your application → Bot → Reset Token"},
		{"discord garbage", "channels:\n  discord: {enabled: true, token: CANARY.x}\n",
			"c.yaml:2: channels.discord.token: this does not look like a Discord bot token (three parts separated by dots); copy the token from the Discord Developer Portal → your application → Bot → Reset Token"},
		{"admin channel disabled", "channels:\n  slack: {enabled: false}\nadmin: {channel: slack:C0123ABCD}\n",
			"c.yaml:3: admin.channel: reports sent to slack:C0123ABCD would go nowhere: channels.slack is not enabled; enable it, or choose an enabled channel"},
		{"admin channel console off", "channels:\n  console: {enabled: false}\n  discord: {enabled: true, token: " + discordToken + "}\nadmin: {channel: console}\n",
			"c.yaml:4: admin.channel: reports sent to console would go nowhere: channels.console is not enabled; enable it, or choose an enabled channel"},
		{"slack channel name", "channels:\n  slack: {enabled: true, app_token: xapp-1-A0-123456789, bot_token: xoxb-1-2-123456789}\nadmin: {channel: slack:general}\n",
			`c.yaml:3: admin.channel: "slack:general" looks like a channel name; Slack needs the channel's id, such as slack:C0123ABCD (channel details → Copy channel ID), and the bot must be invited there`},
		{"discord channel name", "channels:\n  discord: {enabled: true, token: " + discordToken + "}\nadmin: {channel: discord:ops}\n",
			`c.yaml:3: admin.channel: "discord:ops" looks like a channel name; Discord needs the channel's id, a long number such as discord:123456789012345678 (Developer Mode → right-click the channel → Copy Channel ID)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("c.yaml", []byte(tc.src+base), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range cfg.Doubts {
				if strings.Contains(e.Msg, "the secret is written in the file") {
					continue // these tokens are literal on purpose; TestParse_Pitfalls covers that doubt
				}
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != tc.want {
				t.Errorf("doubts\n%s\nwant\n%s", strings.Join(got, "\n"), tc.want)
			}
			if strings.Contains(strings.Join(got, ""), "CANARY") {
				t.Error("a token value is quoted")
			}
		})
	}
	// Right tokens and ids raise no doubt.
	env := fakeEnv(map[string]string{"SLACK_APP_TOKEN": "xapp-1-A0-123456789", "SLACK_BOT_TOKEN": "xoxb-1-2-123456789", "DISCORD_BOT_TOKEN": "Bot " + discordToken})
	cfg, err := Parse("c.yaml", []byte("channels:\n  slack: {enabled: true, app_token: ${SLACK_APP_TOKEN}, bot_token: ${SLACK_BOT_TOKEN}}\n  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}\nadmin: {channel: discord:123456789012345678}\n"+base), env)
	if err != nil || len(cfg.Doubts) != 0 {
		t.Fatalf("%v %v", err, cfg.Doubts)
	}
}
