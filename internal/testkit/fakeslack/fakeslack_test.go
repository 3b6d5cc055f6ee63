package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(s *Server) *slack.Client {
	return slack.New("xoxb-test", slack.OptionAPIURL(s.URL()), slack.OptionAppLevelToken("xapp-test"))
}

func TestWebAPI_RecordsPostsAndInjectsFaults(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()

	at, err := api.AuthTestContext(ctx)
	if err != nil || at.UserID != DefaultBotUserID || at.TeamID != DefaultTeamID || at.BotID != DefaultBotID {
		t.Fatalf("auth.test = %+v, %v", at, err)
	}
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false), slack.MsgOptionTS("1.1"))
	if err != nil || ts == "" {
		t.Fatalf("post: %v", err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("psst", false)); err != nil {
		t.Fatal(err)
	}
	s.RateLimitNext("chat.postMessage", 3)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("want RateLimitedError(3s), got %v", err)
	}
	s.FailNext("chat.postMessage", "channel_not_found")
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "channel_not_found" {
		t.Fatalf("want channel_not_found, got %v", err)
	}
	posts := s.Posts()
	if len(posts) != 2 || posts[0].ThreadTS != "1.1" || posts[0].Text != "hi" || posts[0].Token != "xoxb-test" ||
		!posts[1].Ephemeral || posts[1].User != "U1" {
		t.Fatalf("posts = %+v", posts)
	}
	if s.Calls("chat.postMessage") != 3 {
		t.Fatalf("calls = %d", s.Calls("chat.postMessage"))
	}
	if got := s.Thread("C1", "1.1"); len(got) != 1 {
		t.Fatalf("thread = %+v", got)
	}
}

func TestSocketMode_HelloEnvelopesAcksReconnect(t *testing.T) {
	s := New()
	s.AckTimeout = 100 * time.Millisecond
	s.Start()
	defer s.Close()
	got := make(chan socketmode.Event, 16)
	// connect runs a Socket Mode client that acks what it is sent and passes it
	// on to got.
	connect := func() (context.CancelFunc, chan error) {
		sm := socketmode.New(client(s), socketmode.OptionPingInterval(2*time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sm.RunContext(ctx) }()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-sm.Events:
					if e.Request != nil && e.Request.EnvelopeID != "" {
						_ = sm.Ack(*e.Request)
					}
					got <- e
				}
			}
		}()
		return cancel, done
	}
	cancel, done := connect()
	next := func(want socketmode.EventType) socketmode.Event {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case e := <-got:
				if e.Type == want {
					return e
				}
			case <-deadline:
				t.Fatalf("no %s event", want)
			}
		}
	}
	next(socketmode.EventTypeHello)
	m := s.Mention("C1", "U1", "hi", "")
	next(socketmode.EventTypeEventsAPI)
	if _, err := s.WaitAck(m.EnvelopeID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sl := s.Slash("/model", "x", "C1", "U1")
	if e := next(socketmode.EventTypeSlashCommand); e.Data.(slack.SlashCommand).ResponseURL != sl.ResponseURL {
		t.Fatalf("slash = %+v", e.Data)
	}
	s.Disconnect()
	if err := s.WaitConnected(2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.Opens() < 2 {
		t.Fatalf("opens = %d", s.Opens())
	}
	// The response_url target records ephemeral answers.
	if _, _, err := client(s).PostMessageContext(context.Background(), "C1", slack.MsgOptionText("ok", false),
		slack.MsgOptionResponseURL(sl.ResponseURL, slack.ResponseTypeEphemeral)); err != nil {
		t.Fatal(err)
	}
	if p, err := s.WaitPost(time.Second, func(p Post) bool { return p.Method == "response_url" }); err != nil || !p.Ephemeral {
		t.Fatalf("response_url post = %+v, %v", p, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunContext = %v", err)
	}
	// An envelope pushed while no socket is up is retried once one is. The
	// client is stopped first: after a mere Disconnect it may redial before
	// the push under load, and the push would then be a first delivery.
	if !s.waitFor(5*time.Second, func() bool { return len(s.conns) == 0 }) {
		t.Fatalf("%d sockets still open after the client stopped", s.OpenSockets())
	}
	s.DM("D1", "U1", "queued")
	cancel, done = connect()
	// The first retry comes AckTimeout after the push; a slow reconnect may
	// see a later one.
	if e := next(socketmode.EventTypeEventsAPI); e.Request.RetryAttempt < 1 || e.Request.RetryReason != "timeout" {
		t.Fatalf("retry_attempt = %d (%q), want a retry", e.Request.RetryAttempt, e.Request.RetryReason)
	}
	cancel()
	<-done
}

func TestInvalidAppTokenRefused(t *testing.T) {
	s := New()
	s.AppToken = "xapp-right"
	s.Start()
	defer s.Close()
	sm := socketmode.New(slack.New("xoxb-x", slack.OptionAPIURL(s.URL()), slack.OptionAppLevelToken("xapp-wrong")))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-sm.Events:
			}
		}
	}()
	if err := sm.RunContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("RunContext = %v, want invalid_auth", err)
	}
}

