package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
)

func fakeEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func parseFile(t *testing.T, name string, env map[string]string) (*Config, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return Parse(filepath.Join("testdata", name), data, fakeEnv(env))
}

// TestParse_Errors checks that every class of configuration error names the file,
// the line and the key (config.example.yaml documents every key).
func TestParse_Errors(t *testing.T) {
	tests := []struct {
		file    string
		line    int
		key     string
		msg     string // substring of the message
		noLeak  string // text that must not appear anywhere in the error
		wantLen int    // number of errors (0 = at least one)
	}{
		{file: "err_unknown_key.yaml", line: 6, key: "agents.defaults.timeout", msg: "unknown key"},
		{file: "err_missing_env.yaml", line: 5, key: "auth.profiles.openai:main.key", msg: "DETOUR_TEST_UNSET_KEY is not set"},
		{file: "err_primary_provider.yaml", line: 6, key: "agents.defaults.model.primary", msg: `provider "anthropic", which is not configured`},
		{file: "err_fallback_provider.yaml", line: 9, key: "agents.defaults.model.fallbacks[1]", msg: `provider "mistral"`, wantLen: 1},
		{file: "err_models_provider.yaml", line: 8, key: "models.groq/llama", msg: `provider "groq"`, wantLen: 1},
		{file: "err_agent_provider.yaml", line: 8, key: "agents.list[0].model", msg: `provider "ollama"`},
		{file: "err_profile_provider.yaml", line: 6, key: "auth.profiles.anthropic:main.provider", msg: `unknown provider "anthropic"`, noLeak: "CANARY"},
		{file: "err_order_profile.yaml", line: 7, key: "auth.order.openai[1]", msg: `unknown profile "openai:spare"`, noLeak: "CANARY", wantLen: 1},
		{file: "err_bad_duration.yaml", line: 7, key: "agents.defaults.failover.retry_after_max_wait", msg: "bad duration"},
		{file: "err_bad_number.yaml", line: 7, key: "limits.max_paid_attempts_per_minute", msg: "bad number"},
		{file: "err_bad_notices.yaml", line: 7, key: "notices.users", msg: "want all, direct_only or off"},
		{file: "err_bad_admin_channel.yaml", line: 7, key: "admin.channel", msg: "bad channel"},
		{file: "err_yaml_syntax.yaml", line: 3, key: "", msg: "invalid YAML"},
		{file: "err_no_primary.yaml", line: 1, key: "agents.defaults.model.primary", msg: "is required"},
		{file: "err_enabled_slack_env.yaml", line: 4, key: "channels.slack.app_token", msg: "DETOUR_TEST_UNSET_APP is not set", noLeak: "CANARY"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, err := parseFile(t, tt.file, nil)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with an error")
			}
			errs := Errors(err)
			if len(errs) == 0 {
				t.Fatalf("no *config.Error in %v", err)
			}
			if tt.wantLen > 0 && len(errs) != tt.wantLen {
				t.Errorf("got %d errors, want %d: %v", len(errs), tt.wantLen, err)
			}
			var found *Error
			for _, e := range errs {
				if e.Key == tt.key && e.Line == tt.line {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no error at line %d key %q in:\n%v", tt.line, tt.key, err)
			}
			if !strings.Contains(found.Msg, tt.msg) {
				t.Errorf("message %q lacks %q", found.Msg, tt.msg)
			}
			wantPrefix := fmt.Sprintf("testdata/%s:%d: ", tt.file, tt.line)
			if tt.key != "" {
				wantPrefix += tt.key + ": "
			}
			if !strings.HasPrefix(found.Error(), wantPrefix) {
				t.Errorf("Error() = %q, want prefix %q", found.Error(), wantPrefix)
			}
			if tt.noLeak != "" && strings.Contains(err.Error(), tt.noLeak) {
				t.Errorf("error leaks a secret (P4): %v", err)
			}
		})
	}
}

