//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/notices"
)

// fakeObserver records what the router tells it, as lines.
type fakeObserver struct {
	mu    sync.Mutex
	lines []string
	turns []TurnReport
}

func (o *fakeObserver) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, s)
}

func (o *fakeObserver) Attempt(a failover.AttemptRecord) {
	switch {
	case a.Skipped != "":
		o.add("skip " + a.Candidate.Ref() + " " + string(a.Skipped))
	case a.Failure != nil:
		o.add("call " + a.Candidate.Ref() + " " + string(a.Failure.Reason))
	default:
		o.add("call " + a.Candidate.Ref() + " ok")
	}
}

func (o *fakeObserver) Fallback(from, to string, reason classify.Reason, _ int) {
	o.add("fallback " + from + " -> " + to + " " + string(reason))
}

func (o *fakeObserver) GuardRejected(guard string) { o.add("guard " + guard) }

func (o *fakeObserver) TurnDone(t TurnReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns = append(o.turns, t)
	o.lines = append(o.lines, fmt.Sprintf("turn %s %s %s paid=%d", t.Channel, t.Outcome, t.Model, t.PaidCalls))
}

func (o *fakeObserver) take() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := strings.Join(o.lines, "\n")
	o.lines = nil
	return s
}

// covers V1 (M5): the observer hears every attempt, each step to another model
// with the reason the run left the first, the guard that refused a call, and
// one report per turn; the log has one info line per turn.
func TestRouter_M5_ObserverAndTurnLogLine(t *testing.T) {
	testdb.Each(t, testRouter_M5_ObserverAndTurnLogLine)
}

func testRouter_M5_ObserverAndTurnLogLine(t *testing.T, driver string) {
	h := newHarness(t, driver)
	obs := &fakeObserver{}
	h.r.obs = obs // set before any turn runs

	tests := []struct {
		name   string
		script []fakeprovider.Rule
		guard  bool // limits.max_paid_attempts_per_minute: 1, used up before the turn
		want   string
		logged string
	}{
		{name: "primary answers",
			want:   "call p1/alpha ok\nturn test ok p1/alpha paid=1",
			logged: "model=p1/alpha paid_calls=1 outcome=ok"},
		{name: "fallback after a rate limit",
			script: []fakeprovider.Rule{{Provider: "p1", Mode: fakeprovider.ModeRateLimit, Times: 1}},
			want: "call p1/alpha rate_limit\ncall p2/beta ok\nfallback p1/alpha -> p2/beta rate_limit\n" +
				"turn test fallback p2/beta paid=2",
			logged: "model=p2/beta paid_calls=2 outcome=fallback"},
		{name: "terminal failure",
			script: []fakeprovider.Rule{{Provider: "p1", Mode: fakeprovider.ModeFormat400}},
			want:   "call p1/alpha format\nturn test format p1/alpha paid=1",
			logged: "outcome=format"},
		{name: "guard refuses the call",
			guard:  true,
			want:   "guard paid_calls_per_minute\nturn test paid_call_guard  paid=0",
			logged: "paid_calls=0 outcome=paid_call_guard"},
	}
	for i, tc := range tests {
		h.clock.Advance(time.Hour) // every cooldown of the previous case is over
		h.fake.Reset()
		for _, r := range tc.script {
			h.fake.Script(r)
		}
		h.engine.Guard = nil
		if tc.guard {
			h.engine.Guard = failover.NewGuard(1, h.clock)
			h.say("test:warm", "uses the one call")
		}
		obs.take()
		key := fmt.Sprintf("test:s%d", i)
		h.say(key, "hello")
		if got := obs.take(); got != tc.want {
			t.Errorf("%s: observer heard\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		if line := lastTurnLine(h.logs.String(), key); !strings.Contains(line, "level=INFO") || !strings.Contains(line, tc.logged) ||
			!strings.Contains(line, "duration_ms=") || !strings.Contains(line, "llm_ms=") {
			t.Errorf("%s: the turn's info line lacks %q:\n%s", tc.name, tc.logged, line)
		}
	}
}

// lastTurnLine is the last "msg=turn" log line of session key.
func lastTurnLine(logs, key string) string {
	last := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, " msg=turn ") && strings.Contains(l, " session="+key+" ") {
			last = l
		}
	}
	return last
}

// covers V1 (bot history): the fallback history reads attempts and notices from
// the database, oldest first, by session and time, on every driver.
func TestReadHistory_V1_AttemptsAndNoticesInOrder(t *testing.T) {
	testdb.Each(t, testReadHistory_V1_AttemptsAndNoticesInOrder)
}

func testReadHistory_V1_AttemptsAndNoticesInOrder(t *testing.T, driver string) {
	ctx := context.Background()
	h := newHarness(t, driver)
	h.say("test:plain", "hello") // no failure: not fallback history
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})
	h.clock.Advance(time.Hour)
	h.say("test:fb", "hello")

	render := func(ev []HistoryEvent) string {
		var b strings.Builder
		for _, e := range ev {
			if e.Notice != "" {
				fmt.Fprintf(&b, "%s notice %s\n", e.Session, e.Notice)
				continue
			}
			fmt.Fprintf(&b, "%s %s %s %q %q\n", e.Session, e.Model, e.Profile, e.Reason, e.Skipped)
		}
		return b.String()
	}
	notice := "test:fb notice " + notices.Fallback(mFallback, mPrimary, classify.ReasonTimeout, 503) + "\n"
	fb := "test:fb p1/alpha p1:main \"timeout\" \"\"\ntest:fb p2/beta p2:main \"\" \"\"\n" + notice
	tests := []struct {
		name string
		q    HistoryQuery
		want string
	}{
		{"fallback turns only", HistoryQuery{}, fb},
		{"every turn", HistoryQuery{All: true}, "test:plain p1/alpha p1:main \"\" \"\"\n" + fb},
		{"one session", HistoryQuery{Session: "test:plain", All: true}, "test:plain p1/alpha p1:main \"\" \"\"\n"},
		{"since", HistoryQuery{Since: t0.Add(30 * time.Minute), All: true}, fb},
		{"newest last, limited", HistoryQuery{Limit: 1}, notice},
	}
	for _, tc := range tests {
		ev, err := ReadHistory(ctx, h.db, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := render(ev); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
