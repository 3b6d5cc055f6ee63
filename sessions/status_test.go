//go:build cgo

package sessions

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// /status says what the rest of the bot says about the same state: the wait the
// all-failed error and the admin report name, no "answering now" while nothing
// can answer, this conversation's calls since /reset or /new only, and the
// tokens /usage counts for the same calls.

// covers N5, V3, V4: when every model cools down, /status does not claim the
// selected model answers now, and it names the moment the all-failed error and
// the admin report name, written the same way (one formatter, not a minute
// rounded up).
func TestStatus_N5_V3_V4_AllCoolingSaysTheErrorsTime(t *testing.T) {
	testdb.Each(t, testStatusAllCooling)
}

func testStatusAllCooling(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeRateLimit, RetryAfter: 97 * time.Second})
	h.clock.Advance(7 * time.Second) // a moment off the minute: 14:00:07
	out := expect(t, h.say(key1, "hello"), "error")
	m := regexp.MustCompile(`earliest retry (.+)$`).FindStringSubmatch(out[0].Text)
	if m == nil {
		t.Fatalf("V3: the error names no retry time: %q", out[0].Text)
	}
	when := m[1]
	report := h.admin.take()
	if len(report) == 0 || !strings.Contains(report[len(report)-1].Text, "earliest expected recovery: "+when) {
		t.Fatalf("V4: the report does not name %q:\n%s", when, dump(report))
	}
	st := expect(t, h.say(key1, "/status"), "reply")[0].Text
	if strings.Contains(st, "answering now") {
		t.Errorf("N5: /status says a model answers now while every one cools down:\n%s", st)
	}
	if !strings.Contains(st, "no model can answer now") || !strings.Contains(st, when) {
		t.Errorf("N5: /status does not say nothing answers until %s (the error's time):\n%s", when, st)
	}
	for _, l := range strings.Split(st, "\n") {
		if strings.Contains(l, "until ") && !strings.Contains(l, "until "+when) {
			t.Errorf("a cooldown of /status ends at another time than the error's %s: %q", when, l)
		}
	}
}

// covers N5, O7: "this conversation" counts the calls since the last /reset or
// /new, not the ones before.
func TestStatus_N5_O7_ConversationCountsSinceReset(t *testing.T) {
	testdb.Each(t, testStatusSinceReset)
}

func testStatusSinceReset(t *testing.T, driver string) {
	h := newHarness(t, driver)
	for _, start := range []string{"/reset", "/new"} {
		for range 3 {
			expect(t, h.say(key1, "before"), "reply")
		}
		expect(t, h.say(key1, start), "reply")
		st := expect(t, h.say(key1, "/status"), "reply")[0].Text
		if !strings.Contains(st, "this conversation: 0 paid call(s); 0 tokens in, 0 out;") {
			t.Errorf("after %s, /status still counts the calls before it:\n%s", start, st)
		}
		expect(t, h.say(key1, "after"), "reply")
		st = expect(t, h.say(key1, "/status"), "reply")[0].Text
		if !strings.Contains(st, "this conversation: 1 paid call(s); ") || !strings.Contains(st, "1 turn(s) in history") {
			t.Errorf("after %s and one turn, /status says:\n%s", start, st)
		}
	}
}

// covers N5, U1, U3: the tokens /status counts for a conversation are the ones
// /usage counts for the same calls: a call that broke off mid-answer (its
// tokens estimated), the fallback that answered, and a turn whose every call
// failed.
func TestStatus_N5_U1_U3_TokensMatchUsage(t *testing.T) {
	testdb.Each(t, testStatusTokensMatchUsage)
}

func testStatusTokensMatchUsage(t *testing.T, driver string) {
	h := newHarness(t, driver)
	expect(t, h.say(key1, "a first plain question"), "reply")
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeMidstreamError, Times: 1})
	expect(t, h.say(key1, "a question whose first answer breaks off"), "notice,reply")
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeMidstreamError})
	h.say(key1, "a question no model finishes")
	h.fake.Reset()

	st := expect(t, h.say(key1, "/status"), "reply")[0].Text
	us := expect(t, h.say(key1, "/usage"), "reply")[0].Text
	sm := regexp.MustCompile(`this conversation: (\d+) paid call\(s\); ([\d,]+) tokens in, ([\d,]+) out`).FindStringSubmatch(st)
	um := regexp.MustCompile(`your usage today \([^)]*\): (\d+) paid call\(s\), ([\d,]+) tokens in, ([\d,]+) out`).FindStringSubmatch(us)
	if sm == nil || um == nil {
		t.Fatalf("no counts:\n/status:\n%s\n/usage:\n%s", st, us)
	}
	if calls, _ := strconv.Atoi(sm[1]); calls < 5 {
		t.Fatalf("setup: %s paid calls, want at least 5:\n%s", sm[1], st)
	}
	if sm[1] != um[1] || sm[2] != um[2] || sm[3] != um[3] {
		t.Errorf("/status counts %s calls, %s tokens in, %s out; /usage %s, %s, %s, on the same calls:\n%s\n%s",
			sm[1], sm[2], sm[3], um[1], um[2], um[3], st, us)
	}
}
