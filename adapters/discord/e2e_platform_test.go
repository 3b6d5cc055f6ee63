package discord_test

// End-to-end tests of Discord's own rules (issue 15, and T3/T5 of issue 12): the
// real discordgo client through the adapter, the real router, engine, store and
// llm client, against the strict fakediscord.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// deadline is Discord's: an interaction's first response within 3 s.
const deadline = 3 * time.Second

// gate is a Sleep that blocks until the test opens it, then advances the shared
// virtual clock by the wait: a rate-limit wait that lasts exactly as long as the
// test needs, with no timer.
type gate struct {
	clock *failovertest.Clock
	open  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	waits []time.Duration
}

func newGate(c *failovertest.Clock) *gate { return &gate{clock: c, open: make(chan struct{})} }

func (g *gate) Sleep(ctx context.Context, d time.Duration) error {
	g.mu.Lock()
	g.waits = append(g.waits, d)
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.clock.Sleep(ctx, d)
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) waiting() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Duration(nil), g.waits...)
}

func (e *world) waitFor(what string, cond func() bool) {
	e.t.Helper()
	if err := fakediscord.WaitFor(wait, cond); err != nil {
		e.t.Fatalf("%s: %v\nlogs:\n%s", what, err, e.logs.String())
	}
}

// response waits for the first interaction callback of id.
func (e *world) response(id string) fakediscord.InteractionResponse {
	e.t.Helper()
	rs, err := e.fake.WaitInteractionResponses(wait, 1, func(r fakediscord.InteractionResponse) bool { return r.InteractionID == id })
	if err != nil {
		e.t.Fatalf("interaction %s: %v\nlogs:\n%s", id, err, e.logs.String())
	}
	return rs[0]
}

