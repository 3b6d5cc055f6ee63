//go:build cgo

package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/notices"
)

const (
	key1 = "test:s1"
	key2 = "test:s2"
)

// covers S1, O1, O2, N1, N3, N4, S3, N2, K1
func TestRouter_N1_N2_N3_S3_FallbackStaysThenProbeClears(t *testing.T) {
	testdb.Each(t, testRouter_N1_N2_N3_S3_FallbackStaysThenProbeClears)
}

func testRouter_N1_N2_N3_S3_FallbackStaysThenProbeClears(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})

	// Turn 1: the primary fails, the fallback answers; one N1 notice, then the reply.
	out := expect(t, h.say(key1, "hello"), "notice,reply")
	wantN1 := notices.Fallback(mFallback, mPrimary, classify.ReasonTimeout, 503) // "server error (HTTP 503)"
	if out[0].Text != wantN1 {
		t.Fatalf("N1 = %q, want %q", out[0].Text, wantN1)
	}
	if out[1].Model != mFallback || !strings.Contains(out[1].Text, "you said: hello") {
		t.Fatalf("reply = %+v", out[1])
	}
	if out[0].ReplyTo != out[1].ReplyTo || out[0].SessionKey != key1 {
		t.Fatalf("N4: notice must go to the same place as the reply: %+v", out)
	}
	e := h.entry(key1)
	if e.ProviderOverride != "p2" || e.ModelOverride != "beta" || e.ModelOverrideSource != "auto" || e.FallbackOrigin != mPrimary || e.FallbackReason != "timeout" {
		t.Fatalf("O2: auto override not persisted: %+v", e)
	}
	// N4: notices are never stored in the history.
	hist := h.history(key1)
	if len(hist) != 2 || hist[0].Role != "user" || hist[1].Role != "assistant" {
		t.Fatalf("history = %+v", hist)
	}
	for _, m := range hist {
		if strings.HasPrefix(m.Content, notices.Prefix) {
			t.Fatalf("notice stored in history: %q", m.Content)
		}
	}

	// Turn 2 (1 minute later): stays on the fallback, no notice, no call to the primary.
	h.clock.Advance(time.Minute)
	p1 := h.calls.count("p1")
	out = expect(t, h.say(key1, "second"), "reply")
	if out[0].Model != mFallback {
		t.Fatalf("turn 2 answered by %s", out[0].Model)
	}
	if got := h.calls.count("p1"); got != p1 {
		t.Fatalf("S3: the failed primary was called again before the probe interval (%d -> %d)", p1, got)
	}

	// Turn 3 (5 minutes after the fallback began): the probe of the primary still
	// fails; the turn stays on the fallback with no new notice.
	h.clock.Advance(4 * time.Minute)
	out = expect(t, h.say(key1, "third"), "reply")
	if out[0].Model != mFallback {
		t.Fatalf("turn 3 answered by %s", out[0].Model)
	}
	if got := h.calls.count("p1"); got != p1+1 {
		t.Fatalf("S3: want exactly one probe call of the primary, got %d", got-p1)
	}
	// Turn 4 (2 minutes later): within the probe interval again, no primary call.
	h.clock.Advance(2 * time.Minute)
	expect(t, h.say(key1, "fourth"), "reply")
	if got := h.calls.count("p1"); got != p1+1 {
		t.Fatalf("S3: primary probed more than once per interval: %d", got-p1)
	}

	// Turn 5 (next interval, the primary is back): the probe answers, N2, override cleared.
	h.clock.Advance(4 * time.Minute)
	h.fake.Reset()
	out = expect(t, h.say(key1, "fifth"), "notice,reply")
	if want := notices.Cleared(mPrimary, mFallback); out[0].Text != want {
		t.Fatalf("N2 = %q, want %q", out[0].Text, want)
	}
	if out[1].Model != mPrimary {
		t.Fatalf("turn 5 answered by %s", out[1].Model)
	}
	if e := h.entry(key1); e.ModelOverride != "" || e.ModelOverrideSource != "" || e.FallbackOrigin != "" {
		t.Fatalf("S3: override not cleared: %+v", e)
	}
	// Turn 6: on the primary, nothing to announce.
	expect(t, h.say(key1, "sixth"), "reply")
	if n := len(h.history(key1)); n != 12 {
		t.Fatalf("history has %d messages, want 12", n)
	}
}

// covers N1 (reason text), V1
func TestRouter_N1_BillingReasonAndAttemptsRecorded(t *testing.T) {
	testdb.Each(t, testRouter_N1_BillingReasonAndAttemptsRecorded)
}

