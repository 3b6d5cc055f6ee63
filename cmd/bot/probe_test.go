package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

const (
	probeApp     = "xapp-CANARY-probe-app-1"
	probeBot     = "xoxb-CANARY-probe-bot-1"
	probeDiscord = "MTIzNDU2Nzg5MDEyMzQ1Njc4.CANARY.discord-probe-token-0001"
)

// covers P4, T8: `bot check --probe` tries each profile with one smallest model
// call, Slack's tokens (auth.test, apps.connections.open), Discord's token
// (GET /users/@me) and the admin channel, prints a table of what works, and
// exits 1 when something fails; no secret is printed.
func TestCheck_Probe(t *testing.T) {
	tests := []struct {
		name  string
		setup func(llm *fakeprovider.Server, s *fakeslack.Server, d *fakediscord.Server)
		admin string
		code  int
		want  []string // "RESULT CHECK" prefixes of table rows, spaces squeezed
	}{
		{name: "everything works", admin: "slack:C0ADMIN", code: exitOK, want: []string{
			"ok storage sqlite", "ok model p1:main p1/primary at http://127.0.0.1:",
			"ok model p2:main p2/fallback-1 at", "ok model p2:main p2/fallback-2 at", "ok slack bot token (auth.test) workspace Fake",
			"ok slack app token (apps.connections.open)", "ok slack admin channel C0ADMIN (conversations.info) #general",
			"ok discord bot token (GET /users/@me) bot user", "probes: every check works (8)",
		}},
		{name: "a revoked key", admin: "discord:900", code: exitFailed,
			setup: func(llm *fakeprovider.Server, _ *fakeslack.Server, _ *fakediscord.Server) {
				llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeRevoked403})
			},
			want: []string{"ok model p1:main", "FAIL model p2:main p2/fallback-1 at", "FAIL model p2:main p2/fallback-2 at", "ok discord admin channel 900 (GET /channels)",
				"probes: 2 of 8 failed"}},
		{name: "wrong platform tokens", admin: "slack:C0ADMIN", code: exitFailed,
			setup: func(_ *fakeprovider.Server, s *fakeslack.Server, d *fakediscord.Server) {
				s.BotToken, s.AppToken, d.Token = "xoxb-other", "xapp-other", "MTIzNDU2Nzg5MDEyMzQ1Njc4.other.wrong-token-000000000000"
			},
			want: []string{"FAIL slack bot token (auth.test) invalid_auth", "FAIL slack app token (apps.connections.open) invalid_auth",
				"FAIL slack admin channel C0ADMIN", "FAIL discord bot token (GET /users/@me)", "probes: 4 of 8 failed"}},
		{name: "admin channel not found", admin: "slack:C0GONE", code: exitFailed,
			setup: func(_ *fakeprovider.Server, s *fakeslack.Server, _ *fakediscord.Server) {
				s.FailNext("conversations.info", "channel_not_found")
			},
			want: []string{"FAIL slack admin channel C0GONE (conversations.info) channel_not_found", "probes: 1 of 8 failed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			llm := startFake(t)
			s := fakeslack.New()
			s.AppToken, s.BotToken = probeApp, probeBot
			d := fakediscord.New()
			d.Token = probeDiscord
			if tc.setup != nil {
				tc.setup(llm, s, d)
			}
			s.Start()
			d.Start()
			t.Cleanup(func() { s.Close(); d.Close() })
			path := testConfig(t, llm, fmt.Sprintf(`channels:
  console: {enabled: false}
  slack: {enabled: true, app_token: %q, bot_token: %q, api_url: %q}
  discord: {enabled: true, token: %q, api_url: %q}
admin: {channel: %q}
`, probeApp, probeBot, s.URL(), probeDiscord, d.URL(), tc.admin))
			fixChannels(t, path)
			checkProbe(t, path, tc.code, tc.want)
			if n := llm.CallCount(fakeprovider.Filter{}); n != 3 {
				t.Errorf("%d model calls, want one per model of the chain (3; each key is used by one of them)", n)
			}
			if s.Calls("chat.postMessage") != 0 || len(d.Messages()) != 0 {
				t.Error("a probe posted a message")
			}
		})
	}
}

