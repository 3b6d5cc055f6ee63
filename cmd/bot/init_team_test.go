package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// issue 36: a key of the wrong kind is recognised by its look: a Slack token
// or an Anthropic key given as the OpenAI key, an app-level token as the bot
// token, anything but a Discord token as the Discord one. A custom provider
// may take another provider's key (a proxy), never a chat platform's token.
func TestInit_Issue36_KeyOfTheWrongKind(t *testing.T) {
	const discord = "MTIzNDU2Nzg5MDEyMzQ1Njc4.Gabcd.abcdefghijklmnopqrstuvwxyz"
	for _, tc := range []struct {
		val, want, wrong string // wrong: the kind named, "" = accepted
	}{
		{"xoxb-1-2-abc", kindOpenAI, kindSlackBot},
		{"sk-ant-api03-abc", kindOpenAI, kindAnthropic},
		{"sk-or-v1-abc", kindOpenAI, kindOpenRouter},
		{"sk-proj-abc", kindOpenAI, ""},
		{"sk-proj-abc", kindAnthropic, kindOpenAI},
		{"sk-ant-api03-abc", kindAnthropic, ""},
		{"AIzaSyabc", kindOpenRouter, kindGoogle},
		{"xapp-1-A0-abc", kindSlackBot, kindSlackApp},
		{"xoxb-1-2-abc", kindSlackApp, kindSlackBot},
		{"xoxp-1-2-abc", kindSlackBot, kindSlackUser},
		{"sk-abc", kindDiscord, kindOpenAI},
		{discord, kindDiscord, ""},
		{discord, kindOpenAI, kindDiscord},
		{"sk-ant-api03-abc", "", ""}, // a custom provider: maybe a proxy
		{"xoxb-1-2-abc", "", kindSlackBot},
		{"anything-else", kindOpenAI, ""},
	} {
		msg := wrongKind(tc.val, tc.want, "the key")
		if tc.wrong == "" && msg != "" || tc.wrong != "" && msg != "that looks like "+tc.wrong+", not the the key" {
			t.Errorf("%q as %q: %q, want kind %q", tc.val, tc.want, msg, tc.wrong)
		}
		if strings.Contains(msg, tc.val) {
			t.Errorf("P4: the message quotes the secret: %q", msg)
		}
	}
}