// One slow or rate-limited REST call must not delay any slash command, any
// autocomplete, nor another channel: the gateway reader makes no network call,
// interactions are answered from their own goroutine, each channel has its own
// worker, and typing never holds the turn.
func TestE2E_StatusAnsweredWithin3sWhileReplyPostSlowOrRateLimited(t *testing.T) {
	t.Parallel()
	slow := func(e *world, _ *gate) bool { return e.fake.SlowStarted() == 1 }
	tests := []struct {
		name string
		// arm injects the slow call; busy reports that it has started.
		arm  func(e *world, g *gate)
		busy func(e *world, g *gate) bool
		gate bool // rate-limit waits block until the test releases them
		// channel is where the held-up turn is asked; "C9" is a channel the bot
		// has not seen (its mention needs a channel lookup).
		channel string
		// turnHeld: the held-up turn's reply waits for the slow call (a typing
		// indicator never holds a turn).
		turnHeld bool
	}{
		{
			name:    "reply post slow (5 s)",
			arm:     func(e *world, _ *gate) { e.fake.SlowNext("POST /channels/C1/messages", 5*time.Second) },
			busy:    slow,
			channel: "C1", turnHeld: true,
		},
		{
			name:    "reply post rate-limited (5 s)",
			arm:     func(e *world, _ *gate) { e.fake.RateLimitNext("POST /channels/C1/messages", 5*time.Second) },
			busy:    func(_ *world, g *gate) bool { return len(g.waiting()) == 1 },
			gate:    true,
			channel: "C1", turnHeld: true,
		},
		{
			name:    "channel lookup slow (5 s)",
			arm:     func(e *world, _ *gate) { e.fake.SlowNext("GET /channels/C9", 5*time.Second) },
			busy:    slow,
			channel: "C9", turnHeld: true,
		},
		{
			name:    "typing slow (5 s)",
			arm:     func(e *world, _ *gate) { e.fake.SlowNext("POST /channels/C1/typing", 5*time.Second) },
			busy:    slow,
			channel: "C1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var g *gate
			var opts []e2eOpts
			clock := failovertest.NewClock(time.Time{})
			if tc.gate {
				opts = append(opts, e2eOpts{adapter: func(c *discord.Config) {
					g = newGate(clock)
					c.Sleep, c.Now = g.Sleep, clock.Now
				}, fake: func(f *fakediscord.Server) { f.Now = clock.Now }})
			}
			e := newE2E(t, opts...)
			defer e.fake.ReleaseSlow()
			if g != nil {
				defer g.release()
			}
			tc.arm(e, g)
			e.fake.SendMention("G1", tc.channel, "U1", "held up")
			e.waitFor("the slow call to start", func() bool { return tc.busy(e, g) })

			// Under that load: /status where the held-up turn is, /status and a
			// mention elsewhere, autocomplete.
			sameID, _ := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: tc.channel, UserID: "U1", Name: "status"})
			asked := time.Now()
			otherID, otherTok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C2", UserID: "U2", Name: "status"})
			acID, _ := e.fake.SendAutocomplete(fakediscord.Command{GuildID: "G1", ChannelID: tc.channel, UserID: "U1", Name: "model",
				Options: []fakediscord.Option{{Name: "model", Value: "alp", Focused: true}}})
			e.fake.SendMention("G1", "C3", "U3", "another channel")

			for _, id := range []string{sameID, otherID, acID} {
				if r := e.response(id); r.Latency >= deadline {
					t.Errorf("interaction %s answered after %v, past Discord's 3 s", id, r.Latency)
				}
			}
			ans, err := e.fake.WaitMessages(deadline, 1, fakediscord.ForInteraction(otherTok))
			if err != nil || ans[0].Via != "edit-original" || !strings.Contains(ans[0].Content, e2ePrimary) {
				t.Fatalf("/status in another channel not answered within 3 s: %+v, %v", ans, err)
			}
			if d := ans[0].At.Sub(asked); d >= deadline {
				t.Errorf("/status in another channel answered after %v", d)
			}
			if m := e.posts("C3", 1); !strings.Contains(m[0].Content, "you said: another channel") {
				t.Fatalf("C3 reply = %+v", m)
			}
			if !tc.turnHeld {
				if m := e.posts(tc.channel, 1); !strings.Contains(m[0].Content, "you said: held up") {
					t.Fatalf("held-up reply = %+v", m)
				}
				return
			}
			if msgs := e.fake.Messages(); slices.ContainsFunc(msgs, fakediscord.InChannel(tc.channel)) {
				t.Fatalf("the slow call ended before the checks: the test proved nothing")
			}

			// Released, the held-up turn finishes and is answered once.
			e.fake.ReleaseSlow()
			if g != nil {
				g.release()
			}
			if m := e.posts(tc.channel, 1); !strings.Contains(m[0].Content, "you said: held up") {
				t.Fatalf("held-up reply = %+v", m)
			}
		})
	}
}

// A command whose deferral failed has nowhere private to be answered: its
// ephemeral answer is dropped with a log line, never posted in the channel.
func TestE2E_FailedDeferralNeverMakesEphemeralPublic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fake func(*fakediscord.Server)
	}{
		{"deadline missed: 10062 Unknown interaction", func(f *fakediscord.Server) { f.InteractionDeadline = time.Nanosecond }},
		{"callback refused with a 500", func(f *fakediscord.Server) {
			f.FailNext("POST /interactions/{id}/{token}/callback", 500, 0)
			f.FailNext("POST /interactions/{id}/{token}/callback", 500, 0)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			tc.fake(e.fake)
			e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
			e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "UADMIN", Name: "recover",
				Options: []fakediscord.Option{{Name: "target", Value: e2ePrimary}}})
			e.waitFor("both answers dropped", func() bool {
				return strings.Count(e.logs.String(), "interaction answer dropped") == 2
			})
			e.fake.SendMention("G1", "C1", "U1", "sentinel")
			m := e.posts("C1", 1)
			e.Drain()
			if all := e.fake.Messages(); len(all) != 1 || !strings.Contains(m[0].Content, "you said: sentinel") {
				t.Fatalf("messages = %+v, want only the sentinel's reply: an ephemeral answer went public", all)
			}
		})
	}
}

