//go:build cgo

package sessions

import (
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers T6: each user gets a daily allowance of paid calls, counted before every
// paid call: past it the user is told when it resets and no call is made; other
// users are unaffected; a restart and a replica see the same count; the next UTC
// day brings it back.
func TestRouter_T6_PerUserDailyPaidCalls(t *testing.T) { testdb.Each(t, testUserBudget) }

func testUserBudget(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) { c.UserBudget = UserBudget{Calls: 2} })
	ask := func(h *harness, user, text string) []adapters.Outbound {
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: "test:" + user, User: "test:" + user, Text: text, ReplyTo: user})
		return h.rec.take()
	}
	expect(t, ask(h, "alice", "one"), "reply")
	expect(t, ask(h, "alice", "two"), "reply")
	calls := len(h.fake.Calls())
	out := expect(t, ask(h, "alice", "three"), "error")
	if !strings.Contains(out[0].Text, "daily limit of 2 paid calls") || !strings.Contains(out[0].Text, "resets at 2026-03-02 00:00 UTC (in 10 h)") {
		t.Fatalf("refusal: %q", out[0].Text)
	}
	if n := len(h.fake.Calls()) - calls; n != 0 {
		t.Fatalf("%d paid call(s) past the budget", n)
	}
	expect(t, ask(h, "bob", "hi"), "reply")
	// A restart (a new router on the same database) and a replica share the count.
	for _, other := range []*harness{h.replica(), h.replica()} {
		expect(t, ask(other, "alice", "still?"), "error")
	}
	// The next UTC day the allowance is back.
	h.clock.Advance(10*time.Hour + time.Minute) // t0 is 14:00 UTC
	expect(t, ask(h, "alice", "a new day"), "reply")
}

// covers T6: a spend cap (with prices) stops a user once the day's estimated
// spend reached it.
func TestRouter_T6_PerUserDailyUSD(t *testing.T) { testdb.Each(t, testUserSpend) }

func testUserSpend(t *testing.T, driver string) {
	h := newHarness(t, driver, withMem(map[string]*memLLM{}), func(c *Config, _ *harness) {
		c.UserBudget = UserBudget{USD: 0.02}
		// the in-process model reports 10 input and 5 output tokens: $0.015 a call
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {Price: failover.Price{InPerMTok: 1000, OutPerMTok: 1000}}}
	})
	say := func(text string) []adapters.Outbound {
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, User: "test:alice", Text: text, ReplyTo: "t"})
		return h.rec.take()
	}
	expect(t, say("one"), "reply")
	expect(t, say("two"), "reply") // $0.015 spent: still under the cap
	out := expect(t, say("three"), "error")
	if !strings.Contains(out[0].Text, "daily limit of $0.02") {
		t.Fatalf("refusal: %q", out[0].Text)
	}
}

// covers M3: the same platform event reaching two replicas (or one process before
// and after a restart) is answered once.
func TestRouter_M3_OneAnswerPerEvent(t *testing.T) { testdb.Each(t, testOneAnswerPerEvent) }

func testOneAnswerPerEvent(t *testing.T, driver string) {
	a := newHarness(t, driver)
	b := a.replica()
	in := adapters.Inbound{Channel: "test", SessionKey: key1, User: "test:u1", Text: "hello", ReplyTo: "t", EventID: "test:ev:1"}
	a.sayAs(in)
	b.sayAs(in)
	if n := len(a.rec.take()) + len(b.rec.take()); n != 1 {
		t.Fatalf("%d answers to one event on two replicas, want 1", n)
	}
	if calls := len(a.fake.Calls()); calls != 1 {
		t.Fatalf("%d paid calls for one event", calls)
	}
	c := a.replica() // a restart
	c.sayAs(in)
	if out := c.rec.take(); len(out) != 0 {
		t.Fatalf("answered again after a restart:%s", dump(out))
	}
	// A different event is answered.
	in.EventID, in.Text = "test:ev:2", "again"
	c.sayAs(in)
	if out := c.rec.take(); len(out) != 1 {
		t.Fatalf("a new event was not answered:%s", dump(out))
	}
}
