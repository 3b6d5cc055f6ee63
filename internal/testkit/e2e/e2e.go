// Package e2e starts a whole detour for end-to-end tests, through internal/app like
// the bot: a configuration parsed from YAML, the SQLite store, the failover engine,
// real go-openai clients against the fake provider, the router, and the chat
// adapter under test. Time is a fake clock, keys are canaries that the world checks
// never reach the logs.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/sessions"
)

// Wait bounds every wait of an end-to-end test.
const Wait = 10 * time.Second

// T0 is when every world's clock starts.
var T0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// Spec describes the world to start.
type Spec struct {
	// Primary and Fallbacks are model refs ("p1/alpha"); every provider named
	// is served by the fake provider.
	Primary   string
	Fallbacks []string
	// Allow are agents.defaults.model.allow patterns ("p1/*").
	Allow []string
	// Keys maps profile ids ("p1:main") to their (canary) API keys, in the
	// order given by Order when set, else sorted.
	Keys  map[string]string
	Order map[string][]string
	// AdminChannel and AdminUsers fill the admin section.
	AdminChannel string
	AdminUsers   []string
	// Idle is the idle timeout (default 5 s).
	Idle time.Duration
	// APIs gives providers a protocol other than openai ("p1": "anthropic");
	// the fake serves each on its route. An azure provider gets api_version
	// 2024-10-21, and each model is its own deployment.
	APIs map[string]string
	// ExtraYAML is appended to the generated configuration (top-level keys).
	ExtraYAML string
	// Channels adds entries to the channels section, e.g. "slack: {stream: false}".
	Channels string
	// WrapLLM, when set, wraps the fake provider's handler (a benchmark timing
	// what the provider writes).
	WrapLLM func(http.Handler) http.Handler
	// Adapter is the channel under test; Secrets are its own secrets (tokens),
	// checked like the keys.
	Adapter adapters.Adapter
	// Extra are more channels run beside Adapter (a second replica's socket).
	Extra   []adapters.Adapter
	Secrets []string
	// Logs collects the logs (give the adapter Logger(Logs) too); nil = a new one.
	Logs *syncbuf.Buffer
	// Driver is the database driver (testdb.SQLite or testdb.Postgres); each
	// world gets a fresh database. Empty = SQLite, or Postgres inside OnPostgres.
	Driver string
}

// World is one running detour.
type World struct {
	T     testing.TB
	Clock *failovertest.Clock
	LLM   *fakeprovider.Server
	Sys   *app.System
	Logs  *syncbuf.Buffer
}