// A global 429 starts one pause that every route waits out (one sleeper, no
// second 429 anywhere), while interaction endpoints, which Discord exempts, go on,
// and typing indicators are dropped rather than queued (L1: progress never waits).
func TestE2E_GlobalRateLimitPausesEveryRouteOnce(t *testing.T) {
	t.Parallel()
	clock := failovertest.NewClock(e2e0)
	g := newGate(clock)
	e := newE2E(t, e2eOpts{
		adapter: func(c *discord.Config) { c.Sleep, c.Now = g.Sleep, clock.Now },
		fake:    func(f *fakediscord.Server) { f.Now = clock.Now },
	})
	defer g.release()
	for _, ch := range []string{"C1", "C2", "C3"} { // the bot has looked these channels up
		e.fake.SendMention("G1", ch, "U1", "warm up")
		e.posts(ch, 1)
	}
	e.Drain()
	// Answers take a moment, so the typing indicator's call is the only one in
	// flight when the global 429 comes (a call already on its way would get one
	// too, on Discord as here).
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Delay: time.Second})
	e.fake.GlobalRateLimitNext(5 * time.Second)
	e.fake.SendMention("G1", "C1", "U1", "one")
	// The typing call that got the 429 is dropped; C1's reply post waits.
	e.waitFor("the global 429 and its pause", func() bool { return len(g.waiting()) == 1 })
	e.fake.SendMention("G1", "C2", "U2", "two")
	e.fake.SendMention("G1", "C3", "U3", "three")
	// C2's and C3's reply posts wait for the pause; their typing is dropped.
	e.waitFor("every reply waiting", func() bool {
		return strings.Count(e.logs.String(), "waits for the global rate limit") >= 2
	})
	e.waitFor("typing dropped in C2 and C3", func() bool {
		logs := e.logs.String()
		return strings.Count(logs, "typing not shown") >= 3 && strings.Contains(logs, "dropped")
	})
	// Interactions are not bound to the global limit.
	id, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C4", UserID: "U4", Name: "status"})
	if r := e.response(id); r.Latency >= deadline {
		t.Errorf("deferral waited for the global pause: %v", r.Latency)
	}
	if _, err := e.fake.WaitMessages(wait, 1, fakediscord.ForInteraction(tok)); err != nil {
		t.Fatalf("/status answer waited for the global pause: %v", err)
	}
	released := time.Now()
	g.release()
	for _, c := range []struct{ ch, text string }{{"C1", "one"}, {"C2", "two"}, {"C3", "three"}} {
		if m := e.posts(c.ch, 2); !strings.Contains(m[1].Content, "you said: "+c.text) {
			t.Fatalf("%s reply = %+v", c.ch, m)
		}
	}
	if n := e.fake.RateLimited(); n != 1 {
		t.Errorf("%d 429s, want the one global 429 only: %+v\n%s", n, e.fake.Requests(), e.logs.String())
	}
	if n := e.fake.InvalidRequests(); n != 1 {
		t.Errorf("%d invalid requests, want 1", n)
	}
	if w := g.waiting(); !slices.Equal(w, []time.Duration{5 * time.Second}) {
		t.Errorf("waits = %v, want one pause of 5s for every route\n%s", w, e.logs.String())
	}
	limited := false
	for _, r := range e.fake.Requests() {
		if r.Status == 429 {
			limited = true
			continue
		}
		if limited && strings.HasPrefix(r.Path, "/channels/") && r.At.Before(released) {
			t.Errorf("%s %s went out during the global pause", r.Method, r.Path)
		}
	}
}

// Sessions that Discord keeps invalidating right after READY: the bot backs off
// (with jitter) and never identifies past the day's budget from GET /gateway/bot;
// it waits for the reset instead. Time is virtual.
func TestE2E_RepeatedSessionLossBacksOffWithinIdentifyBudget(t *testing.T) {
	t.Parallel()
	e := newE2E(t, e2eOpts{noWait: true, fake: func(f *fakediscord.Server) {
		f.SessionStartTotal, f.SessionStartReset = 3, time.Hour
		f.InvalidateAfterReady = 5
	}})
	if err := e.fake.WaitConnected(wait, 6, 0); err != nil {
		t.Fatalf("%v\nlogs:\n%s", err, e.logs.String())
	}
	if n := e.fake.OverIdentifies(); n != 0 {
		t.Fatalf("%d identifies past the budget (each gets the token reset)", n)
	}
	if n := len(e.fake.Identifies()); n != 6 {
		t.Fatalf("%d identifies, want 6", n)
	}
	var backoff []time.Duration
	resetWait := false
	for _, d := range e.sleeps.Sleeps() {
		if d > 50*time.Minute {
			resetWait = true // the budget's reset_after
			continue
		}
		backoff = append(backoff, d)
	}
	if !resetWait {
		t.Errorf("no wait for the identify budget's reset: sleeps %v", e.sleeps.Sleeps())
	}
	if len(backoff) != 5 {
		t.Fatalf("waits between identifies = %v, want 5", backoff)
	}
	for i, d := range backoff {
		if d < time.Second {
			t.Errorf("identify %d after %v: op 9 asks for 1-5 s, identifies are one per 5 s", i+2, d)
		}
		if i > 0 && d < backoff[i-1] {
			t.Errorf("backoff shrank: %v", backoff)
		}
	}
	if last := backoff[len(backoff)-1]; last <= 5*time.Second {
		t.Errorf("backoff did not grow past the fixed waits: %v", backoff)
	}
	e.fake.SendMention("G1", "C1", "U1", "still here?")
	e.posts("C1", 1)
}