func testRouter_N1_BillingReasonAndAttemptsRecorded(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	out := expect(t, h.say(key1, "hi"), "notice,reply")
	if want := notices.Fallback(mFallback, mPrimary, classify.ReasonBilling, 402); out[0].Text != want {
		t.Fatalf("N1 = %q, want %q", out[0].Text, want)
	}
	var rows []AttemptRow
	h.db.Where("session_key = ?", key1).Order("id").Find(&rows)
	if len(rows) < 2 || rows[0].Model != mPrimary || rows[0].Reason != "billing" || rows[0].Status != 402 || rows[0].Profile != "p1:main" {
		t.Fatalf("V1: attempts = %+v", rows)
	}
	if last := rows[len(rows)-1]; last.Model != mFallback || last.Reason != "" || last.Summary != "ok" {
		t.Fatalf("V1: last attempt = %+v", last)
	}
	if e := h.entry(key1); e.PaidCalls != len(rows) {
		t.Fatalf("paid calls = %d, want %d", e.PaidCalls, len(rows))
	}
}

// covers B4
func TestRouter_B4_NoticeAudience(t *testing.T) { testdb.Each(t, testRouter_B4_NoticeAudience) }

func testRouter_B4_NoticeAudience(t *testing.T, driver string) {
	for _, c := range []struct {
		audience string
		direct   bool
		want     string
	}{{"off", true, "reply"}, {"direct_only", false, "reply"}, {"direct_only", true, "notice,reply"}, {"all", false, "notice,reply"}} {
		t.Run(c.audience, func(t *testing.T) {
			h := newHarness(t, driver, func(cfg *Config, _ *harness) { cfg.Notices = c.audience })
			h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
			h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, Text: "hi", Direct: c.direct})
			expect(t, h.rec.take(), c.want)
		})
	}
}

// covers S4, S5, P3
func TestRouter_S4_UserModelIsStrict(t *testing.T) { testdb.Each(t, testRouter_S4_UserModelIsStrict) }

func testRouter_S4_UserModelIsStrict(t *testing.T, driver string) {
	h := newHarness(t, driver)
	out := expect(t, h.say(key1, "/model "+mPrimary), "reply")
	if !strings.Contains(out[0].Text, "model set to "+mPrimary) {
		t.Fatalf("answer = %q", out[0].Text)
	}
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	out = expect(t, h.say(key1, "hi"), "error")
	if !strings.Contains(out[0].Text, mPrimary) || !strings.Contains(out[0].Text, "out of credits") {
		t.Fatalf("S4 error = %q", out[0].Text)
	}
	if n := h.calls.count("p2") + h.calls.count("p3"); n != 0 {
		t.Fatalf("S4: %d calls to unrelated fallbacks", n)
	}
	if e := h.entry(key1); e.ModelOverrideSource != "user" || e.ModelOverride != "alpha" {
		t.Fatalf("user override changed: %+v", e)
	}
	if len(h.admin.take()) != 0 {
		t.Fatal("V4: a strict user model failing is not an all-models incident")
	}
	// S5: a legacy override without a source is strict too.
	h.db.Model(&Entry{}).Where("key = ?", key1).Update("model_override_source", "")
	expect(t, h.say(key1, "hi again"), "error")
	if n := h.calls.count("p2") + h.calls.count("p3"); n != 0 {
		t.Fatalf("S5: legacy override fell back (%d calls)", n)
	}
	// A user-pinned profile that does not exist is refused.
	out = expect(t, h.say(key1, "/model p1/alpha@p1:nope"), "error")
	if !strings.Contains(out[0].Text, "not a configured profile") {
		t.Fatalf("answer = %q", out[0].Text)
	}
}

// waitFor polls cond (real time) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// covers O3, O2, O4, O5
func TestRouter_O3_RollbackSparesConcurrentSetModel(t *testing.T) {
	testdb.Each(t, testRouter_O3_RollbackSparesConcurrentSetModel)
}

