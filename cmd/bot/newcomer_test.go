package main

// The first hour with detour, scripted: a newcomer follows the README in a fresh
// folder with the built binary (the demo, the #fail: markers, /models, a typo in
// /model, /status), then "Real providers" with a single key, then the mistakes
// people make in a first config. Every message is asserted word for word, and
// the ones the README quotes must appear there verbatim, so the README keeps
// matching what the bot says.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// cleanEnv is the test process's environment without any key, token or detour
// setting a developer or CI may have exported, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.Contains(k, "API_KEY") || strings.HasPrefix(k, "SLACK_") || strings.HasPrefix(k, "DISCORD_") || strings.HasPrefix(k, "DETOUR_") {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "NO_COLOR=1"), extra...)
}

// runIn runs the binary in dir with stdin and returns stdout, stderr and the
// exit code.
func runIn(t *testing.T, bin, dir, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish:\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), code
}

// readme returns the README at the module root.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// inReadme checks that the README quotes each text verbatim.
func inReadme(t *testing.T, texts ...string) {
	t.Helper()
	r := readme(t)
	for _, s := range texts {
		if !strings.Contains(r, s) {
			t.Errorf("README does not show what the bot says:\n%s", s)
		}
	}
}

// specWords are words of the spec that /status must not use with people.
var specWords = regexp.MustCompile(`\bsource\b|\bauto\b|\b[SKRNOPDBCTVLM][0-9]{1,2}\b|\bprobe\b`)

// statusBlock returns the /status answer inside a text transcript.
func statusBlock(out string, nth int) string {
	parts := strings.Split(out, "selected model: ")
	if len(parts) <= nth {
		return ""
	}
	b := parts[nth]
	if i := strings.Index(b, "\ncontext: "); i >= 0 {
		end := strings.IndexByte(b[i+1:], '\n')
		if end < 0 {
			return "selected model: " + b
		}
		return "selected model: " + b[:i+1+end]
	}
	return "selected model: " + b
}

