package slack_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/sessions"
)

// Canary secrets: they must never show up in logs, posts or errors (covers P4).
const (
	e2eApp = "xapp-CANARY-app-e2e-7f3a9"
	e2eBot = "xoxb-CANARY-bot-e2e-51c2e"
)

var e2eKeys = map[string]string{
	"p1:main": "sk-CANARY-p1main-e2e-000000",
	"p2:main": "sk-CANARY-p2main-e2e-000000",
	"p3:main": "sk-CANARY-p3main-e2e-000000",
}

const wait = e2e.Wait

// world is a whole detour started through internal/app (the real router, failover
// engine, SQLite store and llm client against the fake provider) with the real
// slack-go Socket Mode client, through the adapter, against fakeslack.
type world struct {
	*e2e.World
	t     testing.TB
	slack *fakeslack.Server
	llm   *fakeprovider.Server
	clock *failovertest.Clock
	// sleeps is the adapters' and the fake Slack's clock: the adapters' waits
	// (posting pace, Retry-After, redial) advance it at once and are recorded. It
	// is not the engine's clock, so Slack's waits never age a cooldown.
	sleeps   *failovertest.Clock
	adapters []*slack.Adapter
	logs     *e2e.SyncBuffer
}

// setup is what a test may change before the world starts.
type setup struct {
	fake     *fakeslack.Server
	config   slack.Config // template of every adapter
	replicas int          // adapters (sockets) on the one app; default 1
	yaml     string       // configuration added to the world's (top-level keys)
	// live turns on streaming and progress (channels.slack.stream, .progress,
	// the defaults); without it the world posts every answer whole, as the
	// tests written before live replies expect.
	live bool
	// channels adds to the channels section of the configuration.
	channels string
	// realClock makes the adapters and the fake Slack run on the wall clock.
	realClock bool
	// primary and fallbacks replace the default chain p1/alpha → p2/beta → p3/gamma.
	primary   string
	fallbacks []string
	// idle is the idle stream timeout (default 2 s).
	idle time.Duration
	// wrapLLM wraps the fake provider's handler.
	wrapLLM func(http.Handler) http.Handler
	// admins fill admin.users (a channel-wide /model needs one, T9).
	admins []string
}

// asAdmin makes U1 an admin: only admins set a channel's model (T9).
func asAdmin(st *setup) { st.admins = []string{"slack:U1"} }