// TestParse_MultipleErrorsJoined checks that every problem is reported, not just the first.
func TestParse_MultipleErrorsJoined(t *testing.T) {
	src := "providers:\n  openai: {base_url: https://api.openai.com/v1}\nagents:\n  defaults:\n    model: {primary: x/y}\nnotices: {users: nobody}\nbogus: 1\n"
	_, err := Parse("c.yaml", []byte(src), nil)
	errs := Errors(err)
	keys := map[string]int{}
	for _, e := range errs {
		keys[e.Key] = e.Line
	}
	for key, line := range map[string]int{"bogus": 7} {
		if keys[key] != line {
			t.Errorf("missing %s at line %d in %v", key, line, err)
		}
	}
	// Decoding errors stop before cross-reference checks, so a second run without
	// the unknown key reports both remaining problems.
	src = strings.Replace(src, "bogus: 1\n", "", 1)
	_, err = Parse("c.yaml", []byte(src), nil)
	errs = Errors(err)
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2: %v", len(errs), err)
	}
	if !strings.Contains(err.Error(), "c.yaml:5: agents.defaults.model.primary") || !strings.Contains(err.Error(), "c.yaml:6: notices.users") {
		t.Errorf("joined error lacks a part: %v", err)
	}
}

func TestParse_Minimal_Defaults(t *testing.T) {
	cfg, err := parseFile(t, "minimal.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Storage != (Storage{Driver: "sqlite", DSN: "detour.db"}) {
		t.Errorf("storage = %+v", cfg.Storage)
	}
	if !cfg.Channels.Console.Enabled || cfg.Channels.Console.Format != "text" || cfg.Channels.Slack.Enabled || cfg.Channels.Discord.Enabled {
		t.Errorf("channels = %+v", cfg.Channels)
	}
	if d := cfg.Channels.Discord; !d.MessageContent || d.ShardID != 0 || d.ShardCount != 1 {
		t.Errorf("discord defaults = message_content %v, shard %d/%d; want true, 0/1", d.MessageContent, d.ShardID, d.ShardCount)
	}
	if cfg.Notices.Users != "all" || cfg.Admin.Channel != "" {
		t.Errorf("notices/admin = %+v %+v", cfg.Notices, cfg.Admin)
	}
	if cfg.Limits != (Limits{MaxPaidAttemptsPerMinute: 120, MaxMessageBytes: 65536, MaxResponseBytes: 8388608, MaxAnswerBytes: 1048576,
		MaxFileBytes: 5242880, MaxFiles: 4, MaxTextFileBytes: 32768}) { // T1, I2
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if got := cfg.Agents.Defaults.IdleTimeout; got != 60*time.Second {
		t.Errorf("idle timeout = %v, want 60s (R5)", got)
	}
	if got := cfg.Agents.Defaults.PrimaryProbeInterval; got != 5*time.Minute {
		t.Errorf("primary probe interval = %v, want 5m (S3)", got)
	}
	// The policy of a config with only defaults is exactly the defaults of
	// docs/behaviour.md, which are failover's own (one source).
	got, want := cfg.Policy, failover.DefaultPolicy()
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("default policy differs:\n got %s\nwant %s", gj, wj)
	}
}

