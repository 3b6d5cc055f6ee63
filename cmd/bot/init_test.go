package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/detourbot/detour"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// covers F9, F3: `bot init --non-interactive` with flags writes a config that
// `bot check` accepts and `bot run` starts: the keys go to detour.env (0600)
// and the configuration refers to them as ${VAR}, never by value; bot reads
// ./detour.env by itself. A second init overwrites nothing without --force.
func TestInit_F9_NonInteractiveWritesWhatCheckAcceptsAndRunStarts(t *testing.T) {
	bin := builtBot(t)
	srv := startFake(t)
	dir := t.TempDir()
	const key1, key2 = "sk-CANARY-init-0001", "sk-CANARY-init-0002"
	args := []string{"init", "--non-interactive",
		"--provider", "p1=" + srv.BaseURL("p1"), "--provider", "p2=" + srv.BaseURL("p2"),
		"--model", "p1/primary", "--model", "p2/fallback-1",
		"--key-env", "p1=P1_KEY", "--key-env", "p2=P2_KEY", "--channel", "console"}
	out, errOut, code := runIn(t, bin, dir, "", cleanEnv("P1_KEY="+key1, "P2_KEY="+key2), args...)
	if code != exitOK {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"wrote config.yaml\n", "wrote detour.env (mode 0600", "config config.yaml: ok\n",
		"  default: p1/primary -> p2/fallback-1\n", "next: start it with bot "} {
		if !strings.Contains(out, want) {
			t.Errorf("init says no %q:\n%s", want, out)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	env, _ := os.ReadFile(filepath.Join(dir, "detour.env"))
	if strings.Contains(string(cfg), "CANARY") || !strings.Contains(string(cfg), `key: "${P1_KEY}"`) {
		t.Errorf("config.yaml holds a key or no reference:\n%s", cfg)
	}
	if !strings.Contains(string(env), "P1_KEY="+key1+"\n") || !strings.Contains(string(env), "P2_KEY="+key2+"\n") {
		t.Errorf("detour.env:\n%s", env)
	}
	if fi, err := os.Stat(filepath.Join(dir, "detour.env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("detour.env mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if strings.Contains(out+errOut, "CANARY") {
		t.Error("P4: init printed a key")
	}

	// The keys are no longer in the environment: bot reads them from detour.env.
	_, errOut, code = runIn(t, bin, dir, "", cleanEnv(), "check")
	if code != exitOK {
		t.Fatalf("check: exit %d\n%s", code, errOut)
	}
	out, errOut, code = runIn(t, bin, dir, `{"text": "hello"}`+"\n", cleanEnv(), "--format", "jsonl")
	var reply outLine
	if code != exitOK || json.Unmarshal([]byte(out), &reply) != nil || reply.Type != "reply" || reply.Model != "p1/primary" {
		t.Fatalf("run: exit %d, %q\n%s", code, out, errOut)
	}

	// Again: nothing is overwritten without --force.
	_, errOut, code = runIn(t, bin, dir, "", cleanEnv("P1_KEY=other"), args...)
	if code != exitUsage || errOut != "bot init: config.yaml exists (bot init --force overwrites it); nothing was written\n" {
		t.Errorf("second init: exit %d, %q", code, errOut)
	}
	if env2, _ := os.ReadFile(filepath.Join(dir, "detour.env")); string(env2) != string(env) {
		t.Error("detour.env changed without --force")
	}
	_ = os.Chmod(filepath.Join(dir, "detour.env"), 0o644)
	if _, errOut, code = runIn(t, bin, dir, "", cleanEnv("P1_KEY="+key1, "P2_KEY="+key2), append(args, "--force")...); code != exitOK {
		t.Errorf("init --force: exit %d\n%s", code, errOut)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "detour.env")); fi.Mode().Perm() != 0o600 {
		t.Errorf("after --force detour.env is %v, want 0600", fi.Mode().Perm())
	}
	// covers F11: a key left for later makes its profile optional, so what init
	// writes loads: bot check says ok and the bot runs on the primary meanwhile.
	later := t.TempDir()
	out, errOut, code = runIn(t, bin, later, "", cleanEnv("P1_KEY="+key1), args...)
	if code != exitOK || !strings.Contains(out, "config config.yaml: ok\n") {
		t.Fatalf("init without the fallback's key: exit %d\n%s\n%s", code, out, errOut)
	}
	cfg2, _ := os.ReadFile(filepath.Join(later, "config.yaml"))
	if !strings.Contains(string(cfg2), `p2:main: {provider: p2, key: "${P2_KEY}", optional: true}`) ||
		!strings.Contains(string(cfg2), `p1:main: {provider: p1, key: "${P1_KEY}"}`+"\n") {
		t.Errorf("config.yaml: the profile without a key is not (or not alone) optional:\n%s", cfg2)
	}
	if out, _, code = runIn(t, bin, later, "", cleanEnv(), "check"); code != exitOK || !strings.Contains(out, "p2:main") || !strings.Contains(out, "left out") {
		t.Errorf("check without the fallback's key: exit %d\n%s", code, out)
	}

	// Bad flags say what is wrong and write nothing.
	empty := t.TempDir()
	_, errOut, code = runIn(t, bin, empty, "", cleanEnv(), "init", "--non-interactive", "--provider", "openia")
	if code != exitUsage || !strings.Contains(errOut, `unknown provider "openia"`) {
		t.Errorf("a typo: exit %d %q", code, errOut)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused init wrote %d file(s)", len(entries))
	}
}

// covers F9, P4 (issue 36): `bot init` at a terminal (a pty), answered like a
// person: a mistyped provider and a Slack token pasted as the OpenAI key are
// said at once and asked again (nothing is lost, nothing aborts at the end);
// names in any case; for Slack it asks for the admins (a wrong id again),
// who may use the bot (the stated default: the admins), the admin channel and
// a daily cap. Anthropic gets api: anthropic, every model its prices, the
// manifest a name of its own, and the end shows how to run it as a service. A
// typed key is never shown; the result passes bot check with no warning.
func TestInit_F9_InteractiveAtATerminal(t *testing.T) {
	bin := builtBot(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "init")
	cmd.Dir, cmd.Env = dir, cleanEnv()
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal on this machine: %v", err)
	}
	defer tty.Close()
	raw := &syncbuf.Buffer{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(raw, tty); close(copied) }()
	asked := map[string]int{}
	// answer waits until prompt is asked (once more than before) and is the
	// last thing on the terminal, then types text.
	answer := func(prompt, text string) {
		t.Helper()
		asked[prompt]++
		deadline := time.Now().Add(20 * time.Second)
		for {
			shown := raw.String()
			if strings.Count(shown, prompt+":") >= asked[prompt] && strings.HasSuffix(strings.TrimRight(shown, " "), prompt+":") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q (time %d); the terminal shows:\n%s", prompt, asked[prompt], shown)
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = io.WriteString(tty, text+"\r")
	}
	const key, antKey, app, bot = "sk-CANARY-typed-0003", "sk-ant-CANARY-typed-0006", "xapp-1-A0123-CANARY-0004", "xoxb-1-2-CANARY-0005"
	const provQ = "Providers (openai, anthropic, openrouter, ollama, or name=https://host/v1), the first answers first [openai]"
	const keyQ = "API key of openai (stored in the env file as OPENAI_API_KEY; Enter to fill it in later)"
	const adminQ = "Slack admins, who may run /recover and get the reports (ids such as U0123ABCD: the person's profile → ⋮ → Copy member ID; comma-separated)"
	answer(provQ, "OpenIA")
	answer(provQ, "OpenAI, Anthropic")
	answer("Channels (console, slack, discord) [console]", "Console, SLACK")
	answer("Model of openai [gpt-4o-mini]", "")
	answer("Model of anthropic [claude-haiku-4-5]", "")
	answer(keyQ, bot) // the Slack bot token, pasted at the wrong question
	answer(keyQ, key)
	answer("API key of anthropic (stored in the env file as ANTHROPIC_API_KEY; Enter to fill it in later)", antKey)
	answer("Slack app-level token (xapp-...) (stored in the env file as SLACK_APP_TOKEN; Enter to fill it in later)", app)
	answer("Slack bot token (xoxb-...) (stored in the env file as SLACK_BOT_TOKEN; Enter to fill it in later)", bot)
	answer(adminQ, "alice")
	answer(adminQ, "u0admin1, slack:U0ADMIN2")
	answer("Who may use the bot: admins (only the admins above), everyone (anyone in the workspace or server), or more ids besides the admins, comma-separated [admins]", "")
	answer("Admin channel for the reports when every model is down (slack:C0123ABCD, discord:123…, console; none = the log only) [none]", "Slack:c0reports1")
	answer("Daily cap: each person's paid calls per UTC day (0 = no cap) [200]", "100")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("init: %v\n%s", err, raw.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("init did not end:\n%s", raw.String())
	}
	// The process has ended, but its last lines may still be on their way
	// through the pty: the copy ends when the terminal is drained (EIO).
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
	}
	shown := raw.String()
	if strings.Contains(shown, "CANARY") {
		t.Errorf("P4: a typed secret showed on the terminal:\n%s", shown)
	}
	for _, want := range []string{
		`bot init: unknown provider "openia": want openai, anthropic, openrouter, ollama, or name=https://host/v1; try again`,
		"bot init: the value of OPENAI_API_KEY: that looks like a Slack bot token (xoxb-...), not the API key of openai; try again",
		`bot init: "alice" is not a Slack member id`,
		"wrote config.yaml", "wrote config.slack-manifest.yaml", "config config.yaml: ok",
		"channels: console (text), slack (app_token set, bot_token set)",
		"to run it as a service", "docker run -d --name detour", "--env-file detour.env detour", "packaging/detour.service",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "warning") {
		t.Errorf("bot check warned about what init wrote:\n%s", shown)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "detour.env"))
	for _, want := range []string{"OPENAI_API_KEY=" + key + "\n", "ANTHROPIC_API_KEY=" + antKey + "\n", "SLACK_APP_TOKEN=" + app + "\n", "SLACK_BOT_TOKEN=" + bot + "\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("detour.env lacks %q", want)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.yaml"))
	for _, want := range []string{
		"  anthropic: {api: anthropic}",
		`  "openai/gpt-4o-mini": {usd_per_mtok_in: 0.15, usd_per_mtok_out: 0.6}`,
		`  "anthropic/claude-haiku-4-5": {usd_per_mtok_in: 1, usd_per_mtok_out: 5}`,
		`  users: ["slack:U0ADMIN1", "slack:U0ADMIN2"]`,
		`  channel: "slack:C0REPORTS1"`,
		`  users: ["slack:U0ADMIN1", "slack:U0ADMIN2", "console:local"]   # only these people may use the bot`,
		"  per_user_daily_paid_calls: 100",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}
	if m, _ := os.ReadFile(filepath.Join(dir, "config.slack-manifest.yaml")); string(m) != string(detour.SlackManifest) {
		t.Error("config.slack-manifest.yaml is not the shipped manifest")
	}
	// What init wrote, checked on its own: ok, and not one warning.
	out, errOut, code := runIn(t, bin, dir, "", cleanEnv(), "check")
	if code != exitOK || errOut != "" || !strings.Contains(out, "config config.yaml: ok\n") {
		t.Errorf("bot check: exit %d\n%s\nstderr:\n%s", code, out, errOut)
	}
}