// rawSocket is a bare Socket Mode client: it reads frames and acks only when told.
type rawSocket struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan map[string]any
}

func dialRaw(t *testing.T, s *Server) *rawSocket {
	t.Helper()
	_, url, err := client(s).StartSocketModeContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawSocket{t: t, c: c, frames: make(chan map[string]any, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(r.frames)
		for {
			var m map[string]any
			if err := c.ReadJSON(&m); err != nil {
				return
			}
			r.frames <- m
		}
	}()
	t.Cleanup(func() { _ = c.Close(); <-done })
	return r
}

// frame returns the next frame, or nil after timeout or when the socket closed.
func (r *rawSocket) frame(timeout time.Duration) map[string]any {
	select {
	case m := <-r.frames:
		return m
	case <-time.After(timeout):
		return nil
	}
}

// next reads frames until one of type typ.
func (r *rawSocket) next(typ string) map[string]any {
	r.t.Helper()
	for {
		m := r.frame(5 * time.Second)
		if m == nil {
			r.t.Fatalf("no %s frame", typ)
		}
		if m["type"] == typ {
			return m
		}
	}
}

func (r *rawSocket) ack(env map[string]any) {
	r.t.Helper()
	if err := r.c.WriteJSON(map[string]any{"envelope_id": env["envelope_id"]}); err != nil {
		r.t.Fatal(err)
	}
}

func eventID(env map[string]any) string {
	p, _ := env["payload"].(map[string]any)
	id, _ := p["event_id"].(string)
	return id
}

// The posting pace: one chat.postMessage per second per channel, 429 with
// Retry-After past it; other channels are not affected.
func TestPostingPace_OnePerSecondPerChannel(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)}
	s := New()
	s.Now = clock.Now
	s.Start()
	defer s.Close()
	api := client(s)
	post := func(ch string) error {
		_, _, err := api.PostMessageContext(context.Background(), ch, slack.MsgOptionText("x", false))
		return err
	}
	if err := post("C1"); err != nil {
		t.Fatal(err)
	}
	clock.advance(300 * time.Millisecond)
	var rl *slack.RateLimitedError
	if err := post("C1"); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("second post within a second = %v, want 429 Retry-After 1", err)
	}
	if err := post("C2"); err != nil {
		t.Fatalf("another channel: %v", err)
	}
	clock.advance(700 * time.Millisecond)
	if err := post("C1"); err != nil {
		t.Fatalf("after a second: %v", err)
	}
	th := s.Throttles()
	if len(th) != 1 || th[0].Channel != "C1" || th[0].Injected || th[0].RetryAfter != 1 {
		t.Fatalf("throttles = %+v", th)
	}
	if ps := s.Posts(); len(ps) != 3 || ps[2].At.Sub(ps[0].At) != time.Second {
		t.Fatalf("posts = %+v", ps)
	}
}