func TestParse_Full(t *testing.T) {
	env := map[string]string{
		"SLACK_APP_TOKEN":       "xapp-CANARY-0001",
		"SLACK_BOT_TOKEN":       "xoxb-CANARY-0002",
		"OPENAI_API_KEY":        "sk-CANARY-0003",
		"OPENAI_API_KEY_BACKUP": "sk-CANARY-0004",
		"ANTHROPIC_API_KEY":     "sk-CANARY-0005",
		// DISCORD_BOT_TOKEN unset: discord is disabled, so that is fine.
		// DATA_DIR unset: the default applies.
	}
	cfg, err := parseFile(t, "full.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Storage.DSN != "/var/lib/detour/detour.db" {
		t.Errorf("dsn = %q (${VAR:-default})", cfg.Storage.DSN)
	}
	if cfg.Channels.Slack.AppToken.Reveal() != "xapp-CANARY-0001" || cfg.Channels.Console.Format != "jsonl" {
		t.Errorf("channels = %+v", cfg.Channels)
	}
	if want := []string{"openai", "anthropic", "openrouter"}; strings.Join(cfg.ProviderIDs, ",") != strings.Join(want, ",") {
		t.Errorf("provider ids = %v", cfg.ProviderIDs)
	}
	bp := cfg.Auth.Profiles["openai:backup"]
	if bp.Type != failover.ProfileToken || bp.ExpiresAt.Year() != 2030 || bp.Key.Reveal() != "sk-CANARY-0004" {
		t.Errorf("backup profile = %v", bp)
	}
	if cfg.Auth.Profiles["anthropic:main"].Type != failover.ProfileAPIKey {
		t.Errorf("default profile type not api_key")
	}
	if got := cfg.EngineProfiles()["openai"]; len(got) != 2 || got[0].ID != "openai:main" {
		t.Errorf("engine profiles = %+v", got)
	}
	fb := cfg.Agents.Defaults.Model.Fallbacks
	if len(fb) != 2 || fb[1] != "openrouter/meta-llama/llama-3-70b" {
		t.Errorf("fallbacks = %v", fb)
	}
	if l := cfg.Agents.List; len(l) != 2 || l[0].Fallbacks == nil || len(*l[0].Fallbacks) != 0 || l[1].Fallbacks != nil {
		t.Errorf("agents list: fallbacks must keep nil vs empty (S2): %+v", l)
	}
	if m := cfg.Models["openai/gpt-4o-mini"]; m.ContextWindow != 128000 || m.USDPerMTokOut != 0.6 {
		t.Errorf("models = %+v", cfg.Models)
	}
	p := cfg.Policy
	checks := []struct {
		name      string
		got, want any
	}{
		{"ladder", fmt.Sprint(p.CooldownLadder), "[10s 20s]"},
		{"transient ladder (A3)", fmt.Sprint(p.TransientLadder), "[2s 4s 30s]"},
		{"transient window (A3)", p.TransientWindow, 7*time.Minute + 30*time.Second},
		{"shared probe interval (A1)", p.SharedProbeInterval, 2500 * time.Millisecond},
		{"shared probe interval cap (E2)", p.SharedProbeIntervalMax, 20 * time.Second},
		{"shared probe wait (A1)", p.SharedProbeWait, 8 * time.Second},
		{"billing", p.BillingBackoff, 4 * time.Hour},
		{"billing max", p.BillingMax, 12 * time.Hour},
		{"billing anthropic", p.BillingBackoffByProvider["anthropic"], 2 * time.Hour},
		{"auth perm", p.AuthPermanentBackoff, 5 * time.Minute},
		{"auth perm max", p.AuthPermanentMax, 30 * time.Minute},
		{"window", p.FailureWindow, 12 * time.Hour},
		{"overloaded rotations", p.OverloadedProfileRotations, 2},
		{"overloaded backoff", p.OverloadedBackoff, 250 * time.Millisecond},
		{"rate rotations", p.RateLimitedProfileRotations, 3},
		{"jitter", p.Jitter, 0.2},
		{"retry max wait", p.RetryAfterMaxWait, 45 * time.Second},
		{"switch threshold", p.TimeoutSwitchThreshold, 4},
		{"skip ttl", p.FallbackSkipTTL, 2 * time.Minute},
		{"probe interval", p.ProbeInterval, 40 * time.Second},
		{"probe window", p.ProbeWindow, 3 * time.Minute},
		{"billing probe", p.BillingProbeInterval, time.Hour},
		{"idle retries", p.IdleRetries, 2},
		{"breaker", p.BreakerTrip, 6},
		{"empty retries", p.EmptyOutputRetries, 0},
		{"min wait", p.MinParsedWait, 20 * time.Second},
		{"max wait", p.MaxParsedWait, 72 * time.Hour},
		{"compact ratio", p.TimeoutCompactRatio, 0.7},
		{"attempt timeout", p.AttemptTimeout, 120 * time.Second},
		{"run timeout", p.RunTimeout, 600 * time.Second},
		{"turn attempts", p.MaxPaidAttemptsPerTurn, 4},
		{"turn cost", p.MaxTurnCostUSD, 0.5},
		{"idle", cfg.Agents.Defaults.IdleTimeout, 30 * time.Second},
		{"primary probe", cfg.Agents.Defaults.PrimaryProbeInterval, 10 * time.Minute},
		{"per minute", cfg.Limits.MaxPaidAttemptsPerMinute, 60},
		{"response cap", cfg.Limits.MaxResponseBytes, 4 << 20}, // T1
		{"answer cap", cfg.Limits.MaxAnswerBytes, 512 << 10},   // T1
		{"notices", cfg.Notices.Users, "direct_only"},
		{"admin users", fmt.Sprint(cfg.Admin.Users), "[slack:U123 discord:456]"},
		{"discord message content", cfg.Channels.Discord.MessageContent, false},
		{"discord shard", fmt.Sprint(cfg.Channels.Discord.ShardID, "/", cfg.Channels.Discord.ShardCount), "1/3"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestSecrets_P4_NeverPrinted checks that no way of printing a config shows a secret.
func TestSecrets_P4_NeverPrinted(t *testing.T) {
	env := map[string]string{
		"SLACK_APP_TOKEN": "xapp-CANARY-0001", "SLACK_BOT_TOKEN": "xoxb-CANARY-0002",
		"OPENAI_API_KEY": "sk-CANARY-0003", "OPENAI_API_KEY_BACKUP": "sk-CANARY-0004", "ANTHROPIC_API_KEY": "sk-CANARY-0005",
	}
	cfg, err := parseFile(t, "full.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	var logBuf strings.Builder
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("cfg", "profile", cfg.Auth.Profiles["openai:main"].Key, "slack", cfg.Channels.Slack.BotToken)
	js, _ := json.Marshal(cfg)
	outs := []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%#v", *cfg), string(js), logBuf.String()}
	for i, s := range outs {
		if strings.Contains(s, "CANARY") {
			t.Errorf("output %d leaks a secret: %s", i, s)
		}
	}
	if !strings.Contains(outs[1], "set") {
		t.Errorf("secret status not shown: %s", outs[1])
	}
	if Secret("").String() != "missing" || Secret("x").String() != "set" {
		t.Errorf("Secret status wrong")
	}
}

func TestExpand(t *testing.T) {
	env := fakeEnv(map[string]string{"A": "1", "EMPTY": ""})
	tests := []struct {
		in, out string
		missing string
		err     bool
	}{
		{in: "plain", out: "plain"},
		{in: "${A}", out: "1"},
		{in: "x${A}y${A}", out: "x1y1"},
		{in: "${B:-dflt}", out: "dflt"},
		{in: "${EMPTY:-dflt}", out: "dflt"},
		{in: "${EMPTY}", out: ""},
		{in: "${B:-}", out: ""},
		{in: "$${A}", out: "${A}"},
		{in: "cost $5", out: "cost $5"},
		{in: "${B}", missing: "B"},
		{in: "${A", err: true},
		{in: "${1X}", err: true},
		{in: "${}", err: true},
	}
	for _, tt := range tests {
		out, missing, err := expand(tt.in, env)
		if (err != nil) != tt.err {
			t.Errorf("expand(%q) err = %v", tt.in, err)
			continue
		}
		if tt.err {
			continue
		}
		if strings.Join(missing, ",") != tt.missing {
			t.Errorf("expand(%q) missing = %v, want %q", tt.in, missing, tt.missing)
		}
		if tt.missing == "" && out != tt.out {
			t.Errorf("expand(%q) = %q, want %q", tt.in, out, tt.out)
		}
	}
}

// TestParse_DisabledChannelEnv checks that an unset token of a disabled channel is
// not an error, while the same reference elsewhere is.
func TestParse_DisabledChannelEnv(t *testing.T) {
	src := "channels:\n  discord: {enabled: false, token: ${NOPE}}\nproviders:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	if _, err := Parse("c.yaml", []byte(src), nil); err != nil {
		t.Fatalf("disabled channel env: %v", err)
	}
	src = strings.Replace(src, "enabled: false", "enabled: true", 1)
	_, err := Parse("c.yaml", []byte(src), nil)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:2: channels.discord.token: environment variable NOPE is not set") {
		t.Fatalf("enabled channel env: %v", err)
	}
}

// TestParse_M1_PostgresStorage: storage.driver postgres is accepted with a DSN
// of the right shape (a postgres:// URL or a keyword string, a password from the
// environment), and a DSN of the wrong shape is an error that never echoes it.
// covers M1, T8
func TestParse_M1_PostgresStorage(t *testing.T) {
	base := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	env := map[string]string{"DB_PASSWORD": "CANARY-db-pass"}
	good := []struct{ dsn, want string }{
		{"postgres://detour:${DB_PASSWORD}@127.0.0.1:5432/detour?sslmode=disable", "postgres://detour:CANARY-db-pass@127.0.0.1:5432/detour?sslmode=disable"},
		{"postgresql://db.internal/detour", "postgresql://db.internal/detour"},
		{"postgres:///detour?host=/run/postgresql", "postgres:///detour?host=/run/postgresql"},
		{"host=127.0.0.1 port=5432 dbname=detour user=detour sslmode=disable", "host=127.0.0.1 port=5432 dbname=detour user=detour sslmode=disable"},
	}
	for _, tc := range good {
		cfg, err := Parse("c.yaml", []byte(base+"storage: {driver: postgres, dsn: \""+tc.dsn+"\"}\n"), fakeEnv(env))
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if cfg.Storage != (Storage{Driver: "postgres", DSN: tc.want}) {
			t.Errorf("%s: storage = %+v", tc.dsn, cfg.Storage)
		}
	}
	bad := []struct{ dsn, want string }{
		{"", "storage.dsn: must name the Postgres database"},
		{"mysql://u:CANARY@h/db", "storage.dsn: is a URL of another scheme"},
		{"postgres://u:CANARY@/db", "storage.dsn: names no host"},
		{"postgres://u:CANARY@h:99999/db", "storage.dsn: has a bad port"},
		{"detour.db", "storage.dsn: is neither a postgres:// URL nor a keyword=value string"},
	}
	for _, tc := range bad {
		_, err := Parse("c.yaml", []byte(base+"storage: {driver: postgres, dsn: \""+tc.dsn+"\"}\n"), fakeEnv(env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.dsn, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%q: the error echoes the DSN's password: %v", tc.dsn, err)
		}
	}
}

func TestParse_ValueErrors(t *testing.T) {
	base := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	tests := []struct{ extra, want string }{
		{"storage: {driver: mysql}\n", "c.yaml:4: storage.driver: unknown driver \"mysql\": want sqlite or postgres"},
		{"channels: {console: {format: xml}}\n", "c.yaml:4: channels.console.format: unknown format"},
		{"limits: {max_message_bytes: -3}\n", "c.yaml:4: limits.max_message_bytes: bad number -3"},
		// covers T1: the response caps are validated.
		{"limits: {max_response_bytes: 1000}\n", "c.yaml:4: limits.max_response_bytes: bad number 1000: must be at least 65536"},
		{"limits: {max_answer_bytes: 0}\n", "c.yaml:4: limits.max_answer_bytes: bad number 0: must be at least 1024"},
		{"limits: {max_answer_bytes: 16777216}\n", "c.yaml:4: limits.max_answer_bytes: 16777216 is more than limits.max_response_bytes (8388608)"},
		{"limits: {max_response_bytes: 8MB}\n", "limits.max_response_bytes: bad number \"8MB\""},
		{"auth: {cooldowns: {billing_backoff_hours: many}}\n", "c.yaml:4: auth.cooldowns.billing_backoff_hours: bad number"},
		{"auth: {cooldowns: {ladder: [30s, never]}}\n", "c.yaml:4: auth.cooldowns.ladder[1]: bad duration"},
		{"auth: {cooldowns: {jitter: 2}}\n", "auth.cooldowns.jitter: bad number 2"},
		{"admin: {users: [alice]}\n", "c.yaml:4: admin.users[0]: bad user"},
		{"admin: {channel: 'slack:'}\n", "admin.channel: bad channel"},
		{"models: {nomodel: {}}\n", "models.nomodel: bad model"},
		{"agents2: 1\n", "c.yaml:4: agents2: unknown key"},
		{"notices: [all]\n", "c.yaml:4: notices: must be a mapping"},
		{"channels: {console: {enabled: maybe}}\n", "channels.console.enabled: bad boolean"},
		{"channels: {discord: {shard_id: 2, shard_count: 2}}\n", "c.yaml:4: channels.discord.shard_id: shard 2 does not exist"},
		{"channels: {discord: {shard_count: 0}}\n", "channels.discord.shard_count: bad number 0"},
		{"channels: {discord: {message_content: sometimes}}\n", "channels.discord.message_content: bad boolean"},
		{"channels: {slack: {events: some}}\n", "c.yaml:4: channels.slack.events: unknown value \"some\": want all or mentions"},
	}
	for _, tt := range tests {
		_, err := Parse("c.yaml", []byte(base+tt.extra), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.extra, err, tt.want)
		}
	}
	// channels.slack.events: all by default, mentions when asked (a mention-only
	// workspace; the key works while Slack is off too).
	for extra, want := range map[string]string{"": "all", "channels: {slack: {events: mentions}}\n": "mentions"} {
		cfg, err := Parse("c.yaml", []byte(base+extra), nil)
		if err != nil || cfg.Channels.Slack.Events != want {
			t.Errorf("%q: events = %v (%v), want %s", extra, cfg, err, want)
		}
	}
	// primary_probe_interval 0 is refused: the router takes no default of its
	// own to put in its place (S3).
	_, err := Parse("c.yaml", []byte("providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}, failover: {primary_probe_interval: 0}}}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3: agents.defaults.failover.primary_probe_interval: must be positive") {
		t.Errorf("primary_probe_interval 0: %v", err)
	}
	// A duplicate top-level key.
	_, err = Parse("c.yaml", []byte(base+"notices: {users: all}\nnotices: {users: off}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:5: notices: duplicate key (first at line 4)") {
		t.Errorf("duplicate: %v", err)
	}
	// A bad provider base URL and a profile whose id does not match its provider.
	_, err = Parse("c.yaml", []byte("providers:\n  o: {base_url: ftp://x}\n  p: {base_url: http://x}\nauth:\n  profiles:\n    o:main: {provider: p, key: k}\nagents: {defaults: {model: {primary: o/m}}}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:2: providers.o.base_url: bad URL") || !strings.Contains(err.Error(), "c.yaml:6: auth.profiles.o:main: profile id") {
		t.Errorf("urls/profile id: %v", err)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join("testdata", "minimal.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// TestExampleConfig checks that the documented config.example.yaml at the repo
// root loads, given its environment variables.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Skip("config.example.yaml not present yet")
	}
	env := func(k string) (string, bool) { return "CANARY-" + k, true }
	cfg, err := Parse("config.example.yaml", data, env)
	if err != nil {
		t.Fatalf("config.example.yaml does not load:\n%v", err)
	}
	if cfg.Agents.Defaults.Model.Primary == "" {
		t.Error("no primary")
	}
	// With no environment at all, only missing-variable errors may appear.
	_, err = Parse("config.example.yaml", data, nil)
	for _, e := range Errors(err) {
		if !strings.Contains(e.Msg, "environment variable") {
			t.Errorf("unexpected error without env: %v", e)
		}
	}
}

// FuzzParse checks that Parse never panics, whatever the input.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "*.yaml"))
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &x [*x]"))
	f.Add([]byte("agents: {list: [{fallbacks: ~}]}"))
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-x", "SLACK_APP_TOKEN": "a", "SLACK_BOT_TOKEN": "b"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.yaml", data, env)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("cfg=%v err=%v: exactly one must be set", cfg != nil, err)
		}
		if err != nil && len(Errors(err)) == 0 {
			t.Fatalf("error without *config.Error: %v", err)
		}
	})
}