// The README's 30-second demo, in a fresh folder: the demo answers; a marker
// makes the primary fail once and the fallback takes over with one notice; a
// marker sent while on the fallback says it did nothing and how to get back; a
// mistyped mode is named with the valid ones; /models lists the models and
// aliases; a typo in /model is refused with a suggestion; /status speaks plain
// words; /recover brings the primary back. covers N1, N3, N5, S4, B3
func TestNewcomer_Demo(t *testing.T) {
	bin := builtBot(t)
	dir := t.TempDir()
	script := strings.Join([]string{
		"hello",
		"what is 2+2? #fail:rate_limit",
		"and now? #fail:server_500",
		"hi #fail:rate_limt",
		"/models",
		"/model backup/falback-1",
		"/model fats",
		"/status",
		"/recover demo/primray",
		"/recover demo/primary",
		"/model default",
		"/model fast",
		"/model list",
	}, "\n") + "\n"
	out, errOut, code := runIn(t, bin, dir, script, cleanEnv())
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	t.Logf("transcript:\n%s", out)
	wantInOrder := []string{
		"[demo/primary] you said: hello\n",
		"↪️ model fallback: backup/fallback-1 (selected demo/primary; rate limit)\n[backup/fallback-1] you said: what is 2+2? #fail:rate_limit\n",
		"[backup/fallback-1] you said: and now? #fail:server_500\n" +
			"(fake provider) #fail:server_500 was not applied: markers act only on models whose name contains \"primary\", and this turn went straight to backup/fallback-1 (the conversation is on a fallback, or the primary is cooling down). To go back to the primary: /model default, /reset, or /recover demo/primary.\n",
		"[backup/fallback-1] you said: hi #fail:rate_limt\n" +
			"(fake provider) unknown failure mode \"rate_limt\" in #fail:rate_limt, so nothing failed. Did you mean #fail:rate_limit? Valid modes: ok, rate_limit, insufficient_quota, billing_402, unauthorized_401,",
		"models you can choose with /model <model or alias>:\n" +
			"  demo/primary — the configured default\n" +
			"  backup/fallback-1 (alias fast)\n" +
			"  backup/fallback-2 (alias spare)\n" +
			"/model default goes back to the configured model\n",
		"error: \"backup/falback-1\" is not one of the models you can choose here; did you mean backup/fallback-1? (/models lists the models you can choose)\n",
		"error: unknown model or alias \"fats\"; did you mean fast? (/models lists the models you can choose)\n",
		"selected model: demo/primary (the configured default)\n" +
			"active fallback: backup/fallback-1 answers now, falling back from demo/primary because it failed: rate limit\n" +
			"demo/primary gets another try on the first turn after ",
		"next turn tries: backup/fallback-1, then backup/fallback-2, then demo/primary (cooling down)\ncooling down:\n  demo/primary (key demo:main): rate limit, until ",
		"key in use: backup:main (picked automatically; another key of the provider takes over if it fails)\n" +
			"this conversation: 6 paid call(s); ",
		"context: about ",
		"error: unknown model: \"demo/primray\" is not a model of the configuration; did you mean demo/primary? (/recover takes a model of the configuration, provider/model, or a profile id, provider:name)\n",
		"recovered demo/primary: probe answered with demo:main, demo:backup; cooldown and disable cleared\n",
		"back to the configured model demo/primary\n",
		"model set to backup/fallback-1 (exact: if it fails you will see the failure; /model default goes back)\n",
		"  backup/fallback-1 (alias fast) — selected here\n",
	}
	rest := out
	for _, w := range wantInOrder {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("the transcript lacks, at this point:\n%s\n--- rest of the transcript:\n%s", w, rest)
		}
		rest = rest[i+len(w):]
	}
	if n := strings.Count(out, "↪️"); n != 1 {
		t.Errorf("%d notices, want 1 (N3)", n)
	}
	st := statusBlock(out, 1)
	if m := specWords.FindString(st); m != "" {
		t.Errorf("/status speaks the spec's language (%q):\n%s", m, st)
	}
	cool := regexp.MustCompile(`until \d\d:\d\d(:\d\d)? UTC \(in \d+ s\)`)
	if !cool.MatchString(st) {
		t.Errorf("a cooldown is not shown as \"until 14:04:32 UTC (in 28 s)\":\n%s", st)
	}
	if !strings.Contains(errOut, "/models") || !strings.Contains(errOut, "Markers act on demo/primary only") {
		t.Errorf("the banner does not mention /models and markers:\n%s", errOut)
	}
	inReadme(t,
		"> /model backup/falback-1\nerror: \"backup/falback-1\" is not one of the models you can choose here; did you mean backup/fallback-1? (/models lists the models you can choose)",
		"models you can choose with /model <model or alias>:\n  demo/primary — the configured default\n  backup/fallback-1 (alias fast)\n  backup/fallback-2 (alias spare)\n/model default goes back to the configured model",
		"active fallback: backup/fallback-1 answers now, falling back from demo/primary because it failed: rate limit",
		"> /recover demo/primray\nerror: unknown model: \"demo/primray\" is not a model of the configuration; did you mean demo/primary? (/recover takes a model of the configuration, provider/model, or a profile id, provider:name)\n> /recover demo/primary\n",
	)
}

