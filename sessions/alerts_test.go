//go:build cgo

package sessions

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// alertLog is an Alerter that keeps what it is told.
type alertLog struct {
	mu sync.Mutex
	ev []alerts.Event
}

func (a *alertLog) Alert(e alerts.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ev = append(a.ev, e)
}

func (a *alertLog) take() []alerts.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.ev
	a.ev = nil
	return out
}

func types(ev []alerts.Event) string {
	s := make([]string, len(ev))
	for i, e := range ev {
		s[i] = string(e.Type)
	}
	return strings.Join(s, ",")
}

// withAlerter gives h's router an alerter, as NewRouter does with
// Options.Alerter (set before any turn runs).
func withAlerter(h *harness) *alertLog {
	a := &alertLog{}
	h.r.alerter = a
	h.r.st.recovered = h.r.alertRecovered
	return a
}

// covers N1, N2 (issue 38): a conversation moving to a fallback is one
// fallback_started event with the requested model, the fallback and why; a
// turn that stays on the fallback is none; the return to the selected model
// is one fallback_cleared.
func TestRouter_N1N2_AlertsFallbackStartedAndCleared(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver)
		al := withAlerter(h)
		h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503, Times: 1})
		expect(t, h.say("test:a", "hello"), "notice,reply")
		ev := al.take()
		if types(ev) != "fallback_started" {
			t.Fatalf("want one fallback_started, got %s", types(ev))
		}
		d := ev[0].Data
		if d.Session != "test:a" || d.RequestedModel != mPrimary || d.FallbackModel != mFallback || d.Reason == "" || d.Status != 503 {
			t.Fatalf("fallback_started data %+v", d)
		}
		expect(t, h.say("test:a", "again"), "reply")
		if ev := al.take(); len(ev) != 0 {
			t.Fatalf("staying on the fallback is no event: %s", types(ev))
		}
		h.clock.Advance(time.Hour) // S3: the primary is tried again, and answers
		expect(t, h.say("test:a", "and again"), "notice,reply")
		ev = al.take()
		if types(ev) != "fallback_cleared" || ev[0].Data.RequestedModel != mPrimary || ev[0].Data.FallbackModel != mFallback {
			t.Fatalf("want one fallback_cleared back to %s from %s, got %+v", mPrimary, mFallback, ev)
		}
	})
}

// covers V4 (issue 38): with two replicas on one database, every model down
// is one all_down event (the replica that claims the incident), whichever
// replica's turns see it and however often; the first answer after it is
// one recovered event naming the same incident, from the replica whose write
// ended it (a turn's answer, or an admin's /recover). No admin channel is
// needed for the events, and none quotes a key.
func TestRouter_V4_AlertsAllDownAndRecoveredOnceAcrossReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, func(c *Config, _ *harness) { c.AdminChannel = "" })
		r2 := h.replica()
		a1, a2 := withAlerter(h), withAlerter(r2)
		for _, p := range []string{"p1", "p2", "p3"} {
			h.fake.Script(fakeprovider.Rule{Provider: p, Mode: fakeprovider.ModeServer500})
		}
		h.clock.Advance(1234567891 * time.Nanosecond) // an instant Postgres cannot keep to the nanosecond
		expect(t, h.say("test:a", "hello"), "error")
		expect(t, r2.say("test:b", "hello"), "error")
		expect(t, h.say("test:c", "hello"), "error")
		down := a1.take()
		if types(down) != "all_down" || len(a2.take()) != 0 {
			t.Fatalf("want one all_down, from the first replica; got %s", types(down))
		}
		if d := down[0].Data; d.Session != "test:a" || len(d.Models) != 3 || d.Models[0].Model != mPrimary || d.Since == nil {
			t.Fatalf("all_down data %+v", d)
		}
		h.fake.Reset()
		h.clock.Advance(time.Hour)
		expect(t, r2.say("test:b", "better?"), "reply")
		expect(t, h.say("test:a", "better?"), "reply")
		up := a2.take()
		if types(up) != "recovered" || len(a1.take()) != 0 {
			t.Fatalf("want one recovered, from the second replica; got %s", types(up))
		}
		if s := up[0].Data.Since; s == nil || !s.Equal(*down[0].Data.Since) || up[0].Data.DurationSec <= 0 {
			t.Fatalf("recovered names another incident: %+v, all_down since %v", up[0].Data, down[0].Data.Since)
		}
		// A second incident is another pair of ids.
		for _, p := range []string{"p1", "p2", "p3"} {
			h.fake.Script(fakeprovider.Rule{Provider: p, Mode: fakeprovider.ModeServer500})
		}
		h.clock.Advance(time.Hour)
		expect(t, r2.say("test:d", "hello"), "error")
		again := a2.take()
		if types(again) != "all_down" || again[0].ID == down[0].ID {
			t.Fatalf("want a new all_down, got %+v", again)
		}
		// B3: an admin's /recover that brings a model back ends it too.
		h.fake.Reset()
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: "test:a", User: "test:admin", Text: "/recover p1/alpha"})
		h.rec.take()
		back := a1.take()
		if types(back) != "recovered" || !back[0].Data.Since.Equal(*again[0].Data.Since) || len(a2.take()) != 0 {
			t.Fatalf("want one recovered of the second incident after /recover, got %+v", back)
		}
		// No body quotes a key (the harness's keys are canaries).
		for _, e := range append(append(append(down, up...), again...), back...) {
			b, _ := e.Body()
			for _, k := range canaryKeys {
				if strings.Contains(string(b), k) {
					t.Fatalf("P4: %s quotes a key: %s", e.Type, b)
				}
			}
		}
	})
}

// covers B2 (issue 38): a turn refused by the per-minute cap is a
// budget_reached event naming the limit and the conversation.
func TestRouter_B2_AlertsBudgetReached(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver)
		al := withAlerter(h)
		h.engine.Guard = failover.NewGuard(1, h.clock)
		expect(t, h.say("test:a", "uses the one call"), "reply")
		expect(t, h.say("test:b", "refused"), "error")
		ev := al.take()
		if types(ev) != "budget_reached" || ev[0].Data.Guard != GuardPerMinute || ev[0].Data.Session != "test:b" {
			t.Fatalf("want budget_reached for %s, got %s", GuardPerMinute, fmt.Sprint(ev))
		}
	})
}
