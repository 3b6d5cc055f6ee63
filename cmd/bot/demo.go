package main

import (
	_ "embed"
	"fmt"
	"io"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/fakeprovider"
)

//go:embed demo.yaml
var demoYAML []byte

// demoConfigName names the embedded demo configuration in messages.
const demoConfigName = "(embedded demo config)"

// The demo's providers: the primary's, and the fallbacks'.
const (
	demoProvider   = "demo"
	backupProvider = "backup"
)

// demoConfig parses the embedded demo configuration against the fake served at
// root (e.g. http://127.0.0.1:PORT). The process environment is not consulted.
func demoConfig(root string) (*config.Config, error) {
	env := map[string]string{
		"DETOUR_DEMO_BASE_URL":   root + "/" + demoProvider + "/v1",
		"DETOUR_DEMO_BACKUP_URL": root + "/" + backupProvider + "/v1",
		"DETOUR_DEMO_KEY_MAIN":   "demo-key-main",
		"DETOUR_DEMO_KEY_BACKUP": "demo-key-backup",
		"DETOUR_DEMO_KEY_SPARE":  "demo-key-spare",
	}
	return config.Parse(demoConfigName, demoYAML, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
}

// startDemoLLM starts the built-in fake provider on a loopback port.
func startDemoLLM() (*fakeprovider.Server, error) {
	srv := fakeprovider.New(fakeprovider.WithModels(demoProvider, "primary"), fakeprovider.WithModels(backupProvider, "fallback-1", "fallback-2"))
	if err := srv.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return srv, nil
}

// demoBanner tells a newcomer what they are looking at (stderr only).
func demoBanner(w io.Writer, cfg *config.Config, logFile string) {
	logs := "stderr"
	if logFile != "" {
		logs = logFile
	}
	fmt.Fprintf(w, `detour demo: a console chat against a built-in fake provider (no account needed).
  models: demo/primary, falling back to backup/fallback-1 then backup/fallback-2; state in %s, logs in %s
  Type a message and press Enter. Add a marker to make the primary fail:
    hello #fail:rate_limit              429 with Retry-After: rotate key, then fall back
    hello #fail:insufficient_quota      out of credit: the key is parked, fall back at once
    hello #fail:stall_after_first_chunk stream stops mid-answer: idle timeout, then fall back
    hello #fail:server_500              (also: overloaded_529, unauthorized_401, hang_before_headers, ...)
  Markers act on demo/primary only; the answer says so when one did nothing (a
  mistyped mode, or a conversation already on a fallback). Watch for the ↪️ notice. Then:
    /status                             which model answers and why, what is tried next
    /recover demo/primary               probe the primary now and clear its cooldown
    (or wait: the primary is re-tried a minute later and "↪️ model fallback cleared" appears)
    /models                             the models you can choose; /model fast picks backup/fallback-1
    /help                               every command
  Real providers: cp config.example.yaml config.yaml, set your API keys, run again.
  Ctrl-D (end of input) quits.
`, cfg.Storage.DSN, logs)
}