// fixChannels drops the console line testConfig writes, so the test's own
// channels section is the only one.
func fixChannels(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "channels:\n  console: {enabled: true, format: jsonl}\n", "", 1)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// covers T7: the probe of a SQLite file that does not exist yet does not
// create it.
func TestCheck_ProbeCreatesNoDatabase(t *testing.T) {
	llm := startFake(t)
	path := testConfig(t, llm, "")
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"check", "--probe", "--config", path}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "does not exist yet") {
		t.Errorf("storage row:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "bot.db")); !os.IsNotExist(err) {
		t.Errorf("the probe created the database: %v", err)
	}
}

// covers F8: `bot check --probe` calls every model of the chains once (a
// fallback that answers 404 fails here, with what to check) and every key once,
// and the per-minute guard bounds the calls: past it the rest are skipped.
func TestCheck_F8_ProbeTriesEveryModelAndKey(t *testing.T) {
	llm := startFake(t)
	llm.Script(fakeprovider.Rule{Provider: "p2", Model: "gone", Mode: fakeprovider.ModeModelNotFound404})
	write := func(extra string) string {
		dir := t.TempDir()
		cfg := fmt.Sprintf(`storage: {driver: sqlite, dsn: %q}
channels: {console: {format: jsonl}}
providers:
  p1: {base_url: %q}
  p2: {base_url: %q}
auth:
  profiles:
    p1:main: {provider: p1, key: "${DETOUR_TEST_P1_KEY:-sk-CANARY-probe-1}"}
    p1:backup: {provider: p1, key: "${DETOUR_TEST_P1B_KEY:-sk-CANARY-probe-2}"}
    p2:main: {provider: p2, key: "${DETOUR_TEST_P2_KEY:-sk-CANARY-probe-3}"}
agents:
  defaults:
    model: {primary: p1/primary, fallbacks: [p2/fallback-1, p2/gone]}
%s`, filepath.Join(dir, "bot.db"), llm.BaseURL("p1"), llm.BaseURL("p2"), extra)
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(path string) (int, string) {
		var stdout, stderr syncbuf.Buffer
		code := dispatch(context.Background(), []string{"check", "--probe", "--config", path}, nil, &stdout, &stderr)
		return code, squeeze(strings.ReplaceAll(stdout.String(), "\n", " | "))
	}
	code, table := run(write(""))
	for _, w := range []string{
		"ok model p1:main p1/primary at", "ok model p2:main p2/fallback-1 at",
		"FAIL model p2:main p2/gone at http://127.0.0.1:", "model not found", "check the model name, and that providers.p2.base_url is the API's root",
		"ok model p1:backup p1/primary at", "probes: 1 of 5 failed",
	} {
		if !strings.Contains(table, w) {
			t.Errorf("the probe table lacks %q:\n%s", w, table)
		}
	}
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if n := llm.CallCount(fakeprovider.Filter{}); n != 4 {
		t.Errorf("%d model calls, want 4 (three models, one more key)", n)
	}
	if strings.Contains(table, "CANARY") {
		t.Error("P4: a key was printed")
	}

	before := llm.CallCount(fakeprovider.Filter{})
	_, table = run(write("limits: {max_paid_attempts_per_minute: 2}\n"))
	if !strings.Contains(table, "skip model p2:main p2/gone at") || !strings.Contains(table, "limits.max_paid_attempts_per_minute reached") {
		t.Errorf("the guard did not bound the probes:\n%s", table)
	}
	if n := llm.CallCount(fakeprovider.Filter{}) - before; n != 2 {
		t.Errorf("%d model calls with a guard of 2 a minute", n)
	}
}

// checkProbe runs "check --probe" on the config at path and checks its exit
// code, that its table holds every want, and that no secret was printed (P4).
// It returns what the check wrote on stdout.
func checkProbe(t *testing.T, path string, wantCode int, want []string) string {
	t.Helper()
	var stdout, stderr syncbuf.Buffer
	code := dispatch(context.Background(), []string{"check", "--probe", "--config", path}, nil, &stdout, &stderr)
	out := stdout.String()
	if code != wantCode {
		t.Fatalf("exit %d, want %d\n%s%s", code, wantCode, out, stderr.String())
	}
	table := squeeze(strings.ReplaceAll(out, "\n", " | "))
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("the probe table lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out+stderr.String(), "CANARY") {
		t.Errorf("P4: a secret was printed:\n%s", out)
	}
	return out
}