// Each failure the README offers to try makes the primary fail that way: one
// notice with its plain reason, then the fallback's answer. "ok" fails nothing.
func TestNewcomer_DemoFailModes(t *testing.T) {
	bin := builtBot(t)
	r := readme(t)
	for _, tc := range []struct{ mode, reason string }{
		{"rate_limit", "rate limit"},
		{"insufficient_quota", "out of credits"},
		{"stall_after_first_chunk", "stream broke off"},
		{"server_500", "server error (HTTP 500)"},
		{"overloaded_529", "overloaded"},
		{"unauthorized_401", "invalid API key"},
		{"hang_before_headers", "timed out or unreachable"},
		{"empty_reply", "empty response"},
		{"ok", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			if tc.mode != "ok" && !strings.Contains(r, "#fail:"+tc.mode) {
				t.Errorf("the README does not offer #fail:%s", tc.mode)
			}
			out, errOut, code := runIn(t, bin, t.TempDir(), "hi #fail:"+tc.mode+"\n", cleanEnv())
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, errOut)
			}
			want := "[demo/primary] you said: hi #fail:ok\n"
			if tc.reason != "" {
				want = "↪️ model fallback: backup/fallback-1 (selected demo/primary; " + tc.reason + ")\n[backup/fallback-1] you said: hi #fail:" + tc.mode + "\n"
			}
			if out != want {
				t.Errorf("transcript\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// "Real providers" with one key: cp config.example.yaml config.yaml, export only
// OPENAI_API_KEY. bot check says ok and lists the other (optional) profiles as
// missing and left out; the bot starts (warning lines, no error) and ends
// cleanly. Without the key, one error whose advice works. covers P4, F11
func TestNewcomer_RealProvidersOneKey(t *testing.T) {
	bin := builtBot(t)
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), example, 0o600); err != nil {
		t.Fatal(err)
	}
	oneKey := cleanEnv("OPENAI_API_KEY=sk-CANARY-newcomer-0001")

	out, errOut, code := runIn(t, bin, dir, "", oneKey, "check")
	if code != 0 {
		t.Fatalf("bot check: exit %d\n%s", code, errOut)
	}
	// Line numbers come from the example itself, so editing it keeps the test true.
	at := func(prefix string) int { return lineWith(t, example, prefix) }
	warnings := []string{
		fmt.Sprintf("config.yaml:%d: auth.profiles.openai:backup.key: environment variable OPENAI_API_KEY_BACKUP is not set: profile openai:backup is left out, and the bot runs without it", at("    openai:backup:")+3),
		fmt.Sprintf("config.yaml:%d: auth.profiles.anthropic:main.key: environment variable ANTHROPIC_API_KEY is not set: profile anthropic:main is left out, and the bot runs without it", at("    anthropic:main:")),
		fmt.Sprintf("config.yaml:%d: auth.profiles.openrouter:main.key: environment variable OPENROUTER_API_KEY is not set: profile openrouter:main is left out, and the bot runs without it", at("    openrouter:main:")),
		fmt.Sprintf("config.yaml:%d: agents.defaults.model.fallbacks[0]: anthropic/claude-haiku-4-5 is left out of the fallbacks: no key of provider anthropic is set (ANTHROPIC_API_KEY)", at("      fallbacks: [anthropic/")),
		fmt.Sprintf("config.yaml:%d: agents.defaults.model.fallbacks[1]: openrouter/meta-llama/llama-3-70b is left out of the fallbacks: no key of provider openrouter is set (OPENROUTER_API_KEY)", at("      fallbacks: [anthropic/")),
		fmt.Sprintf("config.yaml:%d: models.anthropic/claude-haiku-4-5: anthropic/claude-haiku-4-5 is left out of the models people can choose: no key of provider anthropic is set (ANTHROPIC_API_KEY)", at("  anthropic/claude-haiku-4-5:")),
	}
	for _, want := range append([]string{
		"config config.yaml: ok\n",
		"  openai:main      provider openai      api_key  key set\n",
		"  openai:backup    provider openai      api_key  key missing (OPENAI_API_KEY_BACKUP not set): left out\n",
		"  anthropic:main   provider anthropic   api_key  key missing (ANTHROPIC_API_KEY not set): left out\n",
		"  default: openai/gpt-4o-mini\n",
		"models people can choose: openai/gpt-4o-mini (fast), openai/gpt-4o (smart)\n",
		"warnings (the bot runs without these):\n",
	}, warnings...) {
		if !strings.Contains(out, want) {
			t.Errorf("bot check lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = runIn(t, bin, dir, "", oneKey, "--format", "jsonl")
	if code != 0 || out != "" {
		t.Fatalf("bot run with one key: exit %d, stdout %q\nstderr:\n%s", code, out, errOut)
	}
	for _, w := range warnings {
		if !strings.Contains(errOut, "warning: "+w+"\n") {
			t.Errorf("the start does not warn %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(out+errOut, "CANARY") {
		t.Error("a key was printed (P4)")
	}

	_, errOut, code = runIn(t, bin, dir, "", cleanEnv(), "check")
	noKey := fmt.Sprintf("config.yaml:%d: auth.profiles.openai:main.key: environment variables OPENAI_API_KEY, OPENAI_API_KEY_BACKUP are not set: the primary model openai/gpt-4o-mini needs a key of provider openai (export one of them, e.g. OPENAI_API_KEY=...; only the keys of profiles marked optional: true may stay unset)", at("    openai:main:")+3)
	if code != exitUsage || errOut != noKey+"\nbot: the configuration has 1 problem(s); nothing was started\n" {
		t.Errorf("no key: exit %d:\n%s", code, errOut)
	}
	if strings.Contains(errOut, ":-default}") {
		t.Error("the advice for a needed key suggests a default, which only leads to another error")
	}
	inReadme(t, noKey, "`bot check` lists them as `key missing (...): left out`")
}

// The mistakes of a first config, through the binary as a newcomer meets them:
// each message word for word, exit 2, nothing started.
func TestNewcomer_ConfigMessages(t *testing.T) {
	bin := builtBot(t)
	const tail = "providers:\n  openai: {base_url: https://api.openai.com/v1}\nauth:\n  profiles:\n    openai:main: {provider: openai, key: \"${OPENAI_API_KEY}\"}\nagents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [openai/gpt-4o]}\n"
	key := "OPENAI_API_KEY=sk-CANARY-newcomer-0002"
	for _, tc := range []struct {
		name, config string
		env          []string
		cmd          string // check or run
		code         int
		stderr       string
	}{
		{"empty file", "", nil, "check", exitUsage,
			"config.yaml:1: the file is empty: start from config.example.yaml (cp config.example.yaml config.yaml), or set at least agents.defaults.model.primary\n" +
				"bot: the configuration has 1 problem(s); nothing was started\n"},
		{"bad indentation", "providers:\n  openai:\n    base_url: https://api.openai.com/v1\n   billing_backoff_hours: 5\nagents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini}\n", nil, "run", exitUsage,
			"config.yaml:4: bad indentation: \"billing_backoff_hours\" starts at 3 spaces, but the keys above it start at 4 spaces (line 3) or 2 spaces (line 2); keys of one section must line up exactly\n" +
				"bot: the configuration has 1 problem(s); nothing was started\n"},
		{"negative timeout", tail + "    timeouts: {idle_seconds: -60}\n", []string{key}, "check", exitUsage,
			"config.yaml:9: agents.defaults.timeouts.idle_seconds: bad number -60: must not be negative\n" +
				"bot: the configuration has 1 problem(s); nothing was started\n"},
		{"swapped slack tokens", "channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\n" + tail,
			[]string{key, "SLACK_APP_TOKEN=xoxb-CANARY-0003-bot", "SLACK_BOT_TOKEN=xapp-CANARY-0004-app"}, "check", exitUsage,
			"config.yaml:2: channels.slack.app_token: the two Slack tokens are swapped: app_token holds the xoxb- bot token and bot_token the xapp- app-level token; swap the values of app_token and bot_token (SLACK_APP_TOKEN and SLACK_BOT_TOKEN)\n" +
				"bot check: 1 setting(s) would not work as meant (the bot would start, but not do this right)\n"},
		{"admin channel on a disabled channel", "channels:\n  console: {format: jsonl}\nadmin: {channel: \"slack:C0123ABCD\"}\n" + tail, []string{key}, "check", exitUsage,
			"config.yaml:3: admin.channel: reports sent to slack:C0123ABCD would go nowhere: channels.slack is not enabled; enable it, or choose an enabled channel\n" +
				"bot check: 1 setting(s) would not work as meant (the bot would start, but not do this right)\n"},
		{"the same at run: a warning", "channels:\n  console: {format: jsonl}\nadmin: {channel: \"slack:C0123ABCD\"}\n" + tail, []string{key}, "run", 0,
			"warning: config.yaml:3: admin.channel: reports sent to slack:C0123ABCD would go nowhere: channels.slack is not enabled; enable it, or choose an enabled channel\n"},
		{"a slack channel name", "channels:\n  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\nadmin: {channel: \"slack:general\"}\n" + tail,
			[]string{key, "SLACK_APP_TOKEN=xapp-1-A0-CANARY-0005", "SLACK_BOT_TOKEN=xoxb-1-2-CANARY-0006"}, "check", exitUsage,
			"config.yaml:3: admin.channel: \"slack:general\" looks like a channel name; Slack needs the channel's id, such as slack:C0123ABCD (channel details → Copy channel ID), and the bot must be invited there\n" +
				"bot check: 1 setting(s) would not work as meant (the bot would start, but not do this right)\n"},
		{"a discord id for a token", "channels:\n  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}\n" + tail,
			[]string{key, "DISCORD_BOT_TOKEN=123456789012345678"}, "check", exitUsage,
			"config.yaml:2: channels.discord.token: this is a number (an application, client or user id), not the bot token; copy the token from the Discord Developer Portal → your application → Bot → Reset Token\n" +
				"bot check: 1 setting(s) would not work as meant (the bot would start, but not do this right)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			var args []string
			if tc.cmd == "check" {
				args = []string{"check"}
			}
			out, errOut, code := runIn(t, bin, dir, "", cleanEnv(tc.env...), args...)
			if tc.cmd == "run" && code == 0 {
				// A started bot also logs; the warnings come first.
				errOut = errOut[:min(len(errOut), len(tc.stderr))]
			}
			if code != tc.code || errOut != tc.stderr {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, errOut, tc.code, tc.stderr)
			}
			if strings.Contains(out+errOut, "CANARY") {
				t.Error("a secret was printed (P4)")
			}
		})
	}
}

// Without cgo (no C compiler) the build fails with one readable error that
// names what to do, never with "undefined: sqlite3.Error"; the README's
// Troubleshooting names the same identifier. It builds the one package that
// fails, internal/database (a build of the bot stops at the same error): a
// build of everything without cgo shares nothing with the test build's cache,
// and on an empty cache it took minutes (issue 36).
func TestBuild_WithoutCgoSaysWhatToInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the build without cgo cannot be tried here")
	}
	cmd := exec.Command(goBin, "build", "../../internal/database")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("the build without cgo succeeded; the bot cannot store anything without SQLite")
	}
	const ident = "detour_needs_cgo__install_gcc_or_Xcode_command_line_tools__see_README_Troubleshooting"
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "#") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.HasSuffix(errs[0], "undefined: "+ident) || !strings.HasPrefix(errs[0], "../../internal/database/sqlite_nocgo.go:") {
		t.Fatalf("the build without cgo says:\n%s\nwant exactly one error: undefined: %s", out, ident)
	}
	if strings.Contains(string(out), "sqlite3") {
		t.Errorf("the build without cgo still mentions sqlite3:\n%s", out)
	}
	inReadme(t, "undefined: "+ident, "xcode-select --install", "build-essential", "build-base musl-dev", "WSL")
}