func testRouter_O3_RollbackSparesConcurrentSetModel(t *testing.T, driver string) {
	h := newHarness(t, driver, func(_ *Config, h *harness) { h.idle = 300 * time.Millisecond })
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeHangBeforeHeaders})
	h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, Text: "hello"})

	// O2: the override is persisted before the fallback attempt starts.
	waitFor(t, "the fallback attempt to hang in the fake", func() bool { return h.calls.count("p2") >= 1 })
	if e := h.entry(key1); e.ModelOverride != "beta" || e.ModelOverrideSource != "auto" {
		t.Fatalf("O2: override not persisted before the attempt: %+v", e)
	}
	// Meanwhile the user picks a model through another path (session patch).
	if err := h.r.SetModel(context.Background(), key1, mThird, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := h.rec.take()
	e := h.entry(key1)
	if e.ProviderOverride != "p3" || e.ModelOverride != "gamma" || e.ModelOverrideSource != "user" {
		t.Fatalf("O3: the concurrent /model was overwritten: %+v\n%s", e, dump(out))
	}
	if !e.LiveSwitch {
		t.Fatal("O4: a user change must mark a pending live switch")
	}
	if last := out[len(out)-1]; last.Kind != adapters.KindReply || last.Model != mThird {
		t.Fatalf("turn result:\n%s", dump(out))
	}
	// The next turn uses the user's model, strictly, and consumes the live switch.
	out = expect(t, h.say(key1, "next"), "reply")
	if out[0].Model != mThird {
		t.Fatalf("answered by %s", out[0].Model)
	}
	if h.entry(key1).LiveSwitch {
		t.Fatal("O4: live switch not consumed")
	}
}

// covers O3: without interference the failed fallback's fields are rolled back.
func TestRouter_O3_RollbackWhenEveryFallbackFails(t *testing.T) {
	testdb.Each(t, testRouter_O3_RollbackWhenEveryFallbackFails)
}

func testRouter_O3_RollbackWhenEveryFallbackFails(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeModelNotFound404})
	h.fake.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeModelNotFound404})
	expect(t, h.say(key1, "hello"), "error")
	e := h.entry(key1)
	if e.ModelOverride != "" || e.ModelOverrideSource != "" || e.AuthProfileOverride != "" || e.FallbackOrigin != "" {
		t.Fatalf("O3: failed fallback fields not rolled back: %+v", e)
	}
	if len(h.history(key1)) != 0 {
		t.Fatal("a failed turn must not store half an exchange")
	}
}

// covers O7, P2
func TestRouter_O7_NewVersusReset(t *testing.T) { testdb.Each(t, testRouter_O7_NewVersusReset) }

func testRouter_O7_NewVersusReset(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	expect(t, h.say(key1, "hello"), "notice,reply")
	if h.entry(key1).ModelOverrideSource != "auto" {
		t.Fatal("setup: no auto override")
	}
	// /new clears the history and the auto override at once.
	out := expect(t, h.say(key1, "/new"), "reply")
	if !strings.Contains(out[0].Text, "new conversation") {
		t.Fatalf("answer = %q", out[0].Text)
	}
	e := h.entry(key1)
	if e.ModelOverride != "" || e.AuthProfileOverride != "" || len(h.history(key1)) != 0 {
		t.Fatalf("O7: /new left %+v, history %d", e, len(h.history(key1)))
	}
	// /new keeps a user choice; /reset drops it.
	h.fake.Reset()
	expect(t, h.say(key1, "/model "+mThird), "reply")
	expect(t, h.say(key1, "chat"), "reply")
	expect(t, h.say(key1, "/new"), "reply")
	if e := h.entry(key1); e.ModelOverride != "gamma" || e.ModelOverrideSource != "user" || len(h.history(key1)) != 0 {
		t.Fatalf("/new dropped the user's model: %+v", e)
	}
	expect(t, h.say(key1, "chat"), "reply")
	out = expect(t, h.say(key1, "/reset"), "reply")
	if !strings.Contains(out[0].Text, "model back to "+mPrimary) {
		t.Fatalf("answer = %q", out[0].Text)
	}
	if e := h.entry(key1); e.ModelOverride != "" || e.ModelOverrideSource != "" || len(h.history(key1)) != 0 {
		t.Fatalf("/reset left %+v", e)
	}
	// The primary's keys are still billing-disabled: no call to them until the
	// billing probe interval has passed since the billing failure (R11), so the
	// fallback answers, and says so.
	if out := expect(t, h.say(key1, "after"), "notice,reply"); out[1].Model != mFallback {
		t.Fatalf("after /reset answered by %s", out[1].Model)
	}
	// /new with a model selects it as the user's choice.
	expect(t, h.say(key1, "/new "+mFallback), "reply")
	if e := h.entry(key1); e.ModelOverride != "beta" || e.ModelOverrideSource != "user" {
		t.Fatalf("/new model: %+v", e)
	}
}

// covers N5, B3
func TestRouter_N5_StatusAndB3_Recover(t *testing.T) {
	testdb.Each(t, testRouter_N5_StatusAndB3_Recover)
}

