//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// Canary secrets: they must never show up in the DB, logs, notices or replies (P4).
var canaryKeys = map[string]string{
	"p1:main": "sk-CANARY-p1main-0123456789abcdef",
	"p2:main": "sk-CANARY-p2main-0123456789abcdef",
	"p3:main": "sk-CANARY-p3main-0123456789abcdef",
}

const (
	mPrimary  = "p1/alpha"
	mFallback = "p2/beta"
	mThird    = "p3/gamma"
)

var t0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// recorder is a test adapter that records every outbound message.
type recorder struct {
	name string
	mu   sync.Mutex
	out  []adapters.Outbound
}

func (r *recorder) Name() string                                                 { return r.name }
func (r *recorder) Run(ctx context.Context, inbox chan<- adapters.Inbound) error { return nil }
func (r *recorder) Send(ctx context.Context, o adapters.Outbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out = append(r.out, o)
	return nil
}

// take returns and forgets everything recorded so far.
func (r *recorder) take() []adapters.Outbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.out
	r.out = nil
	return o
}

func (r *recorder) all() []adapters.Outbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]adapters.Outbound(nil), r.out...)
}

// inflight wraps the fake LLM's handler to count calls that have started (the
// fake logs a call only when it ends).
type inflight struct {
	h       http.Handler
	started sync.Map // path -> *atomic.Int64
}

func (f *inflight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, _ := f.started.LoadOrStore(r.URL.Path, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	f.h.ServeHTTP(w, r)
}

func (f *inflight) count(provider string) int64 {
	v, ok := f.started.Load("/" + provider + "/v1/chat/completions")
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

type harness struct {
	t      testing.TB
	fake   *fakeprovider.Server
	url    string
	calls  *inflight
	clock  *failovertest.Clock
	db     *gorm.DB
	states *store.StateStore
	engine *failover.Engine
	r      *Router
	rec    *recorder
	admin  *recorder
	logs   *syncbuf.Buffer
	driver string // testdb.SQLite or testdb.Postgres
	dsn    string
	cfg    Config // as opened
	idle   time.Duration
	// logLevel of the captured log (Debug by default, so the canary test sees everything).
	logLevel slog.Level
	// clients replaces the real llm clients (in-process fake LLM) when set.
	clients func(provider, profile string) (LLM, error)
	// extra are more channels the router posts to (a test channel with
	// optional capabilities).
	extra []adapters.Adapter
	// routerClock, when set, is the router's clock (the engine keeps clock):
	// a test that must act while a turn waits wraps clock with it.
	routerClock failover.Clock
}

type harnessOpt func(*Config, *harness)

// serveFake starts fakeprovider behind the in-flight counter on 127.0.0.1.
func serveFake(t testing.TB, now func() time.Time) (*fakeprovider.Server, string, *inflight) {
	t.Helper()
	fake := fakeprovider.New(fakeprovider.WithNow(now))
	calls := &inflight{h: fake.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: calls}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		fake.Close()
		_ = srv.Close()
	})
	return fake, "http://" + ln.Addr().String(), calls
}

func baseConfig() Config {
	return Config{
		Primary:   mPrimary,
		Fallbacks: []failover.ModelRef{mFallback, mThird},
		Profiles: map[string][]failover.Profile{
			"p1": {{ID: "p1:main", Provider: "p1", Type: failover.ProfileAPIKey}},
			"p2": {{ID: "p2:main", Provider: "p2", Type: failover.ProfileAPIKey}},
			"p3": {{ID: "p3:main", Provider: "p3", Type: failover.ProfileAPIKey}},
		},
		Providers:        []string{"p1", "p2", "p3"},
		Notices:          "all",
		AdminChannel:     "console",
		AdminUsers:       []string{"test:admin"},
		ProbeInterval:    5 * time.Minute,
		MaxMessageBytes:  65536,
		Files:            FileLimits{MaxBytes: 5 << 20, MaxFiles: 4, MaxTextBytes: 32 << 10},
		SummaryMaxTokens: 400,
	}
}

// newHarness builds a router on a fresh database of driver (testdb.Each runs
// each test on every driver).
func newHarness(t *testing.T, driver string, opts ...harnessOpt) *harness {
	return newHarnessTB(t, driver, opts...)
}

// newBenchHarness builds a harness on the in-process LLM for benchmarks.
func newBenchHarness(b *testing.B, driver string) *harness {
	return newHarnessTB(b, driver, withMem(map[string]*memLLM{}), func(_ *Config, h *harness) { h.logLevel = slog.LevelWarn })
}

func newHarnessTB(t testing.TB, driver string, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, clock: failovertest.NewClock(t0), rec: &recorder{name: "test"}, admin: &recorder{name: "console"},
		logs: &syncbuf.Buffer{}, idle: 2 * time.Second, logLevel: slog.LevelDebug}
	h.fake, h.url, h.calls = serveFake(t, h.clock.Now)
	cfg := baseConfig()
	h.driver, h.dsn = driver, testdb.DSN(t, driver)
	for _, o := range opts {
		o(&cfg, h)
	}
	h.open(cfg)
	return h
}

