package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// Posts to one channel keep one per second; another channel is not held back; a
// 429 pauses every channel for its Retry-After; the post waits through any number
// of 429s and is delivered once.
func TestSend_PacedPerChannelPausedWorkspaceWideOn429(t *testing.T) {
	h := start(t, nil)
	send := func(channel, text string) {
		t.Helper()
		h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: channel + "|1.000001", Text: text})
	}
	t0 := h.clock.Now()
	send("C1", "a")
	send("C1", "b")
	send("C2", "c")
	send("C1", "d")
	ps := h.srv.Posts()
	at := map[string]time.Duration{}
	for _, p := range ps {
		at[p.Text] = p.At.Sub(t0)
	}
	if at["a"] != 0 || at["b"] != time.Second || at["c"] != time.Second || at["d"] != 2*time.Second {
		t.Fatalf("post times %v, want a 0s, b 1s, c at once (1s), d 2s", at)
	}
	if len(h.srv.Throttles()) != 0 {
		t.Fatalf("throttles %+v", h.srv.Throttles())
	}

	// Ten 429s in a row on C3: the message waits them all out and lands once;
	// meanwhile C4 (another channel) waits for the same pause.
	for range 10 {
		h.srv.RateLimitNext("chat.postMessage", 5)
	}
	before := h.clock.Now()
	send("C3", "patient")
	if got := countPosts(h.srv.Posts(), "patient"); got != 1 {
		t.Fatalf("delivered %d times", got)
	}
	if waited := h.clock.Now().Sub(before); waited < 50*time.Second {
		t.Fatalf("waited %v for ten 5s Retry-Afters", waited)
	}
}

// A 429's pause holds every channel, not only the one that got it; a channel's
// own pace holds only that channel.
func TestPacer_PauseIsWorkspaceWidePaceIsPerChannel(t *testing.T) {
	clock := failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	p := newPacer(time.Second, live.NewPauses(clock.Now, clock.Sleep))
	ctx := context.Background()
	c1, err := p.acquire(ctx, "C1")
	if err != nil {
		t.Fatal(err)
	}
	p.posted(c1)
	p.Pause("chat.postMessage", 7*time.Second)
	p.release(c1)
	c2, _ := p.acquire(ctx, "C2")
	start := clock.Now()
	if err := p.wait(ctx, "chat.postMessage", c2); err != nil {
		t.Fatal(err)
	}
	if waited := clock.Now().Sub(start); waited != 7*time.Second {
		t.Fatalf("C2 waited %v, want the 7s pause", waited)
	}
	start = clock.Now()
	if err := p.wait(ctx, "chat.postEphemeral", nil); err != nil || clock.Now() != start {
		t.Fatalf("another method waited %v (%v)", clock.Now().Sub(start), err)
	}
	p.posted(c2)
	p.release(c2)
	c1, _ = p.acquire(ctx, "C1")
	start = clock.Now()
	_ = p.wait(ctx, "chat.postMessage", c1)
	if waited := clock.Now().Sub(start); waited != 0 {
		t.Fatalf("C1 waited %v for C2's pace", waited)
	}
	p.posted(c1)
	_ = p.wait(ctx, "chat.postMessage", c1)
	if waited := clock.Now().Sub(start); waited != time.Second {
		t.Fatalf("C1's second post waited %v, want 1s", waited)
	}
	p.release(c1)
	// A cancelled wait for a busy channel's turn gives up.
	busy, _ := p.acquire(ctx, "C3")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.acquire(cctx, "C3"); err == nil {
		t.Fatal("acquired a busy lane")
	}
	p.release(busy)
}

func countPosts(ps []fakeslack.Post, text string) int {
	n := 0
	for _, p := range ps {
		if p.Text == text {
			n++
		}
	}
	return n
}

