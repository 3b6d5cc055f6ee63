package slack_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// TestE2E_Issue38_HomeTabsRepublishedWithinTier4: more people have opened the
// Home tab than views.publish's Tier 4 allows in a minute (100, the fake's
// DefaultMethodLimits: https://docs.slack.dev/apis/web-api/rate-limits/ and
// https://docs.slack.dev/reference/methods/views.publish), then a fallback
// changes the board. The bot publishes every opener's tab within the tier, on
// the adapter's clock that the fake's window shares: Slack never answers
// ratelimited, no minute holds more than the tier's calls, and every opener
// ends up seeing the fallback (the admin with keys, everyone else without).
// covers issue 38
func TestE2E_Issue38_HomeTabsRepublishedWithinTier4(t *testing.T) {
	const openers = fakeslack.Tier4 + fakeslack.Tier4/2
	clock := runningClock(t)
	e := startE2E(t, func(st *setup) {
		st.admins = []string{"slack:U000"}
		st.config.Now, st.config.Sleep, st.fake.Now = clock.Now, clock.Sleep, clock.Now
	})
	users := make([]string, openers)
	for i := range users {
		users[i] = fmt.Sprintf("U%03d", i)
		if !e.slack.AppHomeOpened(users[i]) {
			t.Fatal("the manifest's app does not get app_home_opened")
		}
	}
	for _, u := range users {
		if _, ok := e.slack.WaitHome(u, homeWait, nil); !ok {
			t.Fatalf("no Home tab published to %s; %d published", u, len(e.slack.CallsOf("views.publish")))
		}
	}
	opened := len(e.slack.CallsOf("views.publish"))

	// A fallback: every open tab is published again, showing it.
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	m := e.slack.Mention("C1", "U2", "hello", "")
	e.waitThread("C1", m.TS, 2)
	fellBack := func(h fakeslack.HomeView) bool { return strings.Contains(h.Text(), "p1/alpha` → `p2/beta") }
	for _, u := range users {
		h, ok := e.slack.WaitHome(u, homeWait, fellBack)
		if !ok {
			t.Fatalf("%s's Home tab was not updated after the fallback; %d published", u, len(e.slack.CallsOf("views.publish")))
		}
		if admin := u == "U000"; strings.Contains(h.Text(), "p1:main") != admin {
			t.Errorf("%s (admin %v) sees keys: %v", u, admin, !admin)
		}
	}

	calls := e.slack.CallsOf("views.publish")
	if len(calls) < 2*openers {
		t.Fatalf("%d views.publish calls, want at least %d (open and change)", len(calls), 2*openers)
	}
	most, refused := 0, 0
	for i, c := range calls {
		if c.Error != "" {
			refused++
		}
		n := 0
		for _, d := range calls[i:] {
			if d.At.Sub(c.At) < time.Minute {
				n++
			}
		}
		most = max(most, n)
	}
	if refused > 0 {
		t.Errorf("views.publish answered an error %d times (ratelimited: over Tier 4)", refused)
	}
	if most > fakeslack.Tier4 {
		t.Errorf("%d views.publish calls within a minute, Tier 4 allows %d", most, fakeslack.Tier4)
	}
	last := calls[len(calls)-1].At
	t.Logf("%d openers: %d publishes on opening, %d in all over %s on the adapter's clock, at most %d in a minute",
		openers, opened, len(calls), last.Sub(calls[0].At), most)
}

// runningClock is a virtual clock for the adapter and the fake Slack on which
// waits overlap as they do in real time: Sleep blocks until the clock reaches
// its end, and while anyone sleeps the clock moves a second per millisecond of
// real time. (On a failovertest.Clock every Sleep moves the clock at once, so
// fifty publishes waiting for the same slot of the window add their waits up:
// hours, and past homeWatch every opener is forgotten.)
func runningClock(t *testing.T) *failovertest.ManualClock {
	c := failovertest.NewManualClock(e2e.T0)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if c.Sleeping() > 0 {
				c.Advance(time.Second)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done }) // after the world's own cleanup
	return c
}