func testRouter_N5_StatusAndB3_Recover(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	expect(t, h.say(key1, "hello"), "notice,reply")
	out := expect(t, h.say(key1, "/status"), "reply")
	st := out[0].Text
	for _, want := range []string{
		// N5: the selection is still the configured model; the auto override is
		// the active fallback.
		"selected model: p1/alpha (the configured default)\n",
		"active fallback: p2/beta answers now, falling back from p1/alpha because it failed: out of credits\n",
		"p1/alpha gets another try on the first turn after 14:05 UTC (in 5 min)\n",
		"next turn tries: p2/beta, then p3/gamma, then p1/alpha (cooling down)\n",
		"cooling down:\n  p1/alpha (key p1:main): out of credits, switched off until 19:00 UTC (in 5 h)\n",
		"key in use: p2:main (picked automatically; another key of the provider takes over if it fails)\n",
		"this conversation: 2 paid call(s); 2 tokens in, 4 out; 1 turn(s) in history\n",
		"context: about 18 tokens (the model's window is not configured)",
	} {
		if !strings.Contains(st, want) {
			t.Errorf("N5: /status misses %q:\n%s", want, st)
		}
	}
	if !out[0].Ephemeral {
		t.Error("command answers should be ephemeral")
	}

	// B3: only admins may /recover.
	out = expect(t, h.say(key1, "/recover p1/alpha"), "error")
	if !strings.Contains(out[0].Text, "admins") {
		t.Fatalf("non-admin: %q", out[0].Text)
	}
	admin := func(text string) []adapters.Outbound {
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, User: "test:admin", Text: text})
		return h.rec.take()
	}
	out = expect(t, admin("/recover p1/alpha"), "reply")
	if !strings.Contains(out[0].Text, "still failing") || !strings.Contains(out[0].Text, "out of credits") {
		t.Fatalf("recover while failing: %q", out[0].Text)
	}
	if st, _ := h.states.Get(context.Background(), "p1:main"); !st.DisabledUntil.After(h.clock.Now()) {
		t.Fatal("B3: a failed probe must not clear the disable")
	}
	h.fake.Reset() // the account was topped up
	probes := h.fake.CallCount(fakeprovider.Filter{Provider: "p1"})
	out = expect(t, admin("/recover p1/alpha"), "reply")
	if !strings.Contains(out[0].Text, "recovered p1/alpha") {
		t.Fatalf("recover: %q", out[0].Text)
	}
	if n := h.fake.CallCount(fakeprovider.Filter{Provider: "p1"}) - probes; n != 1 {
		t.Fatalf("B3: want one probe call, got %d", n)
	}
	if st, _ := h.states.Get(context.Background(), "p1:main"); !st.DisabledUntil.IsZero() || st.ErrorCount != 0 {
		t.Fatalf("B3: disable not cleared: %+v", st)
	}
	// By profile id too; and bad targets get a helpful answer.
	if out = expect(t, admin("/recover p1:main"), "reply"); !strings.Contains(out[0].Text, "recovered") {
		t.Fatalf("recover profile: %q", out[0].Text)
	}
	if out = expect(t, admin("/recover p9/x"), "error"); !strings.Contains(out[0].Text, "not configured") {
		t.Fatalf("recover unknown: %q", out[0].Text)
	}
	// A typo is refused with the nearest name, never "recovered", and costs no call.
	probes = h.fake.CallCount(fakeprovider.Filter{})
	for typed, want := range map[string]string{
		"/recover p1/alpah":  `unknown model: "p1/alpah" is not a model of the configuration; did you mean p1/alpha? (/recover takes a model of the configuration, provider/model, or a profile id, provider:name)`,
		"/recover p1:mian":   `unknown profile: "p1:mian" is not a configured profile; did you mean p1:main? (/recover takes a model of the configuration, provider/model, or a profile id, provider:name)`,
		"/recover p2/zzzzzz": `unknown model: "p2/zzzzzz" is not a model of the configuration (/recover takes a model of the configuration, provider/model, or a profile id, provider:name; /status lists them)`,
	} {
		if out = expect(t, admin(typed), "error"); out[0].Text != want {
			t.Errorf("%s: %q\nwant %q", typed, out[0].Text, want)
		}
	}
	if n := h.fake.CallCount(fakeprovider.Filter{}) - probes; n != 0 {
		t.Errorf("B3: a mistyped target made %d probe call(s)", n)
	}
	// A console user is always an admin (the channel vouches).
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, Admin: true, Text: "/recover p2:main"})
	if out := expect(t, h.rec.take(), "reply"); !strings.Contains(out[0].Text, "recovered") {
		t.Fatalf("channel admin: %q", out[0].Text)
	}
}

// covers V4, V3
func TestRouter_V4_AdminReportOncePerIncident(t *testing.T) {
	testdb.Each(t, testRouter_V4_AdminReportOncePerIncident)
}