func startE2E(t testing.TB, mods ...func(*setup)) *world {
	t.Helper()
	e := &world{t: t, sleeps: failovertest.NewClock(e2e.T0), logs: &e2e.SyncBuffer{}}
	e.slack = fakeslack.New()
	e.slack.AppToken, e.slack.BotToken = e2eApp, e2eBot
	e.slack.EchoPosts = true // Slack echoes the bot's own posts; they must be ignored
	e.slack.Now = e.sleeps.Now
	// The app as slack-manifest.yaml installs it: its scopes and events only.
	manifest, err := os.ReadFile(filepath.Join("..", "..", "slack-manifest.yaml"))
	if err == nil {
		err = e.slack.InstallManifest(manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := &setup{fake: e.slack, replicas: 1, config: slack.Config{
		AppToken: e2eApp, BotToken: e2eBot, HTTPTimeout: 3 * time.Second,
		PingInterval: 2 * time.Second, Log: e2e.Logger(e.logs),
		Now: e.sleeps.Now, Sleep: e.sleeps.Sleep,
	}}
	for _, m := range mods {
		m(st)
	}
	if st.realClock {
		e.slack.Now = time.Now
		st.config.Now, st.config.Sleep = time.Now, nil
	}
	e.slack.Start()
	t.Cleanup(func() {
		e.slack.Close()
		for _, p := range e.slack.Posts() {
			if strings.Contains(p.Text+string(p.Blocks), "CANARY") {
				t.Errorf("P4: a secret reached Slack: %+v", p)
			}
			if len(p.Mentions) > 0 {
				t.Errorf("T3: a post pings %v: %q", p.Mentions, p.Text)
			}
		}
	})
	st.config.APIURL = e.slack.URL()
	var extra []adapters.Adapter
	for i := range st.replicas {
		a, err := slack.New(st.config)
		if err != nil {
			t.Fatal(err)
		}
		e.adapters = append(e.adapters, a)
		if i > 0 {
			extra = append(extra, a)
		}
	}
	channels := st.channels
	if !st.live {
		channels = strings.TrimPrefix(channels+", slack: {stream: false, progress: false}", ", ")
	}
	if st.primary == "" {
		st.primary, st.fallbacks = "p1/alpha", []string{"p2/beta", "p3/gamma"}
	}
	if st.idle == 0 {
		st.idle = 2 * time.Second
	}
	e.World = e2e.Start(t, e2e.Spec{
		Primary: st.primary, Fallbacks: st.fallbacks,
		Keys: e2eKeys, AdminChannel: "slack:C0ADMIN", AdminUsers: st.admins, Idle: st.idle,
		Adapter: e.adapters[0], Extra: extra, Secrets: []string{e2eApp, e2eBot}, Logs: e.logs,
		Channels: channels, WrapLLM: st.wrapLLM, ExtraYAML: st.yaml,
	})
	e.llm, e.clock = e.LLM, e.Clock
	if err := e.slack.WaitOpen(st.replicas, wait); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *world) thread(channel, ts string) []fakeslack.Post { return e.slack.Thread(channel, ts) }

// waitThread waits until channel/thread has n posts, then until the router is idle,
// and returns the thread's posts.
func (e *world) waitThread(channel, ts string, n int) []fakeslack.Post {
	e.t.Helper()
	ps, err := e.slack.WaitThread(channel, ts, n, wait)
	if err != nil {
		e.t.Fatalf("%v:%s", err, describe(ps))
	}
	e.drain()
	return e.thread(channel, ts)
}

func (e *world) drain() { e.Drain() }

func (e *world) entry(key string) sessions.Entry { return e.Entry(key) }

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
	return strings.Contains(string(p.Blocks), `"context"`) && strings.HasPrefix(p.Shown(), "↪️")
}

// covers N1, N3, N4, N5, S3, S4, V4 through Slack
func TestE2E_SlackThreadFallbackCommandsAndReliability(t *testing.T) {
	e := startE2E(t, asAdmin)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeInsufficientQuota})

	// 1. Mention: answered in the mention's thread; the fallback notice is its own
	//    (context block) message, posted before the reply (N1, N4).
	m := e.slack.Mention("C1", "U1", "hello there", "")
	ps := e.waitThread("C1", m.TS, 2)
	if len(ps) != 2 || !isNotice(ps[0]) || !strings.Contains(ps[0].Shown(), "model fallback: p2/beta") ||
		!strings.Contains(ps[0].Shown(), "p1/alpha") {
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

	// 4. /model as a native slash command sets the channel's default for new
	//    threads (stored on the channel's session) and is answered ephemerally;
	//    "!model" in the thread applies to the thread (S4).
	s := e.slack.Slash("/model", "p3/gamma", "C1", "U1")
	if _, err := e.slack.WaitAck(s.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	eph, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral })
	if err != nil {
		t.Fatal(err)
	}
	if eph.Channel != "C1" || eph.User != "U1" || !strings.HasPrefix(eph.Text, "new threads in #general will use p3/gamma") {
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
	before := len(e.sleeps.Sleeps())
	e.slack.RateLimitNext("chat.postMessage", 2)
	m5 := e.slack.Mention("C5", "U1", "despite the rate limit", "")
	ps = e.waitThread("C5", m5.TS, 1)
	if replies := countText(ps, "despite the rate limit"); replies != 1 {
		t.Fatalf("reply delivered %d times:%s", replies, describe(ps))
	}
	if got := e.slack.Calls("chat.postMessage") - calls; got != len(ps)+1 {
		t.Fatalf("chat.postMessage calls = %d for %d posts, want one extra (the 429)", got, len(ps))
	}
	if sleeps := e.sleeps.Sleeps()[before:]; len(sleeps) == 0 || sleeps[0] != 2*time.Second {
		t.Fatalf("waits after the 429 = %v, want the 2s Retry-After first", sleeps)
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

// history returns the contents of a session's stored conversation, oldest first.
func (e *world) history(key string) []string {
	e.t.Helper()
	var ms []sessions.Message
	if err := e.Sys.DB.Where("session_key = ?", key).Order("id").Find(&ms).Error; err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}
