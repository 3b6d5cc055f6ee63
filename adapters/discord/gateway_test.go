package discord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// op 9 is honoured: a resumable invalid session resumes (no identify spent), a
// lost one identifies again after Discord's 1-5 s wait; discordgo never answers
// it by itself.
func TestGateway_InvalidSessionResumableOrNot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		resumable  bool
		identifies int
		resumes    int
	}{
		{"resumable: resume", true, 1, 1},
		{"not resumable: identify after 1-5 s", false, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, nil)
			if err := h.fake.SendInvalidSession(tc.resumable); err != nil {
				t.Fatal(err)
			}
			if tc.resumable { // sent in the gap: replayed on resume
				h.fake.SendMention("G1", "C1", "U1", "after op 9")
			}
			if err := h.fake.WaitConnected(wait, tc.identifies, tc.resumes); err != nil {
				t.Fatalf("%v\n%s", err, h.logs.String())
			}
			if !tc.resumable { // a new session starts empty, as on Discord
				h.fake.SendMention("G1", "C1", "U1", "after op 9")
			}
			if in := h.recv(); in.Text != "after op 9" {
				t.Fatalf("got %+v", in)
			}
			h.expectNext("C1")
			if n := len(h.fake.Identifies()); n != tc.identifies {
				t.Errorf("identifies = %d, want %d", n, tc.identifies)
			}
			if n := h.fake.Resumes(); n != tc.resumes {
				t.Errorf("resumes = %d, want %d", n, tc.resumes)
			}
			if !tc.resumable {
				waited := false
				for _, d := range h.sleeps.Sleeps() {
					waited = waited || (d >= time.Second && d <= 5*time.Second)
				}
				if !waited {
					t.Errorf("sleeps = %v, want a 1-5 s wait before identifying", h.sleeps.Sleeps())
				}
			}
		})
	}
}

// Discord refusing MESSAGE_CONTENT (close 4014) no longer stops the bot: it
// identifies without it and answers mentions, DMs and commands.
func TestGateway_DisallowedIntentFallsBackToMentionOnly(t *testing.T) {
	t.Parallel()
	h := start(t, nil, func(f *fakediscord.Server) { f.RefuseIntents = int(discordgo.IntentsMessageContent) })
	ids := h.fake.Identifies()
	if len(ids) != 2 || ids[0]&int(discordgo.IntentsMessageContent) == 0 || ids[1]&int(discordgo.IntentsMessageContent) != 0 {
		t.Fatalf("identifies = %v, want one with MESSAGE_CONTENT, then one without", ids)
	}
	if !strings.Contains(h.logs.String(), "Message Content Intent") || !strings.Contains(h.logs.String(), "mention-only") {
		t.Errorf("no log line saying what to enable:\n%s", h.logs.String())
	}
	h.fake.AddThread("G1", "C1", "T1")
	h.fake.SendMention("G1", "T1", "U1", "joined")
	if in := h.recv(); in.Text != "joined" {
		t.Fatalf("got %+v", in)
	}
	// A thread message without a mention arrives with no content: nothing to answer.
	h.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T1", AuthorID: "U1", Content: "unseen"})
	h.fake.SendDM("D1", "U2", "a dm")
	if in := h.recv(); in.Text != "a dm" {
		t.Fatalf("got %+v, want the DM (the thread message has no content for us)", in)
	}
}

// channels.discord.message_content: false identifies without the intent from the start.
func TestGateway_MessageContentOff(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.NoMessageContent = true })
	if ids := h.fake.Identifies(); len(ids) != 1 || ids[0]&int(discordgo.IntentsMessageContent) != 0 {
		t.Fatalf("identifies = %v, want one without MESSAGE_CONTENT", ids)
	}
}

// A shard is sent in Identify; intents refused even without MESSAGE_CONTENT stop
// Run with an error that says so.
func TestGateway_ShardAndRefusedIntents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(*Config)
		fake func(*fakediscord.Server)
		want string
	}{
		{"shard 1 of 2", func(c *Config) { c.ShardID, c.ShardCount = 1, 2 }, func(f *fakediscord.Server) {}, ""},
		{"intents refused without MESSAGE_CONTENT too (4014)", func(c *Config) { c.NoMessageContent = true },
			func(f *fakediscord.Server) { f.RefuseIntents = int(discordgo.IntentsGuildMessages) }, "4014"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := fakediscord.New()
			clock := failovertest.NewClock(t0)
			fake.Now = clock.Now
			tc.fake(fake)
			fake.Start()
			defer fake.Close()
			logs := &syncbuf.Buffer{}
			cfg := Config{Token: "t", APIURL: fake.URL(), Log: slogTo(logs), Timing: link.Timing{Sleep: clock.Sleep, Now: clock.Now}}
			tc.cfg(&cfg)
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, make(chan adapters.Inbound, 1)) }()
			if tc.want == "" { // a valid shard connects, sending it in Identify
				if err := fake.WaitConnected(wait, 1, 0); err != nil {
					t.Fatal(err)
				}
				if got := fake.LastShard(); got == nil || *got != [2]int{1, 2} {
					t.Errorf("shard = %v, want [1 2]", got)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return
			}
			err = <-done
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestNew_ShardBounds(t *testing.T) {
	t.Parallel()
	for _, s := range [][2]int{{2, 2}, {-1, 2}, {1, 0}, {0, -1}} {
		if _, err := New(Config{Token: "t", ShardID: s[0], ShardCount: s[1]}); err == nil {
			t.Errorf("shard %v accepted", s)
		}
	}
	if _, err := New(Config{Token: "t", ShardID: 1, ShardCount: 2}); err != nil {
		t.Errorf("shard [1 2]: %v", err)
	}
}

// Over TLS (wss, as with Discord itself) the gateway reader works the same: frames are read,
// a zombie connection is closed with 4000 and resumed.
func TestGateway_TLSZombieResumes(t *testing.T) {
	t.Parallel()
	fake := fakediscord.New()
	fake.Token = canaryToken
	clock := failovertest.NewClock(t0)
	fake.Now = clock.Now
	fake.HeartbeatInterval = 100 * time.Millisecond
	fake.StartTLS()
	defer fake.Close()
	pool := x509.NewCertPool()
	pool.AddCert(fake.Certificate())
	logs := &syncbuf.Buffer{}
	a, err := New(Config{Token: canaryToken, APIURL: fake.URL(), Log: slogTo(logs), TLS: &tls.Config{RootCAs: pool},
		Timing: link.Timing{Sleep: clock.Sleep, Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inbox := make(chan adapters.Inbound, 4)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, inbox) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := fake.WaitConnected(wait, 1, 0); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if err := fake.StopAcking(); err != nil {
		t.Fatal(err)
	}
	fake.SendDM("D1", "U1", "during")
	if err := fake.WaitConnected(wait, 1, 1); err != nil {
		t.Fatalf("no resume over TLS: %v\n%s", err, logs.String())
	}
	select {
	case in := <-inbox:
		if in.Text != "during" {
			t.Fatalf("got %+v", in)
		}
	case <-time.After(wait):
		t.Fatal("the event sent during the zombie gap was lost")
	}
	if got := fake.Closes(); !slices.Equal(got, []int{4000}) {
		t.Errorf("close codes = %v, want [4000]\n%s", got, logs.String())
	}
}
