package slack

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// TestMain checks that every goroutine stops. gorm's statement cache starts a
// janitor goroutine that never ends (a library detail, e2e tests only).
func TestMain(m *testing.M) {
	if os.Getenv(rssChildEnv) != "" {
		os.Exit(rssChild()) // a child of TestI2_DownloadPeakRSS: read one file, report, exit
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"))
}

// Canary secrets: they must never show up in logs or errors (covers P4).
const (
	canaryApp = "xapp-CANARY-app-7f3a9"
	canaryBot = "xoxb-CANARY-bot-51c2e"
)

const wait = 5 * time.Second

type harness struct {
	t      testing.TB
	srv    *fakeslack.Server
	a      *Adapter
	inbox  chan adapters.Inbound
	cancel context.CancelFunc
	done   chan error
	logs   *syncbuf.Buffer
	// clock is the adapter's and the fake's clock: the adapter's waits (pace,
	// Retry-After) advance it at once and are recorded.
	clock *failovertest.Clock
}

// start runs the adapter against a fresh fake Slack; mod may adjust the config.
func start(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	return startWith(t, nil, mod)
}

// startWith is start with a hook to configure the fake before it starts.
func startWith(t testing.TB, fake func(*fakeslack.Server), mod func(*Config)) *harness {
	t.Helper()
	clock := failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	srv := fakeslack.New()
	srv.AppToken, srv.BotToken = canaryApp, canaryBot
	srv.Now = clock.Now
	if fake != nil {
		fake(srv)
	}
	srv.Start()
	h := &harness{t: t, srv: srv, inbox: make(chan adapters.Inbound, 64), done: make(chan error, 1), logs: &syncbuf.Buffer{},
		clock: clock}
	cfg := Config{
		AppToken:     canaryApp,
		BotToken:     canaryBot,
		APIURL:       srv.URL(),
		HTTPTimeout:  3 * time.Second,
		PingInterval: 2 * time.Second,
		Log:          slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:          clock.Now,
		Sleep:        clock.Sleep,
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- a.Run(ctx, h.inbox) }()
	t.Cleanup(h.stop)
	if err := srv.WaitConnected(1, wait); err != nil {
		t.Fatal(err)
	}
	return h
}

// stop cancels Run, checks it ended cleanly and that no secret was logged.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(wait):
		h.t.Error("Run did not return after cancel")
	}
	h.srv.Close()
	logs := h.logs.String()
	for _, secret := range []string{canaryApp, canaryBot, "CANARY"} {
		if strings.Contains(logs, secret) {
			h.t.Errorf("secret %q leaked into logs", secret)
		}
	}
}

func (h *harness) recv() adapters.Inbound {
	h.t.Helper()
	select {
	case in := <-h.inbox:
		return in
	case <-time.After(wait):
		h.t.Fatal("no inbound message")
	}
	return adapters.Inbound{}
}

// expectNext proves nothing else was delivered before it: it sends a DM marker and
// requires the next inbound to be that marker (the adapter keeps arrival order).
func (h *harness) expectNothingBefore(marker string) {
	h.t.Helper()
	h.srv.DM("DMARK", "UMARK", marker)
	if in := h.recv(); in.Text != marker {
		h.t.Fatalf("unexpected inbound before marker: %+v", in)
	}
}

func (h *harness) send(out adapters.Outbound) {
	h.t.Helper()
	if out.Channel == "" {
		out.Channel = Name
	}
	if err := h.a.Send(context.Background(), out); err != nil {
		h.t.Fatalf("Send(%v): %v", out.Kind, err)
	}
}

func (h *harness) sleepsSoFar() []time.Duration { return h.clock.Sleeps() }