func testRouter_V4_AdminReportOncePerIncident(t *testing.T, driver string) {
	h := newHarness(t, driver)
	// (No rate_limit mode here: the llm client resolves relative reset headers
	// against the wall clock, not the test's fake clock.)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeBilling402})
	h.fake.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeRevoked403})
	out := expect(t, h.say(key1, "hello"), "error")
	for _, want := range []string{mPrimary, mFallback, mThird} {
		if !strings.Contains(out[0].Text, want) {
			t.Errorf("V3: user message misses %s: %q", want, out[0].Text)
		}
	}
	rep := h.admin.take()
	if len(rep) != 1 || rep[0].Kind != adapters.KindReport || rep[0].Channel != "console" {
		t.Fatalf("V4: want one report to the console adapter, got:\n%s", dump(rep))
	}
	for _, want := range []string{"all models unavailable", "p1/alpha — provider p1", "overloaded", "recovery: estimated", "p2/beta — provider p2", "out of credits",
		"unknown, needs a human", "/recover p2/beta", "p3/gamma"} {
		if !strings.Contains(rep[0].Text, want) {
			t.Errorf("V4 report misses %q:\n%s", want, rep[0].Text)
		}
	}
	if strings.Contains(rep[0].Text, "CANARY") {
		t.Fatal("P4: secret in the report")
	}
	// Same incident: no second report, even from another session.
	h.clock.Advance(time.Minute)
	expect(t, h.say("test:s2", "hello?"), "error")
	if rep := h.admin.take(); len(rep) != 0 {
		t.Fatalf("V4: report repeated within the incident:\n%s", dump(rep))
	}
	// A success ends the incident; the next outage reports again.
	h.fake.Reset()
	h.clock.Advance(24 * time.Hour)
	expect(t, h.say("test:s3", "fine?"), "reply")
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	expect(t, h.say("test:s4", "down again"), "error")
	if rep := h.admin.take(); len(rep) != 1 {
		t.Fatalf("V4: new incident not reported:\n%s", dump(rep))
	}
}

// covers B4 (admin routing): the report goes to the adapter named by AdminChannel,
// with ReplyTo the part after the colon.
func TestRouter_V4_AdminChannelRouting(t *testing.T) {
	testdb.Each(t, testRouter_V4_AdminChannelRouting)
}

func testRouter_V4_AdminChannelRouting(t *testing.T, driver string) {
	h := newHarness(t, driver, func(cfg *Config, _ *harness) { cfg.AdminChannel = "test:C0ADMIN" })
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	out := h.say(key1, "hello")
	var rep []adapters.Outbound
	for _, o := range out {
		if o.Kind == adapters.KindReport {
			rep = append(rep, o)
		}
	}
	if len(rep) != 1 || rep[0].ReplyTo != "C0ADMIN" || rep[0].Channel != "test" {
		t.Fatalf("report routing:\n%s", dump(out))
	}
}

func TestRouter_CommandsAnswerBadInput(t *testing.T) {
	testdb.Each(t, testRouter_CommandsAnswerBadInput)
}

func testRouter_CommandsAnswerBadInput(t *testing.T, driver string) {
	h := newHarness(t, driver)
	cases := []struct{ in, kind, has string }{
		{"/shrug", "error", "unknown command /shrug"},
		{"/model nope/x", "error", "provider \"nope\" is not configured"},
		{"/model gpt", "error", `unknown model or alias "gpt" (/models lists the models you can choose)`},
		{"/model", "reply", "model: p1/alpha (the configured default)"},
		{"<@U1> !help", "reply", "/recover"},
		{"/reset please", "error", "usage: /reset"},
		{"/usr/bin is a path", "reply", "you said: /usr/bin is a path"},
	}
	for _, c := range cases {
		out := expect(t, h.say(key1, c.in), c.kind)
		if !strings.Contains(out[0].Text, c.has) {
			t.Errorf("%q -> %q, want it to contain %q", c.in, out[0].Text, c.has)
		}
	}
	out := expect(t, h.say(key1, "/model default"), "reply")
	if !strings.Contains(out[0].Text, "back to the configured model p1/alpha") {
		t.Fatalf("%q", out[0].Text)
	}
}

func TestRouter_OversizedMessageRefused(t *testing.T) {
	testdb.Each(t, testRouter_OversizedMessageRefused)
}