// A notice is sent as a verbatim block, so names in it never become mentions.
// covers T3
func TestNotice_T3_EscapedAndVerbatim(t *testing.T) {
	h := start(t, nil)
	h.send(adapters.Outbound{Kind: adapters.KindNotice, ReplyTo: "C1|1.000001", Text: "↪️ model fallback: <!here>/x @channel"})
	p, err := h.srv.WaitPost(wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Mentions) != 0 || !strings.Contains(p.Shown(), "!here") {
		t.Fatalf("notice %q mentions %v", p.Shown(), p.Mentions)
	}
	var blocks []struct {
		Elements []struct {
			Verbatim bool `json:"verbatim"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(p.Blocks, &blocks); err != nil || len(blocks) != 1 || !blocks[0].Elements[0].Verbatim {
		t.Fatalf("blocks %s (%v)", p.Blocks, err)
	}
}

// Every Inbound names its message: the app_mention and its message twin, delivered
// to two sockets (two replicas, no shared memory), carry the same EventID, which
// is what the router's durable de-duplication (M3) keys on. A slash command is
// named by its trigger.
func TestInbound_M3_SameEventIDForEveryDeliveryOfAMessage(t *testing.T) {
	srv := fakeslack.New()
	srv.Start()
	defer srv.Close()
	var inboxes []chan adapters.Inbound
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	for range 2 {
		a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: srv.URL(), PingInterval: 2 * time.Second,
			Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		in := make(chan adapters.Inbound, 8)
		inboxes = append(inboxes, in)
		wg.Go(func() { _ = a.Run(ctx, in) })
	}
	if err := srv.WaitOpen(2, wait); err != nil {
		t.Fatal(err)
	}
	m := srv.Mention("C1", "U1", "twice", "") // app_mention to one socket, its twin to the other
	var got []adapters.Inbound
	for _, in := range inboxes {
		select {
		case x := <-in:
			got = append(got, x)
		case <-time.After(wait):
			t.Fatal("a socket got nothing")
		}
	}
	want := "slack:msg:C1:" + m.TS
	if got[0].EventID != want || got[1].EventID != want || got[0].SessionKey != got[1].SessionKey {
		t.Fatalf("inbounds %+v / %+v, want EventID %s on both", got[0], got[1], want)
	}
	s := srv.Slash("/status", "", "C1", "U1")
	for {
		select {
		case x := <-inboxes[0]:
			if x.EventID != "slack:cmd:"+s.TriggerID {
				t.Fatalf("slash EventID %q", x.EventID)
			}
			return
		case x := <-inboxes[1]:
			if x.EventID != "slack:cmd:"+s.TriggerID {
				t.Fatalf("slash EventID %q", x.EventID)
			}
			return
		case <-time.After(wait):
			t.Fatal("no slash inbound")
		}
	}
}

// A slash command in a channel says it sets what new threads use; in a DM it is
// the conversation itself.
func TestSlash_DefaultsForChannelNotForDM(t *testing.T) {
	h := start(t, nil)
	h.srv.Slash("/model", "p/x", "C1", "U1")
	if in := h.recv(); in.DefaultsFor != "new threads in #general" || in.SessionKey != "slack:T1:C1" {
		t.Fatalf("channel inbound %+v", in)
	}
	h.srv.Slash("/model", "p/x", "D1", "U1")
	if in := h.recv(); in.DefaultsFor != "" || !in.Direct {
		t.Fatalf("DM inbound %+v", in)
	}
	for name, want := range map[string]string{"general": "#general", "": "this channel", "privategroup": "this channel",
		"a<b": "this channel"} {
		if got := channelLabel(name); got != want {
			t.Errorf("channelLabel(%q) = %q, want %q", name, got, want)
		}
	}
}

// Mention-only mode: mentions and DMs are read, plain channel messages (even in a
// thread the bot is in) are not, and a workspace still sending them gets one
// warning to fix the subscriptions.
func TestMentionsOnly_ReadsMentionsAndDMs(t *testing.T) {
	h := start(t, func(c *Config) { c.MentionsOnly = true })
	m := h.srv.Mention("C1", "U1", "hello", "") // the fake also sends the message twin
	if in := h.recv(); in.Text != "hello" {
		t.Fatalf("inbound %+v", in)
	}
	h.srv.ThreadMessage("C1", "U1", "follow-up without mention", m.TS)
	h.srv.ThreadMessage("C1", "U1", "another", m.TS)
	h.srv.Mention("C1", "U1", "follow-up with mention", m.TS)
	if in := h.recv(); in.Text != "follow-up with mention" {
		t.Fatalf("inbound %+v", in)
	}
	h.expectNothingBefore("marker-mentions") // a DM
	if n := strings.Count(h.logs.String(), "sends channel message events although"); n != 1 {
		t.Fatalf("warning logged %d times, want once", n)
	}
}

// app_rate_limited is acknowledged and logged, once per minute Slack names.
func TestAppRateLimited_LoggedOncePerMinute(t *testing.T) {
	h := start(t, nil)
	a := h.srv.AppRateLimited()
	b := h.srv.AppRateLimited()
	for _, s := range []fakeslack.Sent{a, b} {
		if _, err := h.srv.WaitAck(s.EnvelopeID, wait); err != nil {
			t.Fatal(err)
		}
	}
	h.expectNothingBefore("marker-limited")
	if n := strings.Count(h.logs.String(), "slack is dropping this app's events"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, h.logs)
	}
	h.clock.Advance(time.Minute)
	c := h.srv.AppRateLimited()
	if _, err := h.srv.WaitAck(c.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	h.expectNothingBefore("marker-limited-2")
	if n := strings.Count(h.logs.String(), "slack is dropping this app's events"); n != 2 {
		t.Fatalf("a new minute was not logged (%d)", n)
	}
}

// Each disconnect reason: "warning" and "refresh_requested" are followed by a new
// link at once; after "link_disabled" the adapter keeps retrying (connection
// errors, slack-go's backoff) and is back once Socket Mode is on again.
func TestDisconnectReasons_Reconnect(t *testing.T) {
	for _, reason := range []string{"warning", "refresh_requested"} {
		t.Run(reason, func(t *testing.T) {
			h := start(t, nil)
			if err := h.srv.SendDisconnect(reason); err != nil {
				t.Fatal(err)
			}
			if err := h.srv.WaitConnected(2, wait); err != nil {
				t.Fatal(err)
			}
			h.srv.Mention("C1", "U1", "after "+reason, "")
			if in := h.recv(); in.Text != "after "+reason {
				t.Fatalf("inbound %+v", in)
			}
		})
	}
	t.Run("link_disabled", func(t *testing.T) {
		h := start(t, nil)
		if err := h.srv.SendDisconnect("link_disabled"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wait)
		for strings.Count(h.logs.String(), "slack socket mode connection error") < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("no retried connection errors:\n%s", h.logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		h.srv.EnableLink()
		if err := h.srv.WaitConnected(2, wait); err != nil {
			t.Fatal(err)
		}
	})
}

// too_many_websockets: an app already has all its sockets, and a link that is
// closed as soon as it opens is redialed with a growing wait, not in a tight loop;
// once a socket frees up, the adapter gets in.
func TestDisconnectReasons_TooManyWebsocketsBacksOff(t *testing.T) {
	srv := fakeslack.New()
	srv.MaxSockets = 1
	srv.Start()
	defer srv.Close()
	run := func(cfg Config) (stop func()) {
		cfg.AppToken, cfg.BotToken, cfg.APIURL, cfg.PingInterval = canaryApp, canaryBot, srv.URL(), 2*time.Second
		cfg.Log = slog.New(slog.DiscardHandler)
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, make(chan adapters.Inbound, 8)) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}
	stopFirst := run(Config{}) // holds the app's only socket
	if err := srv.WaitOpen(1, wait); err != nil {
		t.Fatal(err)
	}

	clock := failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var waits []time.Duration
	stopSecond := run(Config{Now: clock.Now, Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		// A token real wait keeps the loop from spinning; the virtual clock
		// records what production would wait.
		t := time.NewTimer(20 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return clock.Sleep(ctx, d)
	}})
	defer stopSecond()
	deadline := time.Now().Add(wait)
	for srv.Refused() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("refused only %d times", srv.Refused())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	got := append([]time.Duration(nil), waits...)
	mu.Unlock()
	if len(got) < 3 || got[0] != time.Second || got[1] != 2*time.Second || got[2] != 4*time.Second {
		t.Fatalf("waits %v, want 1s, 2s, 4s, ...", got)
	}
	if refused := srv.Refused(); refused > len(got)+3 {
		t.Fatalf("%d refused dials for %d waits: redialing without waiting", refused, len(got))
	}
	stopFirst() // a socket frees up: the second adapter gets in
	if err := srv.WaitConnected(2, wait); err != nil {
		t.Fatal(err)
	}
}

// Every envelope is acknowledged at once even when the work queue is full: the
// events that find no room are answered "busy" where they were sent, never left
// unacknowledged (Slack would redeliver them, and disable an app whose events
// keep failing).
func TestAck_QueueFullStillAcksAndAnswersBusy(t *testing.T) {
	srv := fakeslack.New()
	srv.AppToken, srv.BotToken = canaryApp, canaryBot
	srv.Start()
	defer srv.Close()
	a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: srv.URL(), PingInterval: 2 * time.Second,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a.queue = 1
	inbox := make(chan adapters.Inbound) // nobody reads: the dispatcher holds one event, the queue one more
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, inbox) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := srv.WaitConnected(1, wait); err != nil {
		t.Fatal(err)
	}
	var sent []fakeslack.Sent
	for _, ch := range []string{"D1", "D2", "D3", "D4", "D5"} {
		sent = append(sent, srv.DM(ch, "U1", "hello"))
	}
	sent = append(sent, srv.Slash("/detour-status", "", "C1", "U1"))
	for _, s := range sent {
		if _, err := srv.WaitAck(s.EnvelopeID, wait); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := srv.WaitPosts(3, wait)
	if err != nil {
		t.Fatalf("busy answers: %v", err)
	}
	for _, p := range busy {
		if !strings.Contains(p.Text, "too busy") || !strings.HasPrefix(p.Channel, "D") {
			t.Fatalf("post %+v, want a busy answer in the DM it answers", p)
		}
	}
	ack, _ := srv.WaitAck(sent[len(sent)-1].EnvelopeID, wait)
	if !strings.Contains(string(ack.Payload), "too busy") {
		t.Fatalf("the slash command's ack = %s, want the busy answer", ack.Payload)
	}
	if r := srv.Retried(); r != 0 {
		t.Fatalf("%d envelopes redelivered", r)
	}
}

// The wait after links that keep closing comes before apps.connections.open,
// never between it and the dial: the URL Slack hands out is a short-lived ticket.
func TestLinkWait_BeforeOpeningNeverAfter(t *testing.T) {
	h := start(t, nil)
	for range 4 { // links that close at once: waits grow
		n := h.srv.Connects() // before the disconnect: the next link may be up before it returns
		if err := h.srv.SendDisconnect("too_many_websockets"); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.WaitConnected(n+1, wait); err != nil {
			t.Fatal(err)
		}
	}
	opens, connects := h.srv.CallsOf("apps.connections.open"), h.srv.ConnectTimes()
	if len(h.sleepsSoFar()) == 0 {
		t.Fatal("no wait between links that kept closing")
	}
	for i, at := range connects {
		if i >= len(opens) || !at.Equal(opens[i].At) {
			t.Fatalf("link %d dialled at %v, its URL issued at %v: a wait fell between them", i+1, at, opens[min(i, len(opens)-1)].At)
		}
	}
}
