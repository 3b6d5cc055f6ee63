package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// teamBase is a working configuration with one fallback; each case adds to it.
const teamBase = "providers:\n  openai: {base_url: https://api.openai.com/v1}\n  anthropic: {api: anthropic}\n" +
	"auth:\n  profiles:\n    openai:main: {provider: openai, key: \"${OPENAI_API_KEY}\"}\n    anthropic:main: {provider: anthropic, key: \"${ANTHROPIC_API_KEY}\"}\n" +
	"agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5]}\n"

var teamEnv = map[string]string{"OPENAI_API_KEY": "sk-CANARY-team-1", "ANTHROPIC_API_KEY": "sk-ant-CANARY-team-2",
	"SLACK_APP_TOKEN": "xapp-1-A0123-CANARY-app", "SLACK_BOT_TOKEN": "xoxb-0123-CANARY-bot",
	"DISCORD_BOT_TOKEN": "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.CANARYCANARYCANARYCANARY"}

const (
	slackOn   = "channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\n"
	discordOn = "channels:\n  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}\n"
)

// warningsOf parses src (with env) and returns its warnings, one string each;
// a doubt or an error fails the test.
func warningsOf(t *testing.T, src string, env map[string]string) []string {
	t.Helper()
	cfg, err := Parse("c.yaml", []byte(src), fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Doubts) > 0 {
		t.Fatalf("doubts: %v", cfg.Doubts)
	}
	var out []string
	for _, e := range cfg.Warnings {
		out = append(out, e.Error())
		if strings.Contains(e.Error(), "CANARY") {
			t.Errorf("P4: a warning quotes a secret: %s", e)
		}
	}
	return out
}

