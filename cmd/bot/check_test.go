package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck_Good prints the resolved chains and profiles, with secrets shown
// only as set/missing (P4). covers S1, S2, K4, K5
func TestCheck_Good(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, `  list:
    - {id: strict, model: p2/fallback-2, fallbacks: [], channels: ["console:s9"]}
    - {id: own, model: p2/fallback-2, fallbacks: [p1/primary]}
`)
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check", "--config", path}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"config " + path + ": ok",
		"channels: console (jsonl)",
		"p1:main  provider p1  api_key  key set",
		"default: p1/primary -> p2/fallback-1 -> p2/fallback-2",
		"agent strict [console:s9]: p2/fallback-2 (strict: no fallback)",
		"agent own [no channel matches it]: p2/fallback-2 -> p1/primary",
		"budget: 8 paid attempts per turn, no cost cap, 120 paid attempts per minute overall",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "CANARY") {
		t.Errorf("check printed a secret (P4):\n%s", out)
	}
}

func TestCheck_BadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	src := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nauth:\n  profiles:\n    x:main: {provider: x, key: sk-CANARY-bad-0001}\nagents:\n  defaults:\n    model: {primary: o/m}\nnotices: {users: some}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check", "--config", path}, nil, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{
		path + ":5: auth.profiles.x:main.provider: unknown provider \"x\"",
		path + ":9: notices.users: bad value",
		"2 problem(s)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "CANARY") {
		t.Errorf("secret in errors (P4): %s", stderr.String())
	}
	if code := dispatch(context.Background(), []string{"check", "--config", filepath.Join(t.TempDir(), "none.yaml")}, nil, &stdout, &stderr); code != 2 {
		t.Errorf("absent file: exit %d", code)
	}
}

// TestCheck_DemoAndExample checks the embedded demo and config.example.yaml.
func TestCheck_DemoAndExample(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("demo check: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "config (embedded demo config): ok") ||
		!strings.Contains(stdout.String(), "default: demo/primary -> backup/fallback-1 -> backup/fallback-2") {
		t.Errorf("demo check output:\n%s", stdout.String())
	}
	example := filepath.Join(wd, "..", "..", "config.example.yaml")
	if _, err := os.Stat(example); err != nil {
		t.Skip("config.example.yaml not present")
	}
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_API_KEY_BACKUP", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"} {
		t.Setenv(k, "sk-CANARY-"+k)
	}
	stdout.Reset()
	if code := dispatch(context.Background(), []string{"check", "--config", example}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("example check: exit %d: %s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "CANARY") {
		t.Errorf("check printed a secret (P4):\n%s", stdout.String())
	}
}

// covers T8: credentials inside a base_url never show in bot check.
func TestCheck_T8_CredentialsInURLsRedacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	src := "channels: {console: {format: jsonl}}\nproviders:\n  p: {base_url: \"https://user:CANARY-pass@proxy.example/v1\"}\nagents: {defaults: {model: {primary: p/m}}}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check", "--config", path}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, "CANARY") || !strings.Contains(out, "https://[redacted]@proxy.example/v1") {
		t.Fatalf("check output:\n%s", out)
	}
}

// TestCheck_T8_PostgresPasswordHidden: bot check shows a Postgres DSN without
// its password, in URL and keyword form.
// covers T8, M1
func TestCheck_T8_PostgresPasswordHidden(t *testing.T) {
	for _, dsn := range []string{
		"postgres://detour:pw-CANARY-1@127.0.0.1:5432/detour?sslmode=disable",
		"host=127.0.0.1 dbname=detour user=detour password=pw-CANARY-2",
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		src := "storage: {driver: postgres, dsn: \"" + dsn + "\"}\nproviders:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), []string{"check", "--config", path}, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		out := stdout.String()
		if strings.Contains(out+stderr.String(), "CANARY") || !strings.Contains(out, "storage: postgres ") || !strings.Contains(out, "[redacted]") {
			t.Errorf("check output for %q:\n%s", dsn, out)
		}
	}
}

// covers F1, F2: check fails where run would not start (no channel enabled:
// run exits 2, so does check), and a dollar cap without prices is a doubt
// whose words say it is inert; with prices, the cap is printed as acting.
func TestCheck_F1_F2_WhatRunWouldRefuseOrIgnore(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "")
	data, _ := os.ReadFile(path)
	_ = os.WriteFile(path, bytes.Replace(data, []byte("enabled: true, format: jsonl"), []byte("enabled: false"), 1), 0o600)
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check", "--config", path}, nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("no channel: check exit %d, want %d (run exits %d)", code, exitUsage, exitUsage)
	}
	line := 1 + bytes.Count(data[:bytes.Index(data, []byte("\nchannels:"))+1], []byte("\n"))
	if want := fmt.Sprintf("%s:%d: channels: no channel is enabled: enable channels.console, channels.slack or channels.discord\n", path, line); !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("no channel: stderr %q, want %q", stderr.String(), want)
	}

	capped := testConfig(t, srv, "    budget: {max_turn_cost_usd: 0.5}\n")
	stdout.Reset()
	stderr.Reset()
	if code := dispatch(context.Background(), []string{"check", "--config", capped}, nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("an inert cap: exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), "agents.defaults.budget.max_turn_cost_usd: the cap of $0.5 per turn can never act: no model has a price") {
		t.Errorf("an inert cap is not named:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "max $0.5 per turn") {
		t.Errorf("check shows an inert cap as if it acted:\n%s", stdout.String())
	}
	// bot run starts, and says the same as a warning.
	priced := testConfig(t, srv, "    budget: {max_turn_cost_usd: 0.5}\nmodels:\n  p1/primary: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}\n  p2/fallback-1: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}\n  p2/fallback-2: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}\n")
	stdout.Reset()
	if code := dispatch(context.Background(), []string{"check", "--config", priced}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("priced: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "budget: 8 paid attempts per turn, max $0.5 per turn, 120 paid attempts per minute overall") {
		t.Errorf("a priced cap is not shown:\n%s", stdout.String())
	}
}
