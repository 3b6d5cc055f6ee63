package fakeslack

import (
	"context"
	"errors"
	"testing"
	"time"

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
	s.Start()
	defer s.Close()
	sm := socketmode.New(client(s), socketmode.OptionPingInterval(2*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	got := make(chan socketmode.Event, 16)
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
	// Envelopes pushed while no socket is up are delivered on the next one.
	s.Disconnect()
	s.DM("D1", "U1", "queued")
	next(socketmode.EventTypeEventsAPI)
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
