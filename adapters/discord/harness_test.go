package discord

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// canaryToken must never show up in logs or errors (P4).
const canaryToken = "CANARY-discord-bot-token-7f3a9c"

const wait = 5 * time.Second

type harness struct {
	t      *testing.T
	fake   *fakediscord.Server
	a      *Adapter
	inbox  chan adapters.Inbound
	logs   *syncbuf.Buffer
	sleeps *failovertest.Clock
	ctx    context.Context
	stop   func() error
}

var testModels = []string{"openai/gpt-4o-mini", "openai/gpt-4.1", "anthropic/claude-haiku-4-5"}
var testProfiles = []string{"openai:main", "openai:backup", "anthropic:main"}

// t0 is when every harness's virtual clock starts.
var t0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// start runs a fake Discord and the adapter against it, both on one virtual clock
// (the adapter's waits advance it at once, and the fake's rate-limit windows and
// identify budget follow it); cleanup stops both and checks the token never
// reached the logs. fakeMod, when given, adjusts the fake before it starts.
func start(t *testing.T, mod func(*Config), fakeMod ...func(*fakediscord.Server)) *harness {
	t.Helper()
	fake := fakediscord.New()
	fake.Token = canaryToken
	clock := failovertest.NewClock(t0)
	fake.Now = clock.Now
	for _, f := range fakeMod {
		f(fake)
	}
	fake.Start()
	h := &harness{t: t, fake: fake, inbox: make(chan adapters.Inbound, 16), logs: &syncbuf.Buffer{}, sleeps: clock}
	cfg := Config{
		Token:    canaryToken,
		GuildID:  "G1",
		APIURL:   fake.URL(),
		Log:      slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Models:   func() []string { return testModels },
		Profiles: func() []string { return testProfiles },
		Timing: link.Timing{HTTPTimeout: 5 * time.Second, Sleep: h.sleeps.Sleep, Now: h.sleeps.Now,
			Rand: func() float64 { return 0.5 }},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.a = a
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h.inbox) }()
	var once sync.Once
	var runErr error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return within 10s of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(fake.Close)
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
		if got := h.logs.String(); bytes.Contains([]byte(got), []byte(canaryToken)) {
			t.Errorf("bot token leaked into logs:\n%s", got)
		}
	})
	if err := fake.WaitConnected(wait, 1, 0); err != nil {
		t.Fatalf("gateway: %v", err)
	}
	// Commands are registered right after READY; wait so tests see a settled start.
	if err := fakediscord.WaitFor(wait, func() bool { return len(fake.Commands()) > 0 }); err != nil {
		t.Fatalf("commands: %v", err)
	}
	return h
}

func (h *harness) recv() adapters.Inbound {
	h.t.Helper()
	select {
	case in := <-h.inbox:
		return in
	case <-time.After(wait):
		h.t.Fatalf("no inbound message within %v", wait)
		return adapters.Inbound{}
	}
}

// expectNext sends a sentinel mention and asserts it is the next inbound message, so
// nothing unexpected was delivered before it.
func (h *harness) expectNext(channel string) {
	h.t.Helper()
	h.fake.SendMention("G1", channel, "U-sentinel", "sentinel")
	in := h.recv()
	if in.Text != "sentinel" {
		h.t.Fatalf("unexpected inbound before sentinel: %+v", in)
	}
}

func (h *harness) send(out adapters.Outbound) {
	h.t.Helper()
	if out.Channel == "" {
		out.Channel = Name
	}
	if err := h.a.Send(h.ctx, out); err != nil {
		h.t.Fatalf("Send(%+v): %v", out, err)
	}
}

func slogTo(w *syncbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