func testRouter_OversizedMessageRefused(t *testing.T, driver string) {
	h := newHarness(t, driver, func(cfg *Config, _ *harness) { cfg.MaxMessageBytes = 100 })
	out := expect(t, h.say(key1, strings.Repeat("x", 101)), "error")
	if !strings.Contains(out[0].Text, "too large") || !strings.Contains(out[0].Text, "nothing was stored") {
		t.Fatalf("%q", out[0].Text)
	}
	if len(h.fake.Calls()) != 0 || len(h.history(key1)) != 0 {
		t.Fatal("an oversized message reached the model or the history")
	}
	expect(t, h.say(key1, strings.Repeat("x", 100)), "reply")
}

// covers P4: no secret in the database, logs or anything sent.
func TestRouter_P4_CanaryNeverStoredOrLogged(t *testing.T) {
	testdb.Each(t, testRouter_P4_CanaryNeverStoredOrLogged)
}

func testRouter_P4_CanaryNeverStoredOrLogged(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnauthorized401})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeRevoked403})
	h.say(key1, "hello")
	h.say(key1, "/status")
	h.clock.Advance(time.Hour)
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, Admin: true, Text: "/recover p1/alpha"})
	var all []string
	for _, o := range append(h.rec.all(), h.admin.all()...) {
		all = append(all, o.Text)
	}
	all = append(all, h.logs.String())
	for _, table := range []string{"session_entries", "session_messages", "session_attempts", "profile_states"} {
		rows, err := h.db.Raw("SELECT * FROM " + table).Rows()
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch x := v.(type) {
				case string:
					all = append(all, x)
				case []byte:
					all = append(all, string(x))
				}
			}
		}
		rows.Close()
	}
	joined := strings.Join(all, "\n")
	for _, k := range canaryKeys {
		if strings.Contains(joined, k) || strings.Contains(joined, k[10:]) {
			t.Fatalf("P4: secret %q found in output, logs or DB", k[:12]+"…")
		}
	}
	if !strings.Contains(joined, "p1:main") {
		t.Fatal("sanity: profile ids should be visible")
	}
}

// covers O6: a model the user switches to while a turn runs wins over the rest of
// the chain. Named later in the chain it is jumped to (TestRouter_O3_...); not in
// the chain, the turn starts again on it and the candidates between are never called.
func TestRouter_O6_LiveSwitchRestartsOnUserModel(t *testing.T) {
	testdb.Each(t, testRouter_O6_LiveSwitchRestartsOnUserModel)
}

func testRouter_O6_LiveSwitchRestartsOnUserModel(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, h *harness) {
		h.idle = 300 * time.Millisecond
		c.Models = map[failover.ModelRef]ModelInfo{"p3/delta": {Selectable: true}} // not in the chain, but choosable
	})
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeHangBeforeHeaders})
	h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, Text: "hello"})
	waitFor(t, "the fallback attempt to hang in the fake", func() bool { return h.calls.count("p2") >= 1 })
	const userModel = "p3/delta"
	if err := h.r.SetModel(context.Background(), key1, userModel, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := h.rec.take()
	last := out[len(out)-1]
	if last.Kind != adapters.KindReply || last.Model != userModel {
		t.Fatalf("O6: the turn was not answered by the user's new model:\n%s", dump(out))
	}
	for _, c := range h.fake.Calls() {
		if c.Provider == "p3" && c.Model != "delta" {
			t.Fatalf("O6: the chain went on to %s/%s after the switch", c.Provider, c.Model)
		}
	}
}

// covers V4: the incident is durable. A router restarted on the same database
// during an incident does not report it again; the first success after the
// restart ends it, and the next outage is reported.
func TestRouter_V4_IncidentSurvivesRestart(t *testing.T) {
	testdb.Each(t, testRouter_V4_IncidentSurvivesRestart)
}

func testRouter_V4_IncidentSurvivesRestart(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	expect(t, h.say(key1, "hello"), "error")
	if rep := h.admin.take(); len(rep) != 1 {
		t.Fatalf("V4: want one report, got:\n%s", dump(rep))
	}
	h.open(baseConfig()) // a restart: new router, same database
	expect(t, h.say("test:s2", "still down?"), "error")
	if rep := h.admin.take(); len(rep) != 0 {
		t.Fatalf("V4: the restarted router reported the same incident again:\n%s", dump(rep))
	}
	h.fake.Reset()
	expect(t, h.say("test:s3", "back?"), "reply")
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	expect(t, h.say("test:s4", "down again"), "error")
	if rep := h.admin.take(); len(rep) != 1 {
		t.Fatalf("V4: the next incident after a success was not reported:\n%s", dump(rep))
	}
}

// Known tells channels which conversations exist (adapters.SessionLookup).
func TestRouter_Known(t *testing.T) { testdb.Each(t, testRouter_Known) }

