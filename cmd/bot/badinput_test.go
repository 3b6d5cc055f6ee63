package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// badInputConfig writes a configuration whose one key comes from ${P1_KEY},
// in a folder of its own, and returns its path.
func badInputConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := "storage: {driver: sqlite, dsn: " + filepath.Join(dir, "bot.db") + "}\n" +
		"providers:\n  p1: {base_url: \"https://llm.example.com/v1\"}\n" +
		"auth:\n  profiles:\n    p1:main: {provider: p1, key: \"${P1_KEY}\"}\n" +
		"agents:\n  defaults:\n    model: {primary: p1/m}\n"
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad input on the command line: each is refused with exit 2 and a line that
// names the file, the line or the flag, and never prints a key. covers P4
func TestBadInput_EnvFile(t *testing.T) {
	cfg := badInputConfig(t)
	dir := filepath.Dir(cfg)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := write("open.env", "OTHER=1\nP1_KEY=\"sk-CANARY-audit-0001\n")
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"an env file that is a folder", []string{"--env-file", dir},
			[]string{"--env-file: " + dir + " is a folder: want a file of KEY=value lines"}, []string{"chmod"}},
		{"a quote never closed", []string{"--env-file", open},
			[]string{open + ":2: the value of P1_KEY opens a quote (\") that the line does not close"}, nil},
	} {
		for _, cmd := range []string{"check", "run", "history", "status"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				args := append([]string{cmd, "--config", cfg}, tc.args...)
				code := dispatch(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
				out := stdout.String() + stderr.String()
				if code != exitUsage {
					t.Errorf("exit %d, want %d:\n%s", code, exitUsage, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
				for _, w := range append(tc.notWant, "CANARY", "panic") {
					if strings.Contains(out, w) {
						t.Errorf("output holds %q:\n%s", w, out)
					}
				}
			})
		}
	}
}

// Right after `bot init` with a key "to fill in later" (the env file says
// KEY=), `bot status` and `bot history` read the database: they need no key,
// empty or unset. covers issue 36, issue 38
func TestStatusHistory_Issue38_EmptyKeyInTheEnvFile(t *testing.T) {
	cfg := badInputConfig(t)
	dir := filepath.Dir(cfg)
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// as bot init writes a key left for later
	src = []byte(strings.Replace(string(src), `key: "${P1_KEY}"}`, `key: "${P1_KEY}", optional: true}`, 1))
	if err := os.WriteFile(cfg, src, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("P1_KEY", "sk-CANARY-audit-0002")
	var runOut, runErr syncbuf.Buffer // run's "ready" line may come from a goroutine of its own
	if code := dispatch(context.Background(), []string{"run", "--config", cfg, "--format", "jsonl"}, strings.NewReader(""), &runOut, &runErr); code != exitOK {
		t.Fatalf("run (to make the database): exit %d\n%s", code, runErr.String())
	}
	os.Unsetenv("P1_KEY")
	env := filepath.Join(dir, "detour.env")
	if err := os.WriteFile(env, []byte("P1_KEY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"status", "history"} {
		var out, errOut bytes.Buffer
		if code := dispatch(context.Background(), []string{cmd, "--config", cfg, "--env-file", env}, nil, &out, &errOut); code != exitOK {
			t.Errorf("bot %s: exit %d\n%s", cmd, code, errOut.String())
		}
	}
}

// A config.yml beside no config.yaml is not read: bot run says so before the
// demo starts, as bot check does (the README's "The demo starts instead of my
// configuration"). covers F15
func TestRun_MisnamedConfigIsSaid(t *testing.T) {
	bin := builtBot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte("agents: {defaults: {model: {primary: o/m}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runIn(t, bin, dir, "", cleanEnv())
	if code != exitOK || !strings.Contains(errOut, "warning: config.yml: is not read: without --config the bot reads config.yaml only") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}
