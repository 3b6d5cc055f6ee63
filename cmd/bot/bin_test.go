package main

// The tests that run the bot as a process run this test binary itself: linked
// under the name "bot", it is the bot (TestMain calls realMain), so no test
// runs `go build` and none depends on the build cache, on VCS stamping or on
// `go env` (issue 36: one test spent 9 min 56 s in its own go build on a busy
// machine with an empty cache, under go test's 10-minute timeout).

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// botName is the name under which the test binary acts as the bot.
const botName = "bot"

// versionDirPrefix: a bot linked in a folder named "version-v1.2.3" carries
// that version, as a release build with -ldflags "-X main.version=v1.2.3" does.
const versionDirPrefix = "version-"

// botBin holds the links to this test binary, made once per package run.
var botBin struct {
	mu    sync.Mutex
	dir   string
	links map[string]string // version ("" = none) -> path
}

// asBot reports whether this process was started as the bot, and sets the
// version its folder names.
func asBot() bool {
	if filepath.Base(os.Args[0]) != botName {
		return false
	}
	if v, ok := strings.CutPrefix(filepath.Base(filepath.Dir(os.Args[0])), versionDirPrefix); ok {
		version = v
	}
	return true
}

// builtBot returns the path of the bot: this test binary, linked as "bot".
func builtBot(t testing.TB) string { return versionedBot(t, "") }

// versionedBot is builtBot with a release version (what -ldflags
// "-X main.version=v" sets).
func versionedBot(t testing.TB, v string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the bot as a process")
	}
	botBin.mu.Lock()
	defer botBin.mu.Unlock()
	if p, ok := botBin.links[v]; ok {
		return p
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if botBin.dir == "" {
		if botBin.dir, err = os.MkdirTemp("", "detour-bot-"); err != nil {
			t.Fatal(err)
		}
		botBin.links = map[string]string{}
	}
	dir := filepath.Join(botBin.dir, "plain")
	if v != "" {
		dir = filepath.Join(botBin.dir, versionDirPrefix+v)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, botName)
	if err := os.Symlink(self, p); err != nil {
		t.Fatal(err)
	}
	botBin.links[v] = p
	return p
}

// buildBot is builtBot for the tests that expect an error beside the path.
func buildBot(t *testing.T) (string, error) { return builtBot(t), nil }

func TestMain(m *testing.M) {
	if asBot() {
		os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(floodAddrEnv) != "" {
		os.Exit(floodChild()) // a child of BenchmarkOpsFlood: hold its connections, report, exit
	}
	code := m.Run()
	if botBin.dir != "" {
		_ = os.RemoveAll(botBin.dir)
	}
	os.Exit(code)
}
