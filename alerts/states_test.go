package alerts

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/failover/failovertest"
)

type collected struct {
	mu sync.Mutex
	ev []Event
}

func (c *collected) add(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ev = append(c.ev, e)
}

func (c *collected) take() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ev
	c.ev = nil
	return out
}

// covers D3, D4: the engine's disable of a key for billing or a permanent
// auth failure is one key_disabled event naming the profile and the end of
// the window; a failure while it is disabled (D1: the window is not
// extended), a rate limit or a server error makes none; the next window,
// after the first ended, is a new event.
func TestWatchStates_KeyDisabled(t *testing.T) {
	ctx := context.Background()
	clock := failovertest.NewClock(t0)
	var got collected
	st := WatchStates(failover.NewMemStore(), clock.Now, got.add)
	if _, ok := st.(failover.BatchUpdater); !ok {
		t.Fatal("the wrapper must keep the MemStore's UpdateMany")
	}
	pol := failover.DefaultPolicy()
	pol.Jitter = 0
	e := &failover.Engine{Store: st, Clock: clock, Policy: pol}
	c := failover.Candidate{Provider: "openai", Model: "gpt-4o", Profile: "openai:main"}
	fail := func(r classify.Reason, status int) {
		t.Helper()
		if err := e.RecordFailure(ctx, c, failover.Failure{Reason: r, Status: status, Message: "sk-proj-canary0000000000 is out of credit"}); err != nil {
			t.Fatal(err)
		}
	}
	fail(classify.ReasonBilling, 402)
	ev := got.take()
	if len(ev) != 1 || ev[0].Type != KeyDisabled || ev[0].Data.KeyID != "openai:main" || ev[0].Data.Reason != "billing" || ev[0].Data.Until == nil {
		t.Fatalf("want one key_disabled for openai:main, got %+v", ev)
	}
	first := ev[0]
	if b, _ := first.Body(); containsAny(string(b), "sk-proj", "canary") {
		t.Fatalf("the body quotes the provider's message: %s", b)
	}
	fail(classify.ReasonBilling, 402)
	fail(classify.ReasonRateLimit, 429)
	fail(classify.ReasonTimeout, 500)
	if ev := got.take(); len(ev) != 0 {
		t.Fatalf("no new disable, no event; got %+v", ev)
	}
	clock.Set(first.Data.Until.Add(time.Minute))
	fail(classify.ReasonAuthPermanent, 401)
	ev = got.take()
	if len(ev) != 1 || ev[0].Data.Reason != "auth_permanent" || ev[0].ID == first.ID {
		t.Fatalf("want a new key_disabled for auth_permanent, got %+v", ev)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