// e2e0 is the virtual start of tests that bring their own clock.
var e2e0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// A connection whose heartbeats go unacknowledged is a zombie: it is closed with
// 4000 (not 1000, which would end the session) and resumed on
// resume_gateway_url, and the events sent meanwhile arrive, each once.
func TestE2E_HeartbeatMissResumesWithoutLosingQueuedEvents(t *testing.T) {
	t.Parallel()
	// 500 ms, not less: a loaded -race run must not miss a real ACK and
	// reconnect on its own before the test makes the connection a zombie.
	e := newE2E(t, e2eOpts{fake: func(f *fakediscord.Server) { f.HeartbeatInterval = 500 * time.Millisecond }})
	e.fake.SendMention("G1", "C1", "U1", "before")
	e.posts("C1", 1)
	if err := fakediscord.WaitFor(wait, func() bool { return e.fake.StopAcking() == nil }); err != nil {
		t.Fatal(err)
	}
	e.fake.SendMention("G1", "C1", "U1", "during one")
	e.fake.SendMention("G1", "C2", "U2", "during two")
	if err := e.fake.WaitConnected(wait, 1, 1); err != nil {
		t.Fatalf("no resume: %v\nlogs:\n%s", err, e.logs.String())
	}
	if m, err := e.fake.WaitMessages(wait, 2, fakediscord.InChannel("C1")); err != nil || !strings.Contains(m[1].Content, "you said: during one") {
		t.Fatalf("C1 = %+v, %v\nlogs:\n%s", m, err, e.logs.String())
	}
	if m := e.posts("C1", 2); !strings.Contains(m[1].Content, "you said: during one") {
		t.Fatalf("C1 = %+v", m)
	}
	if m := e.posts("C2", 1); !strings.Contains(m[0].Content, "you said: during two") {
		t.Fatalf("C2 = %+v", m)
	}
	e.fake.SendMention("G1", "C1", "U1", "after")
	if m := e.posts("C1", 3); len(m) != 3 || !strings.Contains(m[2].Content, "you said: after") {
		t.Fatalf("C1 = %+v (an event delivered twice?)", m)
	}
	if got := e.fake.Closes(); !slices.Equal(got, []int{4000}) {
		t.Errorf("client close codes = %v, want [4000]", got)
	}
	if got := e.fake.ResumePaths(); !slices.Equal(got, []string{"/gw-resume/"}) {
		t.Errorf("resumed on %v, want resume_gateway_url", got)
	}
	if n := len(e.fake.Identifies()); n != 1 {
		t.Errorf("%d identifies, want 1 (resumed)", n)
	}
}

