package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// run36 runs one subcommand in this process and returns its exit code,
// stdout and stderr.
func run36(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errw syncbuf.Buffer
	code := dispatch(context.Background(), args, strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

// serviceLayout writes the documented service layout beside the database a
// bot run filled: a configuration whose storage comes from the env file and
// whose provider key and Slack tokens are variables set nowhere.
func serviceLayout(t *testing.T, db string, envLines ...string) (cfg, env string) {
	t.Helper()
	dir := t.TempDir()
	cfg = filepath.Join(dir, "config.yaml")
	const yaml = `storage: {driver: sqlite, dsn: "${DETOUR36_DB_FILE}"}
channels:
  console: {enabled: false}
  slack: {enabled: true, app_token: "${DETOUR36_SLACK_APP}", bot_token: "${DETOUR36_SLACK_BOT}"}
providers:
  p1: {base_url: "https://${DETOUR36_P1_HOST}/v1"}
  p2: {base_url: "${DETOUR36_P2_URL}"}
auth:
  profiles:
    p1:main: {provider: p1, key: "${DETOUR36_P1_KEY}"}
    p2:main: {provider: p2, key: "${DETOUR36_P2_KEY}"}
agents:
  defaults:
    model: {primary: p1/primary, fallbacks: [p2/fallback-1]}
admin: {users: ["slack:U0ADMIN1"]}
`
	env = filepath.Join(dir, "detour.env")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte(strings.Join(envLines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, env
}

// issue 36: `bot history --config X --env-file Y` reads the database with every
// API key and channel token absent: only storage.dsn must resolve (here from
// the env file). bot check still demands the keys; a storage.dsn that needs an
// unset variable is named; a missing --env-file is an error, as for run.
func TestHistory_Issue36_EnvFileWithoutProviderKeys(t *testing.T) {
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeServer500})
	path := testConfig(t, srv, "")
	if code, _, errOut := run36(t, `{"session": "s1", "text": "hello"}`+"\n", "--config", path); code != exitOK {
		t.Fatalf("bot: exit %d\n%s", code, errOut)
	}
	db := filepath.Join(filepath.Dir(path), "bot.db")
	cfg, env := serviceLayout(t, db, "DETOUR36_DB_FILE="+db)

	code, out, errOut := run36(t, "", "history", "--config", cfg, "--env-file", env)
	if code != exitOK || !strings.Contains(squeeze(out), "p1/primary p1:main server_error (HTTP 500)") {
		t.Fatalf("history with the keys absent: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, standIn) {
		t.Errorf("a placeholder showed:\n%s%s", out, errOut)
	}
	// The same files for bot check: the keys are needed there.
	if code, _, errOut := run36(t, "", "check", "--config", cfg, "--env-file", env); code != exitUsage || !strings.Contains(errOut, "environment variable DETOUR36_SLACK_APP is not set") {
		t.Errorf("check with the tokens absent: exit %d (want 2, naming DETOUR36_SLACK_APP)\n%s", code, errOut)
	}
	// storage.dsn itself needs its variable.
	cfg2, env2 := serviceLayout(t, db, "# no database here")
	code, _, errOut = run36(t, "", "history", "--config", cfg2, "--env-file", env2)
	if want := "config.yaml:1: storage.dsn: environment variable DETOUR36_DB_FILE is not set"; code != exitUsage || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 2 {
		t.Errorf("history without the database's variable: exit %d %q, want 2 and only %q", code, errOut, want)
	}
	code, _, errOut = run36(t, "", "history", "--config", cfg, "--env-file", filepath.Join(t.TempDir(), "missing.env"))
	if code != exitUsage || !strings.Contains(errOut, "--env-file") {
		t.Errorf("a missing --env-file: exit %d %q", code, errOut)
	}
}

// issue 36: ${X:-default} still gives its default to bot history (a stand-in
// never replaces a default the file states), and storage.dsn's variables get
// no stand-in.
func TestHistory_Issue36_DefaultsStay(t *testing.T) {
	s := newStandIns([]byte("a: ${A:-x}\nb: \"https://${B}/v1\"\nc: ${C}\nstorage: {dsn: ${E}}\n"), func(string) (string, bool) { return "", false })
	if v, ok := s.getenv("A"); ok || v != "" {
		t.Errorf("A with a default: %q %v, want unset so that the default applies", v, ok)
	}
	b, _ := s.getenv("B")
	c, _ := s.getenv("C")
	if !strings.HasPrefix(b, standIn) || strings.Contains(b, "/") || !strings.HasPrefix(c, "http://"+standIn) {
		t.Errorf("stand-ins: part %q, whole %q", b, c)
	}
	if v, ok := s.getenv("E"); ok {
		t.Errorf("a variable of storage.dsn got stand-in %q; it must stay unset so that config names it", v)
	}
	if got := s.in("postgres://u:" + b + "@h/db"); len(got) != 1 || got[0] != "B" {
		t.Errorf("in() = %v, want [B]", got)
	}
}

// issue 36: bot drill takes --env-file and the same configuration lookup as
// run, and needs none of the keys (a drill sends dummy ones to its fake).
func TestDrill_Issue36_EnvFileWithoutKeys(t *testing.T) {
	cfg, env := serviceLayout(t, "unused.db")
	code, out, errOut := run36(t, "", "drill", "--config", cfg, "--env-file", env, "--fast", "--scenario", "no-fault")
	if code != exitOK || !strings.Contains(out, "no-fault") {
		t.Fatalf("drill with the keys absent: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := run36(t, "", "drill", "--config", cfg, "--env-file", filepath.Join(t.TempDir(), "missing.env"), "--list=false", "--scenario", "no-fault"); code != exitUsage || !strings.Contains(errOut, "--env-file") {
		t.Errorf("drill with a missing --env-file: exit %d %q", code, errOut)
	}
}

// issue 36: --log-file logs/x.log in a folder without logs/ makes the folder.
func TestRun_Issue36_LogFileMakesItsFolder(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "")
	logFile := filepath.Join(t.TempDir(), "logs", "deep", "x.log")
	code, _, errOut := run36(t, "", "--config", path, "--log-file", logFile, "--log-level", "info")
	if code != exitOK {
		t.Fatalf("run --log-file in a missing folder: exit %d\n%s", code, errOut)
	}
	b, err := os.ReadFile(logFile)
	if err != nil || !strings.Contains(string(b), "msg=") {
		t.Fatalf("the log file: %v\n%s", err, b)
	}
	if fi, err := os.Stat(filepath.Dir(logFile)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the log folder: %v %v, want 0700", fi.Mode().Perm(), err)
	}
}