// An events_api envelope not acked in time is sent again in a new envelope with
// the same event id and retry_attempt 1, 2, 3; slash commands are not retried.
func TestRedelivery_UnackedEnvelopeRetried(t *testing.T) {
	s := New()
	s.AckTimeout = 50 * time.Millisecond
	s.Start()
	defer s.Close()
	r := dialRaw(t, s)
	r.next("hello")
	sent := s.DM("D1", "U1", "hi")
	var attempts []float64
	for range 4 { // first delivery and three retries, never acked
		env := r.next("events_api")
		if eventID(env) != sent.EventID {
			t.Fatalf("event id %s, want %s", eventID(env), sent.EventID)
		}
		attempts = append(attempts, env["retry_attempt"].(float64))
	}
	if fmt.Sprint(attempts) != "[0 1 2 3]" {
		t.Fatalf("retry attempts %v", attempts)
	}
	if m := r.frame(200 * time.Millisecond); m != nil && m["type"] == "events_api" {
		t.Fatalf("retried beyond MaxRetries: %v", m)
	}
	// Acked in time: no retry. A lost ack (DropAcks): retried once.
	sent = s.DM("D1", "U1", "again")
	r.ack(r.next("events_api"))
	if m := r.frame(200 * time.Millisecond); m != nil {
		t.Fatalf("acked envelope retried: %v", m)
	}
	s.DropAcks(1)
	sent2 := s.DM("D1", "U1", "lost ack")
	r.ack(r.next("events_api"))
	re := r.next("events_api")
	if eventID(re) != sent2.EventID || re["retry_reason"] != "timeout" {
		t.Fatalf("retry = %v", re)
	}
	r.ack(re)
	s.Slash("/model", "x", "C1", "U1")
	r.next("slash_commands")
	if m := r.frame(200 * time.Millisecond); m != nil {
		t.Fatalf("slash command retried: %v", m)
	}
	_ = sent
}

// Events are spread over every open socket of the app; an 11th socket is turned
// away with too_many_websockets.
func TestSockets_SpreadAndLimit(t *testing.T) {
	s := New()
	s.MaxSockets = 2
	s.Start()
	defer s.Close()
	// The server counts a socket once its handler runs, which may be after
	// the client's handshake returned: b is dialled after a's hello came.
	a := dialRaw(t, s)
	if h := a.next("hello"); h["num_connections"].(float64) != 1 {
		t.Fatalf("hello = %v", h)
	}
	b := dialRaw(t, s)
	if h := b.next("hello"); h["num_connections"].(float64) != 2 {
		t.Fatalf("hello = %v", h)
	}
	for range 4 {
		s.DM("D1", "U1", "x")
	}
	got := map[*rawSocket]int{}
	for _, r := range []*rawSocket{a, b} {
		for range 2 {
			r.ack(r.next("events_api"))
			got[r]++
		}
	}
	if got[a] != 2 || got[b] != 2 {
		t.Fatalf("spread a=%d b=%d", got[a], got[b])
	}
	if d := s.Deliveries(); d[1] != 2 || d[2] != 2 {
		t.Fatalf("deliveries = %v", d)
	}
	c := dialRaw(t, s)
	if d := c.next("disconnect"); d["reason"] != "too_many_websockets" {
		t.Fatalf("third socket got %v", d)
	}
	if s.Refused() != 1 || s.OpenSockets() != 2 {
		t.Fatalf("refused %d open %d", s.Refused(), s.OpenSockets())
	}
}

// Each disconnect reason has its consequence.
func TestDisconnectReasons(t *testing.T) {
	for _, reason := range []string{"warning", "refresh_requested"} {
		t.Run(reason, func(t *testing.T) {
			s := New()
			s.DisconnectGrace = 100 * time.Millisecond
			s.Start()
			defer s.Close()
			r := dialRaw(t, s)
			r.next("hello")
			if err := s.SendDisconnect(reason); err != nil {
				t.Fatal(err)
			}
			if d := r.next("disconnect"); d["reason"] != reason {
				t.Fatalf("frame %v", d)
			}
			// Still open within the grace, closed after it.
			if s.OpenSockets() != 1 {
				t.Fatal("closed before the grace")
			}
			if !s.waitFor(2*time.Second, func() bool { return len(s.conns) == 0 }) {
				t.Fatal("not closed after the grace")
			}
			dialRaw(t, s).next("hello") // a new connection is welcome
		})
	}
	t.Run("link_disabled", func(t *testing.T) {
		s := New()
		s.Start()
		defer s.Close()
		r := dialRaw(t, s)
		r.next("hello")
		if err := s.SendDisconnect("link_disabled"); err != nil {
			t.Fatal(err)
		}
		r.next("disconnect")
		if s.OpenSockets() != 0 {
			t.Fatal("socket still open")
		}
		_, _, err := client(s).StartSocketModeContext(context.Background())
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "link_disabled" {
			t.Fatalf("apps.connections.open = %v", err)
		}
		s.EnableLink()
		dialRaw(t, s).next("hello")
	})
}

