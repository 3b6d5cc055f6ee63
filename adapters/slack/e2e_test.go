package slack

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/sessions"
)

var e2eKeys = map[string]string{
	"p1:main": "sk-CANARY-p1main-e2e-000000",
	"p2:main": "sk-CANARY-p2main-e2e-000000",
	"p3:main": "sk-CANARY-p3main-e2e-000000",
}

// e2e wires the real slack-go Socket Mode client (through the adapter) against
// fakeslack, and the real router, failover engine, SQLite store and llm client against
// fakeprovider.
type e2e struct {
	t      *testing.T
	slack  *fakeslack.Server
	llm    *fakeprovider.Server
	clock  *failovertest.Clock
	router *sessions.Router
	db     *gorm.DB
	a      *Adapter
	logs   *syncBuffer
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	sleeps []time.Duration
}

func startE2E(t *testing.T) *e2e {
	t.Helper()
	e := &e2e{t: t, logs: &syncBuffer{}, clock: failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	e.llm = fakeprovider.New(fakeprovider.WithNow(e.clock.Now))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: e.llm.Handler()}
	go func() { _ = hs.Serve(ln) }()
	llmURL := "http://" + ln.Addr().String()

	e.slack = fakeslack.New()
	e.slack.AppToken, e.slack.BotToken = canaryApp, canaryBot
	e.slack.EchoPosts = true // Slack echoes the bot's own posts; they must be ignored
	e.slack.Start()

	db, err := store.Open(context.Background(), t.TempDir()+"/detour.db", log)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	states, err := store.NewStateStore(db)
	if err != nil {
		t.Fatal(err)
	}
	pol := failover.DefaultPolicy()
	pol.Jitter = 0
	engine := &failover.Engine{Store: states, Clock: e.clock, Policy: pol, Log: log}
	var cmu sync.Mutex
	cache := map[string]*llm.Client{}
	clients := func(provider, profile string) (sessions.LLM, error) {
		cmu.Lock()
		defer cmu.Unlock()
		if c, ok := cache[provider+"/"+profile]; ok {
			return c, nil
		}
		c, err := llm.New(llm.Config{Provider: provider, BaseURL: llmURL + "/" + provider + "/v1", ProfileID: profile,
			APIKey: e2eKeys[profile], IdleTimeout: 2 * time.Second, Logger: log})
		if err != nil {
			return nil, err
		}
		cache[provider+"/"+profile] = c
		return c, nil
	}
	cfg := sessions.Config{
		Primary:   "p1/alpha",
		Fallbacks: []failover.ModelRef{"p2/beta", "p3/gamma"},
		Profiles: map[string][]failover.Profile{
			"p1": {{ID: "p1:main", Provider: "p1", Type: failover.ProfileAPIKey}},
			"p2": {{ID: "p2:main", Provider: "p2", Type: failover.ProfileAPIKey}},
			"p3": {{ID: "p3:main", Provider: "p3", Type: failover.ProfileAPIKey}},
		},
		Providers:       []string{"p1", "p2", "p3"},
		Notices:         "all",
		AdminChannel:    "slack:C0ADMIN",
		ProbeInterval:   5 * time.Minute,
		MaxMessageBytes: 65536,
	}
	e.router, err = sessions.NewRouter(cfg, sessions.Options{DB: db, Engine: engine, Clock: e.clock, Clients: clients, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	e.a, err = New(Config{
		AppToken: canaryApp, BotToken: canaryBot, APIURL: e.slack.URL(), HTTPTimeout: 3 * time.Second,
		PingInterval: 2 * time.Second, Log: log,
		Sleep: func(ctx context.Context, d time.Duration) error {
			e.mu.Lock()
			e.sleeps = append(e.sleeps, d)
			e.mu.Unlock()
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.router.AddAdapter(e.a)

	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	inbox := make(chan adapters.Inbound, 16)
	e.wg.Go(func() {
		if err := e.a.Run(ctx, inbox); err != nil {
			t.Errorf("adapter Run: %v", err)
		}
	})
	e.wg.Go(func() { _ = e.router.Run(ctx, inbox) })
	t.Cleanup(func() {
		cancel()
		e.wg.Wait()
		e.router.Close()
		dctx, dcancel := context.WithTimeout(context.Background(), wait)
		defer dcancel()
		_ = e.router.Drain(dctx)
		e.slack.Close()
		e.llm.Close()
		_ = hs.Close()
		_ = store.Close(db)
		if strings.Contains(e.logs.String(), "CANARY") {
			t.Error("P4: a secret reached the logs")
		}
		for _, p := range e.slack.Posts() {
			if strings.Contains(p.Text+string(p.Blocks), "CANARY") {
				t.Errorf("P4: a secret reached Slack: %+v", p)
			}
		}
	})
	if err := e.slack.WaitConnected(1, wait); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *e2e) thread(channel, ts string) []fakeslack.Post { return e.slack.Thread(channel, ts) }

// waitThread waits until channel/thread has n posts, then until the router is idle,
// and returns the thread's posts.
func (e *e2e) waitThread(channel, ts string, n int) []fakeslack.Post {
	e.t.Helper()
	ps, err := e.slack.WaitThread(channel, ts, n, wait)
	if err != nil {
		e.t.Fatalf("%v:%s", err, describe(ps))
	}
	e.drain()
	return e.thread(channel, ts)
}

func (e *e2e) drain() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.router.Drain(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) entry(key string) sessions.Entry {
	e.t.Helper()
	var got sessions.Entry
	if err := e.db.Where("key = ?", key).Take(&got).Error; err != nil {
		e.t.Fatalf("entry %s: %v", key, err)
	}
	return got
}

func describe(ps []fakeslack.Post) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n  [" + p.Method + " " + p.Channel + " " + p.ThreadTS + " blocks=" + string(p.Blocks) + "] " + p.Text)
	}
	return b.String()
}

func countText(ps []fakeslack.Post, sub string) int {
	n := 0
	for _, p := range ps {
		if strings.Contains(p.Text, sub) {
			n++
		}
	}
	return n
}

func isNotice(p fakeslack.Post) bool {
	return strings.Contains(string(p.Blocks), `"context"`) && strings.HasPrefix(p.Text, "↪️")
}

// covers N1, N3, N4, N5, S3, S4, V4 through Slack
func TestE2E_SlackThreadFallbackCommandsAndReliability(t *testing.T) {
	e := startE2E(t)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeInsufficientQuota})

	// 1. Mention: answered in the mention's thread; the fallback notice is its own
	//    (context block) message, posted before the reply (N1, N4).
	m := e.slack.Mention("C1", "U1", "hello there", "")
	ps := e.waitThread("C1", m.TS, 2)
	if len(ps) != 2 || !isNotice(ps[0]) || !strings.Contains(ps[0].Text, "model fallback: p2/beta") ||
		!strings.Contains(ps[0].Text, "p1/alpha") {
		t.Fatalf("turn 1: want notice then reply:%s", describe(ps))
	}
	if isNotice(ps[1]) || !strings.Contains(ps[1].Text, "hello there") {
		t.Fatalf("turn 1 reply:%s", describe(ps))
	}

	// 2. Follow-up in the thread without a mention: answered, no second notice (N3).
	e.slack.ThreadMessage("C1", "U2", "and a follow-up", m.TS)
	ps = e.waitThread("C1", m.TS, 3)
	if len(ps) != 3 || isNotice(ps[2]) || !strings.Contains(ps[2].Text, "and a follow-up") {
		t.Fatalf("turn 2:%s", describe(ps))
	}

	// 3. "!status" in the thread shows the active fallback (N5).
	e.slack.ThreadMessage("C1", "U1", "!status", m.TS)
	ps = e.waitThread("C1", m.TS, 4)
	if !strings.Contains(ps[3].Text, "active fallback: p2/beta") {
		t.Fatalf("!status:%s", describe(ps))
	}

	// 4. /model as a native slash command applies to the channel's session and is
	//    answered ephemerally; "!model" in the thread applies to the thread (S4).
	s := e.slack.Slash("/model", "p3/gamma", "C1", "U1")
	if _, err := e.slack.WaitAck(s.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	eph, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral })
	if err != nil {
		t.Fatal(err)
	}
	if eph.Channel != "C1" || eph.User != "U1" || !strings.Contains(eph.Text, "p3/gamma") {
		t.Fatalf("slash answer = %+v", eph)
	}
	e.drain()
	threadKey := "slack:T1:C1:" + m.TS
	if ch := e.entry("slack:T1:C1"); ch.ModelOverride != "gamma" || ch.ModelOverrideSource != "user" {
		t.Fatalf("/model did not set the channel session: %+v", ch)
	}
	if th := e.entry(threadKey); th.ModelOverride != "beta" || th.ModelOverrideSource != "auto" {
		t.Fatalf("/model leaked into the thread session: %+v", th)
	}
	e.slack.ThreadMessage("C1", "U1", "!model p3/gamma", m.TS)
	ps = e.waitThread("C1", m.TS, 5)
	if !strings.Contains(ps[4].Text, "p3/gamma") || ps[4].Ephemeral {
		t.Fatalf("!model answer:%s", describe(ps))
	}
	if th := e.entry(threadKey); th.ModelOverride != "gamma" || th.ModelOverrideSource != "user" {
		t.Fatalf("!model did not set the thread session: %+v", th)
	}
	e.slack.Mention("C1", "U1", "/model p2/beta", m.TS) // "@bot /model x" form
	ps = e.waitThread("C1", m.TS, 6)
	if th := e.entry(threadKey); th.ModelOverride != "beta" || th.ModelOverrideSource != "user" {
		t.Fatalf("@bot /model did not set the thread session: %+v%s", th, describe(ps))
	}

	// 5. A redelivered event is answered once.
	m2 := e.slack.Mention("C2", "U1", "only once", "")
	e.waitThread("C2", m2.TS, 1)
	re, err := e.slack.Redeliver(m2.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(re.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	m3 := e.slack.Mention("C3", "U1", "marker", "") // processed after the redelivery
	e.waitThread("C3", m3.TS, 1)
	if ps := e.thread("C2", m2.TS); countText(ps, "only once") != 1 || len(ps) != 2 {
		t.Fatalf("redelivered event answered more than once (want notice + one reply):%s", describe(ps))
	}

	// 6. Disconnect, reconnect, answered.
	e.slack.Disconnect()
	if err := e.slack.WaitConnected(2, wait); err != nil {
		t.Fatal(err)
	}
	m4 := e.slack.Mention("C4", "U1", "after reconnect", "")
	if ps := e.waitThread("C4", m4.TS, 1); !strings.Contains(ps[len(ps)-1].Text, "after reconnect") {
		t.Fatalf("after reconnect:%s", describe(ps))
	}

	// 7. chat.postMessage answers 429: retried after Retry-After, delivered once.
	calls := e.slack.Calls("chat.postMessage")
	e.slack.RateLimitNext("chat.postMessage", 2)
	m5 := e.slack.Mention("C5", "U1", "despite the rate limit", "")
	ps = e.waitThread("C5", m5.TS, 1)
	if replies := countText(ps, "despite the rate limit"); replies != 1 {
		t.Fatalf("reply delivered %d times:%s", replies, describe(ps))
	}
	if got := e.slack.Calls("chat.postMessage") - calls; got != len(ps)+1 {
		t.Fatalf("chat.postMessage calls = %d for %d posts, want one extra (the 429)", got, len(ps))
	}
	e.mu.Lock()
	sleeps := append([]time.Duration(nil), e.sleeps...)
	e.mu.Unlock()
	if len(sleeps) != 1 || sleeps[0] != 2*time.Second {
		t.Fatalf("rate-limit waits = %v, want [2s]", sleeps)
	}

	// 8. Every model down: the user gets an error in the thread, the admin channel
	//    one report; a second failing turn sends no second report (V4).
	e.llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeBilling402})
	e.llm.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeRevoked403})
	m6 := e.slack.Mention("C6", "U1", "anyone there?", "")
	ps = e.waitThread("C6", m6.TS, 1)
	last := ps[len(ps)-1]
	if isNotice(last) || !strings.Contains(last.Text, "p1/alpha") {
		t.Fatalf("all-down user message:%s", describe(ps))
	}
	e.clock.Advance(time.Minute)
	m7 := e.slack.Mention("C7", "U1", "still down?", "")
	e.waitThread("C7", m7.TS, 1)
	reports := e.thread("C0ADMIN", "")
	if len(reports) != 1 || !strings.Contains(reports[0].Text, "all models unavailable") {
		t.Fatalf("admin reports:%s", describe(reports))
	}
}