// initTeam runs bot init --non-interactive in dir (bot check included).
func initTeam(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	base := []string{"--non-interactive", "--config", filepath.Join(dir, "config.yaml"), "--env-file", filepath.Join(dir, "detour.env")}
	code := runInit(context.Background(), append(base, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// issue 36: the scripted onboarding of a team: names in any case, Anthropic on
// its own API, Slack with an admin, access for the admins only (the default),
// the admin channel and a cap; bot check says ok with no warning. Slack
// without an admin, and a key of the wrong kind in the environment, are
// refused before anything is written, naming the variable, never its value.
func TestInit_Issue36_NonInteractiveTeam(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-CANARY-0001")
	t.Setenv("SLACK_APP_TOKEN", "xapp-1-A0123-CANARY-0002")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-1-2-CANARY-0003")
	dir := t.TempDir()
	out, errOut, code := initTeam(t, dir, "--provider", "Anthropic", "--channel", "SLACK", "--admin", "slack:u0admin1",
		"--admin-channel", "slack:C0REPORTS", "--daily-cap", "50")
	if code != exitOK || !strings.Contains(out, "config "+filepath.Join(dir, "config.yaml")+": ok") {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("bot check warned about what init wrote:\n%s", errOut)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	for _, want := range []string{
		"  anthropic: {api: anthropic}", `  "anthropic/claude-haiku-4-5": {usd_per_mtok_in: 1, usd_per_mtok_out: 5}`,
		`  users: ["slack:U0ADMIN1"]   # may run /recover`, `  channel: "slack:C0REPORTS"`,
		`  users: ["slack:U0ADMIN1"]   # only these people may use the bot`, "  per_user_daily_paid_calls: 50",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(string(cfg), "api.anthropic.com") {
		t.Errorf("Anthropic on the OpenAI-compatible endpoint:\n%s", cfg)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.slack-manifest.yaml")); err != nil {
		t.Errorf("the manifest: %v", err)
	}
	if strings.Contains(out+errOut, "CANARY") {
		t.Error("P4: init printed a secret")
	}

	for _, tc := range []struct {
		name string
		env  [2]string
		args []string
		want string
	}{
		{"Slack without an admin", [2]string{}, []string{"--provider", "anthropic", "--channel", "slack"},
			"bot init: --channel slack needs an admin there: --admin slack:U0123ABCD (who may run /recover and gets the reports); nothing was written\n"},
		{"a bad admin id", [2]string{}, []string{"--provider", "anthropic", "--channel", "slack", "--admin", "slack:alice"},
			`bot init: bad --admin: "slack:alice" is not a Slack member id`},
		{"a Slack token as the OpenAI key", [2]string{"OPENAI_API_KEY", "xoxb-1-2-CANARY-0004"}, []string{"--provider", "OpenAI", "--channel", "console"},
			"bot init: the value of OPENAI_API_KEY: that looks like a Slack bot token (xoxb-...), not the API key of openai; nothing was written\n"},
		{"an app token as the bot token", [2]string{"SLACK_BOT_TOKEN", "xapp-1-A0-CANARY-0005"}, []string{"--provider", "anthropic", "--channel", "slack", "--admin", "slack:U0ADMIN1"},
			"bot init: the value of SLACK_BOT_TOKEN: that looks like a Slack app-level token (xapp-...), not the Slack bot token (xoxb-...); nothing was written\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			dir := t.TempDir()
			_, errOut, code := initTeam(t, dir, tc.args...)
			if code != exitUsage || !strings.HasPrefix(errOut, tc.want) && errOut != tc.want {
				t.Errorf("exit %d %q, want 2 %q", code, errOut, tc.want)
			}
			if strings.Contains(errOut, "CANARY") {
				t.Error("P4: the error shows the secret")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused init wrote %d file(s)", len(entries))
			}
		})
	}
}

// issue 36: the manifest bot init writes is named after the configuration,
// so it never takes the name of a file the repository ships (its own
// slack-manifest.yaml), whichever of the repository's YAML files the
// configuration is called.
func TestInit_Issue36_ManifestNameNeverCollides(t *testing.T) {
	root := filepath.Join("..", "..")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, e := range entries {
		shipped[e.Name()] = true
	}
	if !shipped["slack-manifest.yaml"] {
		t.Fatal("the repository's slack-manifest.yaml is not where this test looks")
	}
	for _, cfg := range []string{"config.yaml", "config.example.yaml", "slack-manifest.yaml", "slack-manifest-mentions.yaml", "demo.yaml"} {
		m := manifestPath(filepath.Join(root, cfg))
		if shipped[filepath.Base(m)] || m == filepath.Join(root, cfg) {
			t.Errorf("--config %s: the manifest %s is a file the repository ships", cfg, m)
		}
	}
	if got := manifestPath("config.yaml"); got != "config.slack-manifest.yaml" {
		t.Errorf("manifestPath(config.yaml) = %q", got)
	}
}

// With the console alone, --admin-channel console is written (its usage offers
// it) and the flags only Slack or Discord use are refused before anything is
// written, instead of being dropped without a word. covers F9
func TestInit_ConsoleOnlyFlags(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-CANARY-console-0001")
	dir := t.TempDir()
	out, errOut, code := initTeam(t, dir, "--provider", "openai", "--admin-channel", "console")
	if code != exitOK || !strings.Contains(out, ": ok") {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "  channel: \"console\"") || !strings.Contains(out, "admin reports: console") {
		t.Errorf("the admin channel was not written:\n%s\n%s", cfg, out)
	}
	for _, args := range [][]string{
		{"--admin", "slack:U0123ABCD"}, {"--access", "everyone"}, {"--daily-cap", "5"},
		{"--admin-channel", "slack:C0123ABCD"},
	} {
		dir := t.TempDir()
		out, errOut, code := initTeam(t, dir, append([]string{"--provider", "openai"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, args[0]) || !strings.HasSuffix(errOut, "; nothing was written\n") {
			t.Errorf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
			t.Errorf("%v: config.yaml was written", args)
		}
	}
}