// lineWith returns the 1-based number of the first line of data that starts with
// prefix.
func lineWith(t *testing.T, data []byte, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return 0
}

// A team adopting detour, with the built binary and the README's own words:
// a licence and a changelog; a version they can name in --version, the ready
// line and /readyz; the README's scripted `bot init`, whose config `bot check`
// accepts and `bot run` starts; the pre-flight that fails where run would fail
// or do less than meant; a drill beside the live bot on its operations port;
// one decision line per fallback step, and a 500 counted as a server error in
// /metrics and `bot history`. (The terminal transcript, SIGHUP, the interactive
// init and Slack's channel-wide /model have binary and end-to-end tests of their
// own: TestBinary_TerminalTranscriptAsInTheReadme, TestBinary_SIGHUPReloads,
// TestInit_F9_InteractiveAtATerminal, TestE2E_SlackChannelModelCommand_*.)
// covers F1, F2, F3, F4, F5, F6, F7, F9, V1, V2, M5
func TestNewcomer_Adoption(t *testing.T) {
	bin := builtBot(t)
	r := readme(t)
	lic, _ := os.ReadFile(filepath.Join("..", "..", "LICENSE"))
	chg, _ := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if !strings.HasPrefix(string(lic), "MIT License\n\nCopyright (c) 2026 the detour authors\n") {
		t.Errorf("LICENSE:\n%.200s", lic)
	}
	if !strings.Contains(string(chg), "## [Unreleased]\n") || !strings.Contains(string(chg), "## [0.1.0] - ") || !strings.Contains(string(chg), "Keep a Changelog") {
		t.Error("CHANGELOG.md does not keep a changelog")
	}
	inReadme(t, "[LICENSE](LICENSE)", "[CHANGELOG.md](CHANGELOG.md)")

	// The README's scripted init, word for word.
	const lead = "`bot init --non-interactive "
	i := strings.Index(r, lead)
	if i < 0 {
		t.Fatal("the README shows no scripted bot init")
	}
	line := r[i+1 : i+1+strings.IndexByte(r[i+1:], '`')]
	dir := t.TempDir()
	key := cleanEnv("OPENAI_API_KEY=sk-CANARY-adopt-0001")
	out, errOut, code := runIn(t, bin, dir, "", key, strings.Fields(line)[1:]...)
	if code != exitOK || !strings.Contains(out, "config config.yaml: ok\n") || !strings.Contains(out, "  default: openai/gpt-4o-mini\n") {
		t.Fatalf("%s: exit %d\n%s\n%s", line, code, out, errOut)
	}
	if _, errOut, code = runIn(t, bin, dir, "", cleanEnv(), "check"); code != exitOK {
		t.Fatalf("bot check after init: exit %d\n%s", code, errOut)
	}
	if out, errOut, code = runIn(t, bin, dir, "", cleanEnv()); code != exitOK || strings.Contains(errOut, "level=ERROR") || !strings.Contains(errOut, "msg=ready") {
		t.Fatalf("bot after init: exit %d\n%s\n%s", code, out, errOut)
	}

	// The pre-flight, through the binary.
	pre := t.TempDir()
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(pre, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const prov = "providers:\n  openai: {base_url: https://api.openai.com/v1}\n"
	write("channels: {console: {enabled: false}}\n" + prov + "agents: {defaults: {model: {primary: openai/gpt-4o-mini}}}\n")
	_, errOut, code = runIn(t, bin, pre, "", cleanEnv(), "check")
	_, runErr, runCode := runIn(t, bin, pre, "", cleanEnv())
	if code != exitUsage || runCode != exitUsage || !strings.HasPrefix(errOut, "config.yaml:1: channels: no channel is enabled") || !strings.Contains(runErr, "config.yaml:1: channels: no channel is enabled") {
		t.Errorf("no channel: check exit %d %q; run exit %d %q", code, errOut, runCode, runErr)
	}
	write(strings.Replace(prov, "/v1}", "/v1/chat/completions}", 1) + "auth:\n  profiles:\n    openai:main: {provider: openai, key: sk-CANARY-adopt-0002}\n" +
		"agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [openai/gpt-4o-mini]}\n    budget: {max_turn_cost_usd: 0.5}\n")
	_, errOut, code = runIn(t, bin, pre, "", cleanEnv(), "check")
	for _, want := range []string{
		"config.yaml:2: providers.openai.base_url: ends in /chat/completions, which the bot adds itself",
		"set base_url: https://api.openai.com/v1\n",
		"config.yaml:5: auth.profiles.openai:main.key: the secret is written in the file",
		"config.yaml:8: agents.defaults.model.fallbacks[0]: openai/gpt-4o-mini is the primary model itself, so it is no fallback",
		"config.yaml:9: agents.defaults.budget.max_turn_cost_usd: the cap of $0.5 per turn can never act: no model has a price",
		"bot check: 4 setting(s) would not work as meant",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("bot check does not say %q:\n%s", want, errOut)
		}
	}
	if code != exitUsage || strings.Contains(errOut, "CANARY") {
		t.Errorf("pitfalls: exit %d (want 2), or a key was printed", code)
	}
	write(prov + "auth:\n  profiles:\n    openai:main: {provider: openai, key: \"${OPENAI_API_KEY}}\nagents: {defaults: {model: {primary: openai/gpt-4o-mini}}}\n")
	if _, errOut, _ = runIn(t, bin, pre, "", key, "check"); !strings.HasPrefix(errOut, "config.yaml:5: a value opened with \" on this line is never closed") {
		t.Errorf("an unclosed quote: %q", errOut)
	}

	// A versioned build, live: --version, the ready line, /readyz; a drill
	// beside it on its port; one decision line and a server error counted as one.
	vbin := versionedBot(t, "v0.0.0-newcomer") // as -ldflags "-X main.version=v0.0.0-newcomer" builds it
	if out, _, _ := runIn(t, vbin, dir, "", cleanEnv(), "--version"); !strings.HasPrefix(out, "detour v0.0.0-newcomer (") {
		t.Errorf("--version: %q", out)
	}
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeServer500})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(t, srv, "server: {listen: \""+addr+"\"}\n")
	cmd := exec.Command(vbin, "--config", cfg, "--log-format", "json")
	cmd.Env = cleanEnv()
	stdin, _ := cmd.StdinPipe()
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// A build inside a git clone (Go's default -buildvcs=auto) names its
	// commit after the version: "v0.0.0-newcomer (commit 0123456789ab)".
	waitUntil(t, "ready", func() bool { return strings.Contains(stderr.String(), `"msg":"ready","version":"v0.0.0-newcomer`) })
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 || !strings.HasPrefix(body, "ready (detour v0.0.0-newcomer") || !strings.HasSuffix(body, ")\n") {
		t.Errorf("/readyz = %d %q", code, body)
	}
	if out, errOut, code := runIn(t, bin, filepath.Dir(cfg), "", cleanEnv(), "drill", "--fast", "--scenario", "no-fault", "--config", cfg); code != exitOK {
		t.Errorf("a drill beside the live bot: exit %d\n%s\n%s", code, out, errOut)
	}
	_, _ = io.WriteString(stdin, `{"session": "s1", "text": "hello"}`+"\n")
	waitUntil(t, "the answer", func() bool { return strings.Contains(stdout.String(), `"type":"reply"`) })
	_, metrics := httpGet(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`detour_llm_calls_total{model="primary",outcome="server_error",provider="p1",status="500"} 1`,
		`detour_fallbacks_total{from="p1/primary",reason="server_error",to="p2/fallback-1"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `outcome="timeout"`) {
		t.Error("a 500 was counted as a timeout")
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), `"msg":"model_fallback_decision"`); n != 1 {
		t.Errorf("%d model_fallback_decision lines for one step, want 1", n)
	}
	hist, _, _ := runIn(t, bin, dir, "", cleanEnv(), "history", "--config", cfg)
	if !strings.Contains(squeeze(hist), "p1/primary p1:main server_error (HTTP 500)") {
		t.Errorf("bot history:\n%s", hist)
	}
}

// httpGet fetches url and returns the status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