// Start builds and runs a world; it stops (and checks that no secret reached the
// logs, covering P4) when the test ends.
func Start(t testing.TB, spec Spec) *World {
	t.Helper()
	w := &World{T: t, Clock: failovertest.NewClock(T0), Logs: spec.Logs}
	if w.Logs == nil {
		w.Logs = &syncbuf.Buffer{}
	}
	log := Logger(w.Logs)

	w.LLM = fakeprovider.New(fakeprovider.WithNow(w.Clock.Now))
	h := w.LLM.Handler()
	if spec.WrapLLM != nil {
		h = spec.WrapLLM(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { w.LLM.Close(); srv.Close() })

	driver := spec.Driver
	if driver == "" {
		driver = driverFor(t)
	}
	yaml := spec.yaml(srv.URL, driver, testdb.DSN(t, driver))
	cfg, err := config.Parse("e2e.yaml", []byte(yaml), func(name string) (string, bool) {
		for id, v := range spec.Keys {
			if name == envName(id) {
				return v, true
			}
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("e2e config: %v\n%s", err, yaml)
	}
	w.Sys, err = app.New(context.Background(), cfg, app.Options{
		Log: log, Clock: w.Clock, Adapters: append([]adapters.Adapter{spec.Adapter}, spec.Extra...),
		Policy: func(p *failover.Policy) { p.Jitter = 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- w.Sys.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(Wait):
			t.Error("Serve did not return after cancel")
		}
		dctx, dcancel := context.WithTimeout(context.Background(), Wait)
		defer dcancel()
		if err := w.Sys.Drain(dctx); err != nil {
			t.Errorf("drain: %v", err)
		}
		w.Sys.Close()
		logs := w.Logs.String()
		for _, s := range append(secretsOf(spec.Keys), spec.Secrets...) {
			if s != "" && strings.Contains(logs, s) {
				t.Errorf("P4: a secret reached the logs")
			}
		}
	})
	return w
}

// yaml renders the spec as a configuration file.
func (s Spec) yaml(llmURL, driver, dsn string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "storage: {driver: %s, dsn: %q}\n", driver, dsn)
	channels := "console: {enabled: false}"
	if s.Channels != "" {
		channels += ", " + s.Channels
	}
	fmt.Fprintf(&b, "channels: {%s}\n", channels)
	providers := map[string]bool{}
	for _, ref := range append([]string{s.Primary}, s.Fallbacks...) {
		p, _, _ := strings.Cut(ref, "/")
		providers[p] = true
	}
	ids := make([]string, 0, len(s.Keys))
	for id := range s.Keys {
		ids = append(ids, id)
		p, _, _ := strings.Cut(id, ":")
		providers[p] = true
	}
	sort.Strings(ids)
	b.WriteString("providers:\n")
	for _, p := range sortedKeys(providers) {
		api := s.APIs[p]
		extra := ""
		switch api {
		case "":
			api = "openai"
		case "azure":
			extra = ", api_version: 2024-10-21"
		}
		fmt.Fprintf(&b, "  %s: {api: %s, base_url: %q%s}\n", p, api, llmURL+fakeprovider.RoutePath(p, fakeprovider.API(api)), extra)
	}
	if len(ids) > 0 {
		b.WriteString("auth:\n  profiles:\n")
		for _, id := range ids {
			p, _, _ := strings.Cut(id, ":")
			fmt.Fprintf(&b, "    %s: {provider: %s, type: api_key, key: ${%s}}\n", id, p, envName(id))
		}
		if len(s.Order) > 0 {
			b.WriteString("  order:\n")
			for _, p := range sortedKeys(s.Order) {
				fmt.Fprintf(&b, "    %s: [%s]\n", p, strings.Join(s.Order[p], ", "))
			}
		}
	}
	idle := s.Idle
	if idle == 0 {
		idle = 5 * time.Second
	}
	fmt.Fprintf(&b, "agents:\n  defaults:\n    model: {primary: %s, fallbacks: [%s], allow: [%s]}\n", s.Primary, strings.Join(s.Fallbacks, ", "),
		strings.Join(quoted(s.Allow), ", "))
	fmt.Fprintf(&b, "    timeouts: {idle_seconds: %g}\n", idle.Seconds())
	if s.AdminChannel != "" || len(s.AdminUsers) > 0 {
		fmt.Fprintf(&b, "admin: {channel: %q, users: [%s]}\n", s.AdminChannel, strings.Join(quoted(s.AdminUsers), ", "))
	}
	b.WriteString(s.ExtraYAML)
	return b.String()
}

// Drain waits until every queued turn has finished.
func (w *World) Drain() {
	w.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := w.Sys.Drain(ctx); err != nil {
		w.T.Fatal(err)
	}
}

// Entry reads one session entry from the database.
func (w *World) Entry(key string) sessions.Entry {
	w.T.Helper()
	var got sessions.Entry
	if err := w.Sys.DB.Where("key = ?", key).Take(&got).Error; err != nil {
		w.T.Fatalf("entry %s: %v", key, err)
	}
	return got
}

// SyncBuffer is the log sink of a world (goroutine-safe).
type SyncBuffer = syncbuf.Buffer

// Logger logs everything, as text, into buf.
func Logger(buf *syncbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// envName is the environment variable that holds a profile's key.
func envName(profileID string) string {
	return "KEY_" + strings.NewReplacer(":", "_", "-", "_").Replace(profileID)
}

func secretsOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// postgresRuns holds the names (with a trailing "/") of the tests running
// OnPostgres: a world started by one of their subtests uses Postgres.
var postgresRuns sync.Map

// OnPostgres runs each test again as a subtest of t whose worlds (Spec.Driver
// empty) each get a fresh Postgres database, so a package's end-to-end tests
// also cover M1 without changing them. It skips t, naming testdb.EnvPostgres,
// when no server is configured.
func OnPostgres(t *testing.T, tests ...func(*testing.T)) {
	t.Helper()
	testdb.Require(t, testdb.Postgres)
	prefix := t.Name() + "/"
	postgresRuns.Store(prefix, true)
	t.Cleanup(func() { postgresRuns.Delete(prefix) })
	for _, fn := range tests {
		name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
		t.Run(name[strings.LastIndexByte(name, '.')+1:], fn)
	}
}

// driverFor is the database driver of a world started by t.
func driverFor(t testing.TB) string {
	driver := testdb.SQLite
	postgresRuns.Range(func(k, _ any) bool {
		if strings.HasPrefix(t.Name(), k.(string)) {
			driver = testdb.Postgres
			return false
		}
		return true
	})
	return driver
}

// LastPrompt renders the prompt of the fake provider's last call to model,
// one "role: text" line per message.
func (w *World) LastPrompt(model string) string {
	w.T.Helper()
	calls := w.LLM.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Model == model {
			var b strings.Builder
			for _, m := range calls[i].Messages {
				b.WriteString(m.Role + ": " + m.Text + "\n")
			}
			return b.String()
		}
	}
	w.T.Fatalf("no call to %s", model)
	return ""
}

// ProviderTotals adds up the fake provider's calls and the tokens it reported.
func (w *World) ProviderTotals() (calls, in, out int64) {
	for _, c := range w.LLM.Calls() {
		calls++
		if c.Usage != nil {
			in += int64(c.Usage.PromptTokens)
			out += int64(c.Usage.CompletionTokens)
		}
	}
	return calls, in, out
}

// PNG is a small valid PNG image (2x2 red pixels), for tests that send one.
func PNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for x := range 2 {
		for y := range 2 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}