// Past the hourly events budget, events are dropped and app_rate_limited is sent
// once per minute.
func TestEventsBudget_AppRateLimited(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)}
	s := New()
	s.Now = clock.Now
	s.HourlyEventLimit = 2
	s.Start()
	defer s.Close()
	r := dialRaw(t, s)
	r.next("hello")
	var sent []Sent
	for i := range 4 {
		sent = append(sent, s.DM("D1", "U1", fmt.Sprint("m", i)))
	}
	for range 2 {
		r.ack(r.next("events_api"))
	}
	limited := r.next("events_api")
	if p := limited["payload"].(map[string]any); p["type"] != "app_rate_limited" || p["team_id"] != DefaultTeamID {
		t.Fatalf("want app_rate_limited, got %v", limited)
	}
	r.ack(limited)
	if m := r.frame(200 * time.Millisecond); m != nil {
		t.Fatalf("more than one app_rate_limited in a minute, or a dropped event delivered: %v", m)
	}
	if !sent[2].Dropped || !sent[3].Dropped || sent[1].Dropped || len(s.Dropped()) != 2 {
		t.Fatalf("sent = %+v, dropped %d", sent, len(s.Dropped()))
	}
	clock.advance(time.Hour)
	if d := s.DM("D1", "U1", "next hour"); d.Dropped {
		t.Fatal("budget not renewed after an hour")
	}
	r.next("events_api")
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestLiveMentions(t *testing.T) {
	cases := []struct {
		name      string
		text      string
		linkNames bool
		want      string
	}{
		{"here", "hi <!here>", false, "[<!here>]"},
		{"channel label", "<!channel|channel>", false, "[<!channel|channel>]"},
		{"subteam", "<!subteam^S1|team>", false, "[<!subteam^S1|team>]"},
		{"user", "<@U123> hi", false, "[<@U123>]"},
		{"channel ref", "<#C1>", false, "[<#C1>]"},
		{"escaped", "&lt;!here&gt; &lt;@U1&gt;", false, "[]"},
		{"link", "<https://e.com|x>", false, "[]"},
		{"plain broadcast", "@here @channel", false, "[]"},
		{"link names", "@here and @bob in #general", true, "[@here @bob #general]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprint(LiveMentions(c.text, c.linkNames)); got != c.want {
				t.Fatalf("LiveMentions(%q) = %s, want %s", c.text, got, c.want)
			}
		})
	}
	blocks := `[{"type":"context","elements":[{"type":"mrkdwn","text":"@channel <@U1>"},{"type":"mrkdwn","text":"@here","verbatim":true}]},
		{"type":"section","text":{"type":"mrkdwn","text":"x","verbatim":true}},
		{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"user","user_id":"U9"},{"type":"broadcast","range":"here"}]}]}]`
	got := blockMentions(json.RawMessage(blocks))
	sort.Strings(got)
	if fmt.Sprint(got) != "[<@U1> @channel rich_text:broadcast:here rich_text:user:U9]" {
		t.Fatalf("blockMentions = %v", got)
	}
}

// Slow holds the posts of one channel until released; other channels are answered.
func TestSlow_HoldsOneChannelUntilReleased(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	api := client(s)
	done := make(chan error, 1)
	s.Slow("CSLOW", time.Minute)
	go func() {
		_, _, err := api.PostMessageContext(context.Background(), "CSLOW", slack.MsgOptionText("slow", false))
		done <- err
	}()
	if err := s.WaitInFlight("CSLOW", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(context.Background(), "C2", slack.MsgOptionText("fast", false)); err != nil {
		t.Fatal(err)
	}
	if ps := s.Posts(); len(ps) != 1 || ps[0].Channel != "C2" {
		t.Fatalf("posts = %+v", ps)
	}
	s.Slow("CSLOW", 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.InFlight("CSLOW") != 0 || len(s.Posts()) != 2 {
		t.Fatalf("in flight %d, posts %d", s.InFlight("CSLOW"), len(s.Posts()))
	}
}