// open (re)opens the database and builds a router on it.
func (h *harness) open(cfg Config) {
	t := h.t
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: h.logLevel}))
	db, err := database.Open(context.Background(), h.driver, h.dsn, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = database.Close(db) })
	h.db, h.cfg = db, cfg
	h.states, err = store.NewStateStore(db)
	if err != nil {
		t.Fatal(err)
	}
	pol := failover.DefaultPolicy()
	pol.Jitter = 0
	h.engine = &failover.Engine{Store: h.states, Clock: h.clock, Policy: pol, Log: log}
	clients := h.clients
	if clients == nil {
		clients = h.clientsFunc(log)
	}
	var clock failover.Clock = h.clock
	if h.routerClock != nil {
		clock = h.routerClock
	}
	h.r, err = NewRouter(cfg, Options{DB: db, Engine: h.engine, Clock: clock, Clients: clients, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	h.r.AddAdapter(h.rec)
	h.r.AddAdapter(h.admin)
	for _, a := range h.extra {
		h.r.AddAdapter(a)
	}
	t.Cleanup(h.r.Close)
}

// replica starts another router on h's database, as another process would:
// its own handle, state store, engine and adapters, the same fake provider,
// clock and configuration (M2).
func (h *harness) replica() *harness {
	h.t.Helper()
	r := &harness{t: h.t, fake: h.fake, url: h.url, calls: h.calls, clock: h.clock,
		rec: &recorder{name: "test"}, admin: &recorder{name: "console"}, logs: h.logs,
		driver: h.driver, dsn: h.dsn, idle: h.idle, logLevel: h.logLevel, clients: h.clients, extra: h.extra}
	r.open(h.cfg)
	return r
}

func (h *harness) clientsFunc(log *slog.Logger) func(provider, profile string) (LLM, error) {
	var mu sync.Mutex
	cache := map[string]*llm.Client{}
	return func(provider, profile string) (LLM, error) {
		mu.Lock()
		defer mu.Unlock()
		k := provider + "\x00" + profile
		if c, ok := cache[k]; ok {
			return c, nil
		}
		c, err := llm.New(llm.Config{Provider: provider, BaseURL: h.url + "/" + provider + "/v1", ProfileID: profile,
			APIKey: canaryKeys[profile], IdleTimeout: h.idle, Logger: log, Now: h.clock.Now})
		if err != nil {
			return nil, err
		}
		cache[k] = c
		return c, nil
	}
}

// say sends text in session key and waits until the turn is done.
func (h *harness) say(key, text string) []adapters.Outbound {
	h.t.Helper()
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key, User: "test:u1", Text: text, ReplyTo: "thread-" + key})
	return h.rec.take()
}

func (h *harness) sayAs(in adapters.Inbound) {
	h.t.Helper()
	h.r.Handle(context.Background(), in)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.r.Drain(ctx); err != nil {
		h.t.Fatalf("drain: %v", err)
	}
}

func (h *harness) entry(key string) Entry {
	h.t.Helper()
	var e Entry
	if err := h.db.Where("key = ?", key).Take(&e).Error; err != nil {
		h.t.Fatalf("load entry %s: %v", key, err)
	}
	return e
}

func (h *harness) history(key string) []Message {
	h.t.Helper()
	var m []Message
	if err := h.db.Where("session_key = ?", key).Order("id").Find(&m).Error; err != nil {
		h.t.Fatal(err)
	}
	return m
}

func kinds(out []adapters.Outbound) string {
	var s []string
	for _, o := range out {
		s = append(s, string(o.Kind))
	}
	return strings.Join(s, ",")
}

func dump(out []adapters.Outbound) string {
	var b strings.Builder
	for _, o := range out {
		fmt.Fprintf(&b, "  [%s model=%s] %s\n", o.Kind, o.Model, o.Text)
	}
	return b.String()
}

// expect checks the kinds of out and returns it.
func expect(t *testing.T, out []adapters.Outbound, want string) []adapters.Outbound {
	t.Helper()
	if got := kinds(out); got != want {
		t.Fatalf("outbound kinds = %q, want %q:\n%s", got, want, dump(out))
	}
	return out
}

// memLLM is an in-process LLM (sessions.LLM) that records requests; fail, when
// set, decides per request whether to fail. It stands in for the network only in
// tests that inspect prompts or measure the router's own overhead.
type memLLM struct {
	provider string
	mu       sync.Mutex
	reqs     []llm.Request
	fail     func(req llm.Request) error
	reply    func(req llm.Request) string // the answer's text; nil = an echo of the last message
}

func (m *memLLM) Chat(ctx context.Context, req llm.Request, onDelta func(string)) (failover.Output, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	fail, answer := m.fail, m.reply
	m.mu.Unlock()
	if fail != nil {
		if err := fail(req); err != nil {
			return failover.Output{}, err
		}
	}
	text := "[" + m.provider + "/" + req.Model + "] you said: " + req.Messages[len(req.Messages)-1].Content
	if answer != nil {
		text = answer(req)
	}
	return failover.Output{Text: text, FinishReason: "stop", Progress: true, InputTokens: 10, OutputTokens: 5}, nil
}

func (m *memLLM) Check(ctx context.Context, model string) (failover.Output, error) {
	return failover.Output{}, nil
}

func (m *memLLM) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

// withMem makes the harness use one in-process LLM per provider.
func withMem(mem map[string]*memLLM) harnessOpt {
	return func(_ *Config, h *harness) {
		for _, p := range []string{"p1", "p2", "p3"} {
			if mem[p] == nil {
				mem[p] = &memLLM{provider: p}
			}
		}
		h.clients = func(provider, profile string) (LLM, error) {
			if m := mem[provider]; m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("no provider %s", provider)
		}
	}
}
