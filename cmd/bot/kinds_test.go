package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/drills"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// kindsConfig writes a configuration with one provider of every protocol, all
// served by srv on their own routes.
func kindsConfig(t *testing.T, srv *fakeprovider.Server) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`storage: {driver: sqlite, dsn: %q}
channels:
  console: {enabled: true, format: jsonl}
providers:
  claude: {api: anthropic, base_url: %q}
  az: {api: azure, base_url: %q, api_version: 2024-10-21}
  gem: {api: gemini, base_url: %q}
  oai: {base_url: %q}
auth:
  profiles:
    claude:main: {provider: claude, key: "sk-ant-CANARY-kinds-0001"}
    az:main: {provider: az, key: "CANARY-kinds-azure-0002"}
    gem:main: {provider: gem, key: "AIza-CANARY-kinds-0003"}
    oai:main: {provider: oai, key: "sk-CANARY-kinds-0004"}
agents:
  defaults:
    model: {primary: claude/claude-x, fallbacks: [az/gpt-4o, gem/gemini-x, oai/gpt-4o-mini]}
models:
  az/gpt-4o: {deployment: prod-gpt-4o}
`, filepath.Join(dir, "bot.db"), srv.BaseURLFor("claude", fakeprovider.APIAnthropic), srv.BaseURLFor("az", fakeprovider.APIAzure),
		srv.BaseURLFor("gem", fakeprovider.APIGemini), srv.BaseURL("oai"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// covers V5, P4, T8: `bot check --probe` makes one smallest call per profile in
// each provider's own protocol, says which work, and prints no key; bot check
// shows each provider's protocol.
func TestCheck_ProbeEveryProtocol(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule *fakeprovider.Rule
		code int
		want []string
	}{
		{name: "every protocol answers", code: exitOK, want: []string{
			"claude http://127.0.0.1:", "api anthropic", "az http://127.0.0.1:", "api azure 2024-10-21", "api gemini",
			"ok model claude:main claude/claude-x at", "ok model az:main az/gpt-4o at", "ok model gem:main gem/gemini-x at",
			"ok model oai:main oai/gpt-4o-mini at", "probes: every check works (5)",
		}},
		{name: "anthropic overloaded", rule: &fakeprovider.Rule{Provider: "claude", Mode: fakeprovider.ModeOverloaded529}, code: exitFailed,
			want: []string{"FAIL model claude:main claude/claude-x at", "overloaded", "ok model az:main", "probes: 1 of 5 failed"}},
		{name: "azure key refused", rule: &fakeprovider.Rule{Provider: "az", Mode: fakeprovider.ModeUnauthorized401}, code: exitFailed,
			want: []string{"FAIL model az:main az/gpt-4o at", "Access denied due to invalid subscription key", "probes: 1 of 5 failed"}},
		{name: "gemini rate limited", rule: &fakeprovider.Rule{Provider: "gem", Mode: fakeprovider.ModeRateLimit}, code: exitFailed,
			want: []string{"FAIL model gem:main gem/gemini-x at", "rate limit", "probes: 1 of 5 failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llm := startFake(t)
			if tc.rule != nil {
				llm.Script(*tc.rule)
			}
			path := kindsConfig(t, llm)
			checkProbe(t, path, tc.code, tc.want)
			seen := map[fakeprovider.API]int{}
			for _, c := range llm.Calls() {
				seen[c.API]++
				if c.Stream || (c.API == fakeprovider.APIAzure && c.Deployment != "prod-gpt-4o") {
					t.Errorf("probe call %+v", c)
				}
			}
			if len(seen) != 4 || seen[fakeprovider.APIAnthropic] != 1 || seen[fakeprovider.APIOpenAI] != 1 {
				t.Errorf("calls by protocol %v, want one per profile in each", seen)
			}
		})
	}
}

// covers R1-R11, B2, B6, N1-N3, V3, V4: `bot drill --scenario all --fast` on a
// chain anthropic -> azure -> openai-compatible, each served by the fake in its
// own protocol: every verdict passes.
func TestDrill_AllFastOnThreeProtocols(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every drill")
	}
	code, out, stderr := drillRun(t, "--config", "../../drills/testdata/kinds.yaml", "--fast", "--scenario", "all")
	if code != exitOK {
		var failed []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "FAIL") {
				failed = append(failed, strings.TrimSpace(line))
			}
		}
		t.Fatalf("exit %d; failing:\n%s\n%s", code, strings.Join(failed, "\n"), stderr)
	}
	if n := strings.Count(out, ": PASS"); n != len(drills.Names()) {
		t.Errorf("%d scenarios passed, want %d:\n%s", n, len(drills.Names()), out)
	}
}