func testRouter_Known(t *testing.T, driver string) {
	h := newHarness(t, driver)
	if h.r.Known(context.Background(), key1) {
		t.Fatal("a session nobody wrote to is known")
	}
	expect(t, h.say(key1, "hello"), "reply")
	if !h.r.Known(context.Background(), key1) || h.r.Known(context.Background(), "test:other") {
		t.Fatal("Known does not follow the stored sessions")
	}
}

// covers B3, N2: after a successful /recover, sessions whose automatic fallback
// was forced by the recovered model go back to it on their very next turn (not at
// their next 5-minute probe), each with the cleared notice; a session on a user
// choice is left alone.
func TestRouter_B3_RecoverBringsFallenBackSessionsBack(t *testing.T) {
	testdb.Each(t, testRouter_B3_RecoverBringsFallenBackSessionsBack)
}

func testRouter_B3_RecoverBringsFallenBackSessionsBack(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
	for _, k := range []string{key1, key2} {
		expect(t, h.say(k, "hello"), "notice,reply")
		if e := h.entry(k); e.ModelOverrideSource != "auto" || e.FallbackOrigin != string(mPrimary) {
			t.Fatalf("setup %s: %+v", k, e)
		}
	}
	expect(t, h.say("test:user-choice", "/model "+mFallback), "reply")
	h.clock.Advance(time.Minute) // far from the 5-minute probe
	h.fake.Reset()               // topped up
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key1, Admin: true, Text: "/recover " + string(mPrimary)})
	if out := expect(t, h.rec.take(), "reply"); !strings.Contains(out[0].Text, "recovered") {
		t.Fatalf("recover: %q", out[0].Text)
	}
	for _, k := range []string{key1, key2} {
		out := expect(t, h.say(k, "are you back?"), "notice,reply")
		if want := notices.Cleared(string(mPrimary), string(mFallback)); out[0].Text != want || out[1].Model != string(mPrimary) {
			t.Fatalf("%s after /recover:%s", k, dump(out))
		}
		if e := h.entry(k); e.ModelOverride != "" || e.ModelOverrideSource != "" {
			t.Fatalf("%s: the auto override stayed: %+v", k, e)
		}
	}
	if out := expect(t, h.say("test:user-choice", "still mine?"), "reply"); out[0].Model != string(mFallback) {
		t.Fatalf("a user's choice moved: %s", out[0].Model)
	}
}

// covers R8, V4: when the idle-timeout breaker stops a turn because every model
// stalls, the admin gets the all-models-unavailable report like any all-down
// incident, and the user is told why.
func TestRouter_R8_BreakerStopSendsTheAdminReport(t *testing.T) {
	testdb.Each(t, testRouter_R8_BreakerStopSendsTheAdminReport)
}

func testRouter_R8_BreakerStopSendsTheAdminReport(t *testing.T, driver string) {
	stall := func(llm.Request) error {
		return &failover.Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true, Message: "stream idle timeout"}
	}
	mem := map[string]*memLLM{}
	for _, p := range []string{"p1", "p2", "p3"} {
		mem[p] = &memLLM{provider: p, fail: stall}
	}
	h := newHarness(t, driver, withMem(mem))
	out := h.say(key1, "hello?")
	last := out[len(out)-1]
	if last.Kind != adapters.KindError || !strings.Contains(last.Text, "stalling") {
		t.Fatalf("user answer:%s", dump(out))
	}
	reports := h.admin.take()
	if len(reports) != 1 || reports[0].Kind != adapters.KindReport || !strings.Contains(reports[0].Text, "all models unavailable") {
		t.Fatalf("admin reports after a breaker stop:%s", dump(reports))
	}
}

// covers B1: a call already paid for is counted even when its turn is cancelled
// (a second SIGTERM cuts the drain short).
func TestRouter_B1_CancelledTurnStillCountsItsPaidCall(t *testing.T) {
	testdb.Each(t, testRouter_B1_CancelledTurnStillCountsItsPaidCall)
}

func testRouter_B1_CancelledTurnStillCountsItsPaidCall(t *testing.T, driver string) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := func(llm.Request) error {
		started <- struct{}{}
		<-release // the provider answers only after the turn was cancelled
		return errors.New("connection reset")
	}
	mem := map[string]*memLLM{"p1": {provider: "p1", fail: block}}
	h := newHarness(t, driver, withMem(mem))
	h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, Text: "hello"})
	<-started
	h.r.Close() // the drain grace ended: running turns are cancelled
	close(release)
	waitFor(t, "the cancelled turn to be recorded", func() bool { return h.entry(key1).PaidCalls == 1 })
}