// covers F12: Slack or Discord on with no admin who can act there, and access
// open to everyone on a team platform, are warnings that say what to add; a
// team set-up with both is quiet.
func TestParse_F12_TeamPlatform(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"slack with no admin and open access", teamBase + slackOn, []string{
			"c.yaml:12: channels.slack.enabled: channels.slack.enabled is on but no admin can act there: admin.users names no slack: user, so nobody in the Slack workspace may run /recover or set a channel's model (T9); add yourself, e.g. admin: {users: [\"slack:U0123ABCD\"]} (your profile → ⋯ → Copy member ID)",
			"c.yaml:12: channels.slack.enabled: everyone in the Slack workspace may talk to the bot and spend on its paid calls: access.users is empty and access.channels does not narrow slack; list who may (access: {users: [slack:...]}) or where (access: {channels: [\"slack:<team>:<channel>\"]}) (T5)",
		}},
		{"discord with a slack admin only, access whole discord", teamBase + discordOn + "admin: {users: [\"slack:U0123ABCD\"]}\naccess: {channels: [discord]}\n", []string{
			"c.yaml:13: admin.users: channels.discord.enabled is on but no admin can act there: admin.users names no discord: user, so nobody in the Discord server may run /recover or set a channel's model (T9); add yourself, e.g. admin: {users: [\"discord:123456789012345678\"]} (Developer Mode → right-click your name → Copy User ID)",
			"c.yaml:14: access: everyone in the Discord server may talk to the bot and spend on its paid calls: access.users is empty and access.channels does not narrow discord; list who may (access: {users: [discord:...]}) or where (access: {channels: [\"discord:<team>:<channel>\"]}) (T5)",
		}},
		{"slack with an admin and a user list", teamBase + slackOn + "admin: {users: [\"slack:U0123ABCD\"]}\naccess: {users: [\"slack:U0456EFGH\"]}\n", nil},
		{"slack narrowed to one channel", teamBase + slackOn + "admin: {users: [\"slack:U0123ABCD\"]}\naccess: {channels: [\"slack:T0123:C0456\"]}\n", nil},
		{"console only: no team, no warning", teamBase, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := warningsOf(t, tc.src, teamEnv)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// covers F13, I5: a chain whose only model that takes images is the primary
// is a warning; a fallback or an image fallback that takes them ends it.
func TestParse_F13_OnlyPrimaryTakesImages(t *testing.T) {
	vision := "models:\n  openai/gpt-4o-mini: {input: [text, image]}\n"
	want := "c.yaml:10: agents.defaults.model.fallbacks: only the primary openai/gpt-4o-mini takes images: when it fails, a message with images gets an error instead of a fallback's answer; name a model that takes them in image_fallbacks (declared under models with input: [text, image]) (I5)"
	if got := warningsOf(t, teamBase+vision, teamEnv); strings.Join(got, "\n") != want {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
	imageFallback := strings.Replace(teamBase, "fallbacks: [anthropic/claude-haiku-4-5]}", "fallbacks: [anthropic/claude-haiku-4-5], image_fallbacks: [openai/gpt-4o]}", 1) +
		vision + "  openai/gpt-4o: {input: [text, image]}\n"
	for name, src := range map[string]string{
		"a fallback takes images":    teamBase + vision + "  anthropic/claude-haiku-4-5: {input: [text, image]}\n",
		"an image fallback":          imageFallback,
		"the primary takes no image": teamBase,
	} {
		if got := warningsOf(t, src, teamEnv); len(got) != 0 {
			t.Errorf("%s: unexpected warnings %q", name, got)
		}
	}
}

// covers F14, M5: an operations endpoint on other than loopback is a warning
// (it has no authentication); loopback addresses are quiet.
func TestParse_F14_ListenBeyondLoopback(t *testing.T) {
	for listen, where := range map[string]string{
		"0.0.0.0:9464":  "every network this machine is on",
		":9464":         "every network this machine is on",
		"[::]:9464":     "every network this machine is on",
		"10.1.2.3:9464": "10.1.2.3",
		"example.org:1": "every network this machine is on",
	} {
		got := warningsOf(t, teamBase+"server: {listen: \""+listen+"\"}\n", teamEnv)
		want := "c.yaml:11: server.listen: serves /healthz, /readyz and /metrics without authentication to " + where + "; keep it on loopback (listen: 127.0.0.1:9464) or behind your own proxy; in a container, publish it to loopback only (docker run -p 127.0.0.1:9464:9464)"
		if strings.Join(got, "\n") != want {
			t.Errorf("%s: got\n%s\nwant\n%s", listen, strings.Join(got, "\n"), want)
		}
	}
	for _, listen := range []string{"127.0.0.1:9464", "localhost:9464", "[::1]:9464", ""} {
		if got := warningsOf(t, teamBase+"server: {listen: \""+listen+"\"}\n", teamEnv); len(got) != 0 {
			t.Errorf("%s: unexpected warnings %q", listen, got)
		}
	}
}

// covers F15: config.yml beside a missing config.yaml is named, since
// without --config the bot would run the demo and never read it.
func TestMisnamedConfig_F15(t *testing.T) {
	dir := t.TempDir()
	if e := MisnamedConfig(dir); e != nil {
		t.Fatalf("an empty folder: %v", e)
	}
	yml := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(yml, []byte("x: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := MisnamedConfig(dir)
	yaml := filepath.Join(dir, "config.yaml")
	want := yml + ": is not read: without --config the bot reads " + yaml + " only, so it runs the built-in demo; rename it (mv " + yml + " " + yaml + ") or pass --config " + yml
	if e == nil || e.Error() != want {
		t.Fatalf("got  %v\nwant %s", e, want)
	}
	if err := os.WriteFile(yaml, []byte("x: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := MisnamedConfig(dir); e != nil {
		t.Errorf("config.yaml is there: %v", e)
	}
}

// covers F15: a misspelt key gets the nearest known key of its section.
func TestParse_F15_UnknownKeySuggestion(t *testing.T) {
	for extra, want := range map[string]string{
		"limits: {max_paid_attempt_per_minute: 3}\n": "c.yaml:11: limits.max_paid_attempt_per_minute: unknown key: did you mean max_paid_attempts_per_minute? (known: ",
		"notices: {user: all}\n":                     "c.yaml:11: notices.user: unknown key: did you mean users? (known: users)",
		"acess: {}\n":                                "c.yaml:11: acess: unknown key: did you mean access? (known: ",
		"notices: {zzz: all}\n":                      "c.yaml:11: notices.zzz: unknown key (known: users)",
		"    idle_seconds: 5\n":                      "c.yaml:11: agents.defaults.idle_seconds: unknown key: it belongs in a section below: did you mean agents.defaults.timeouts.idle_seconds? (known: ",
		"listen: \":9464\"\n":                        "c.yaml:11: listen: unknown key: it belongs in a section below: did you mean server.listen? (known: ",
		"limits: {listen: \":9464\"}\n":              "c.yaml:11: limits.listen: unknown key (known: ",
		"channels: {enabled: true}\n":                "c.yaml:11: channels.enabled: unknown key (known: console, discord, slack)",
	} {
		_, err := Parse("c.yaml", []byte(teamBase+extra), fakeEnv(teamEnv))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: got %v\nwant prefix %s", extra, err, want)
		}
	}
}

// covers F15, F11: an unset variable whose neighbour is set is named with it
// (never with a value); a different key of the same family is not offered.
func TestParse_F15_UnsetVariableNeighbour(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-CANARY-n1", "SLACK_BOT_TOKEN": "xoxb-CANARY", "ANTHROPIC_API_KEY": "sk-ant-CANARY"}
	for _, tc := range []struct{ name, src, want string }{
		{"a required profile", strings.Replace(teamBase, "${OPENAI_API_KEY}", "${OPENAI_KEY}", 1),
			`c.yaml:6: auth.profiles.openai:main.key: environment variable OPENAI_KEY is not set: the primary model openai/gpt-4o-mini needs a key of provider openai (export OPENAI_KEY=...; only the keys of profiles marked optional: true may stay unset); OPENAI_API_KEY is set: did you mean ${OPENAI_API_KEY}?`},
		{"a typo in a channel token", teamBase + "channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLAKC_BOT_TOKEN}\"}\n",
			"c.yaml:12: channels.slack.bot_token: environment variable SLAKC_BOT_TOKEN is not set (export it: the xoxb-... bot token; or set channels.slack.enabled: false); SLACK_BOT_TOKEN is set: did you mean ${SLACK_BOT_TOKEN}?"},
		{"another case", teamBase + "storage: {dsn: \"${detour_db:-x.db}${openai_api_key}\"}\n",
			"c.yaml:11: storage.dsn: environment variable openai_api_key is not set (use ${openai_api_key:-default} for an optional value); OPENAI_API_KEY is set: did you mean ${OPENAI_API_KEY}?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.src), fakeEnv(env))
			if err == nil {
				t.Fatal("parsed")
			}
			var msgs []string
			for _, e := range Errors(err) {
				msgs = append(msgs, e.Error())
			}
			got := strings.Join(msgs, "\n")
			if !strings.Contains(got, tc.want) {
				t.Errorf("got\n%s\nwant a line\n%s", got, tc.want)
			}
			if strings.Contains(got, "CANARY") {
				t.Error("P4: a value is quoted")
			}
		})
	}
	// SLACK_APP_TOKEN is a different token from SLACK_BOT_TOKEN, and
	// OPENAI_API_KEY_BACKUP a different key from OPENAI_API_KEY: neither is
	// offered for the other.
	src := teamBase + "    # x\n" + "channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\n"
	_, err := Parse("c.yaml", []byte(src), fakeEnv(env))
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("SLACK_APP_TOKEN: %v", err)
	}
	for a, b := range map[string]string{"OPENAI_API_KEY_BACKUP": "OPENAI_API_KEY", "SLACK_APP_TOKEN": "SLACK_BOT_TOKEN", "OPENAI_API_KEY": "OPENAI_API_KEY_BACKUP"} {
		if nearName(a, b) {
			t.Errorf("nearName(%s, %s) = true", a, b)
		}
	}
	for a, b := range map[string]string{"OPENAI_KEY": "OPENAI_API_KEY", "DISCORD_TOKEN": "DISCORD_BOT_TOKEN", "OPENIA_API_KEY": "OPENAI_API_KEY"} {
		if !nearName(a, b) {
			t.Errorf("nearName(%s, %s) = false", a, b)
		}
	}
	// An optional profile left out for a misspelt variable says so in its warning.
	opt := strings.Replace(teamBase, "key: \"${ANTHROPIC_API_KEY}\"}", "key: \"${ANTHROPIC_KEY}\", optional: true}", 1)
	cfg, err := Parse("c.yaml", []byte(opt), fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	want := "c.yaml:7: auth.profiles.anthropic:main.key: environment variable ANTHROPIC_KEY is not set: profile anthropic:main is left out, and the bot runs without it; ANTHROPIC_API_KEY is set: did you mean ${ANTHROPIC_API_KEY}?"
	if len(cfg.Warnings) == 0 || cfg.Warnings[0].Error() != want {
		t.Errorf("warnings %v\nwant first %s", cfg.Warnings, want)
	}
}