// covers T3: model output full of mentions pings nobody, in replies (split or
// not), DMs and interaction answers; replies reference the asking message
// without pinging its author.
func TestE2E_T3_NoLiveMentionFromHostileModelOutput(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	hostile := "@everyone @here <@&123> <@123> <@!456> look"
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Reply: hostile, Times: 1})
	asked := e.fake.SendMention("G1", "C1", "U1", "ping them all")
	c1 := e.posts("C1", 1)                                                                  // before the next rule: channels run in parallel
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Reply: strings.Repeat(hostile+" ", 80)}) // > 2000 chars
	e.fake.SendMention("G1", "C2", "U1", "long")
	e.fake.SendDM("D1", "U1", "in private")
	_, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model",
		Options: []fakediscord.Option{{Name: "model", Value: "@everyone <@&1>"}}})

	if c1[0].Reference != asked || c1[0].FailIfNotExists == nil || *c1[0].FailIfNotExists || c1[0].RepliedUser {
		t.Errorf("reply = %+v, want a reference to %s with fail_if_not_exists false and no reply ping", c1[0], asked)
	}
	if n := len(e.posts("C2", 2)); n < 2 {
		t.Fatalf("long reply not split: %d", n)
	}
	e.posts("D1", 1)
	if _, err := e.fake.WaitMessages(wait, 1, fakediscord.ForInteraction(tok)); err != nil {
		t.Fatal(err)
	}
	e.Drain()
	for _, m := range e.fake.Messages() {
		if len(m.LiveMentions) > 0 {
			t.Errorf("%s message %q pings %v", m.Via, m.Content, m.LiveMentions)
		}
		if m.AllowedMentionsParse == nil || len(*m.AllowedMentionsParse) != 0 {
			t.Errorf("%s message without empty allowed_mentions: %v", m.Via, m.AllowedMentionsParse)
		}
	}
	if !strings.Contains(c1[0].Content, hostile) {
		t.Fatalf("reply %q: the hostile text was not posted, so the test proves nothing", c1[0].Content)
	}
}

// BenchmarkE2E_SlowCallIsolation: one reply post held for the whole run (as a
// slow or rate-limited REST call would be) must not delay another channel's reply
// nor any interaction. Each op is a mention in one of four other channels plus a
// /status; the metrics are the worst latencies seen, next to a run with nothing
// held.
func BenchmarkE2E_SlowCallIsolation(b *testing.B) {
	for _, v := range []struct{ name, route string }{
		{"nothing held", ""},
		{"one reply post held", "POST /channels/CSLOW/messages"},
		{"one channel lookup held", "GET /channels/CSLOW"},
	} {
		held := v.route != ""
		b.Run(v.name, func(b *testing.B) {
			e := newE2E(b)
			defer e.fake.ReleaseSlow()
			channels := []string{"C1", "C2", "C3", "C4"}
			for _, ch := range channels { // warm up: channel lookups done
				e.fake.SendMention("G1", ch, "U1", "warm up")
				e.posts(ch, 1)
			}
			if held {
				e.fake.SlowNext(v.route, time.Minute)
				e.fake.SendMention("G1", "CSLOW", "U1", "held")
				e.waitFor("the held call", func() bool { return e.fake.SlowStarted() == 1 })
			}
			count := map[string]int{"C1": 1, "C2": 1, "C3": 1, "C4": 1}
			var worstReply, worstDefer, worstStatus time.Duration
			for i := 0; b.Loop(); i++ {
				ch := channels[i%len(channels)]
				began := time.Now()
				e.fake.SendMention("G1", ch, "U1", "hello")
				id, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: channels[(i+1)%len(channels)], UserID: "U2", Name: "status"})
				count[ch]++
				e.posts(ch, count[ch])
				worstReply = max(worstReply, time.Since(began))
				worstDefer = max(worstDefer, e.response(id).Latency)
				if _, err := e.fake.WaitMessages(wait, 1, fakediscord.ForInteraction(tok)); err != nil {
					b.Fatal(err)
				}
				worstStatus = max(worstStatus, time.Since(began))
			}
			b.ReportMetric(float64(worstReply.Microseconds())/1000, "reply-max-ms")
			b.ReportMetric(float64(worstDefer.Microseconds())/1000, "deferral-max-ms")
			b.ReportMetric(float64(worstStatus.Microseconds())/1000, "status-max-ms")
			if held && e.fake.Held() != 1 {
				b.Fatal("the held call ended during the run: the benchmark proved nothing")
			}
			if worstReply >= deadline || worstDefer >= deadline || worstStatus >= deadline {
				b.Fatalf("a reply or interaction took past 3 s: reply %v, deferral %v, status %v", worstReply, worstDefer, worstStatus)
			}
		})
	}
}