// covers T5: only listed users, in listed channels, and direct messages only when
// allowed, reach a command or a model; anyone else gets one short refusal (once
// per conversation and hour) and causes no paid call. Admins always pass.
func TestRouter_T5_Access(t *testing.T) { testdb.Each(t, testRouter_T5_Access) }

func testRouter_T5_Access(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) {
		c.Access = Access{Users: []string{"test:friend"}, Channels: []string{"test:team"}, RefuseDirect: true}
		c.AdminUsers = []string{"test:admin"}
	})
	say := func(user, key, text string, direct bool) []adapters.Outbound {
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key, User: user, Text: text, ReplyTo: key, Direct: direct})
		return h.rec.take()
	}
	calls := func() int { return len(h.fake.Calls()) }
	for _, tc := range []struct {
		name, user, key string
		direct          bool
		allowed         bool
	}{
		{"listed user in a listed channel", "test:friend", "test:team:t1", false, true},
		{"stranger", "test:stranger", "test:team:t1", false, false},
		{"listed user elsewhere", "test:friend", "test:other:t1", false, false},
		{"listed user in a DM", "test:friend", "test:team:dm", true, false},
		{"admin anywhere", "test:admin", "test:other:t9", true, true},
	} {
		before := calls()
		out := say(tc.user, tc.key, "hello", tc.direct)
		if tc.allowed {
			if len(out) == 0 || out[len(out)-1].Kind != adapters.KindReply || calls() == before {
				t.Errorf("%s: not answered:%s", tc.name, dump(out))
			}
			continue
		}
		if len(out) != 1 || out[0].Kind != adapters.KindError || !strings.Contains(out[0].Text, "access.users") {
			t.Errorf("%s: want one refusal:%s", tc.name, dump(out))
		}
		if calls() != before {
			t.Errorf("%s: a refused message made %d paid call(s)", tc.name, calls()-before)
		}
		// Commands are refused too; in a shared channel the refusal is not
		// repeated, in a direct conversation every message is answered.
		out = say(tc.user, tc.key, "/model "+mThird, tc.direct)
		if want := map[bool]int{false: 0, true: 1}[tc.direct]; len(out) != want {
			t.Errorf("%s: %d answers to a second refused message, want %d:%s", tc.name, len(out), want, dump(out))
		}
	}
}

// covers R11, O7, E1: right after the primary failed and the session fell back,
// /reset and a new turn: the primary, whose cooldown ends within seconds, is
// probed at once (the failure that started the cooldown is not a probe) with
// the small request, and then answers the conversation.
func TestRouter_R11_ResetThenTurnProbesThePrimary(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver)
		h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529, Times: 1})
		expect(t, h.say(key1, "hello"), "notice,reply")
		expect(t, h.say(key1, "/reset"), "reply")
		h.clock.Advance(5 * time.Second)
		before := h.calls.count("p1")
		out := expect(t, h.say(key1, "and now?"), "reply")
		if out[0].Model != mPrimary || h.calls.count("p1")-before != 2 {
			t.Fatalf("after /reset answered by %s with %d primary call(s), want the check and the answer", out[0].Model, h.calls.count("p1")-before)
		}
		calls := h.fake.Calls()
		if check := calls[len(calls)-2]; check.Provider != "p1" || check.Stream || len(check.Messages) != 1 || check.Messages[0].Text != "ping" {
			t.Fatalf("the call before the answer is %+v, want the small check (E1)", check)
		}
	})
}

// covers R11, M2: billing on both keys of the primary: a new session, a restart
// and a second process on the same database make no call to the disabled keys
// before billing_probe_interval has passed since the billing failure.
func TestRouter_R11_BillingDisabledKeysNotCalledByOthers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, func(c *Config, _ *harness) {
			c.Profiles["p1"] = append(c.Profiles["p1"], failover.Profile{ID: "p1:backup", Provider: "p1", Type: failover.ProfileAPIKey})
		})
		h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402})
		expect(t, h.say(key1, "hello"), "notice,reply")
		if n := h.calls.count("p1"); n != 2 {
			t.Fatalf("setup: %d calls to the primary's keys, want 2 (both billed)", n)
		}
		for _, who := range []*harness{h, h.replica(), h.replica()} {
			h.clock.Advance(2 * time.Second)
			out := who.say("test:new-"+time.Now().Format("150405.000000"), "hi")
			if last := out[len(out)-1]; last.Kind != adapters.KindReply || last.Model == mPrimary {
				t.Fatalf("answer:%s", dump(out))
			}
		}
		if n := h.calls.count("p1"); n != 2 {
			t.Fatalf("%d calls to the billing-disabled keys, want none after the first turn", n-2)
		}
	})
}
