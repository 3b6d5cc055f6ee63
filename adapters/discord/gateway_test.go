package discord

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
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
			cfg := Config{Token: "t", APIURL: fake.URL(), Log: slogTo(logs), Sleep: clock.Sleep, Now: clock.Now}
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

// A close discordgo sends with 1000 or 1001 would end the session; it goes out
// as 4000 unless the bot is stopping.
func TestKeepResumable(t *testing.T) {
	t.Parallel()
	frame := func(code int, key byte) []byte {
		f := []byte{0x88, 0x82, key, key + 1, key + 2, key + 3}
		c := binary.BigEndian.AppendUint16(nil, uint16(code))
		return append(f, c[0]^key, c[1]^(key+1))
	}
	codeOf := func(f []byte) int { return int(f[6]^f[2])<<8 | int(f[7]^f[3]) }
	tests := []struct {
		in, want int
	}{{1000, 4000}, {1001, 4000}, {1012, 1012}, {4000, 4000}}
	for _, tc := range tests {
		got := keepResumable(frame(tc.in, 7))
		if codeOf(got) != tc.want {
			t.Errorf("close %d went out as %d, want %d", tc.in, codeOf(got), tc.want)
		}
	}
	text := []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}
	if got := keepResumable(text); !bytes.Equal(got, text) {
		t.Errorf("a text frame was changed")
	}
	if got := maskedClose(4000, "x"); codeOf(got) != 4000 || got[0] != 0x88 || got[1]&0x80 == 0 {
		t.Errorf("maskedClose = %x", got)
	}
}

// The write-side scanner finds each small text frame's op across any split.
func TestFrameScan_SplitWrites(t *testing.T) {
	t.Parallel()
	masked := func(payload string) []byte {
		key := [4]byte{9, 8, 7, 6}
		f := []byte{0x81}
		n := len(payload)
		switch {
		case n < 126:
			f = append(f, 0x80|byte(n))
		default:
			f = append(f, 0x80|126)
			f = binary.BigEndian.AppendUint16(f, uint16(n))
		}
		f = append(f, key[:]...)
		for i := range n {
			f = append(f, payload[i]^key[i%4])
		}
		return f
	}
	stream := []byte("GET /gw/?v=9 HTTP/1.1\r\nHost: x\r\n\r\n")
	stream = append(stream, masked(`{"op":2,"d":{}}`)...)
	stream = append(stream, masked(`{"op":1,"d":5}`)...)
	stream = append(stream, masked(`{"op":6,"d":{"pad":"`+strings.Repeat("x", 300)+`"}}`)...)
	stream = append(stream, masked(`{"op":1,"d":6}`)...)
	// One whole frame is recognised for the Identify-to-Resume swap; anything
	// else is left alone.
	if op := clientOp(masked(`{"op":2,"d":{}}`)); op != 2 {
		t.Errorf("clientOp(identify) = %d", op)
	}
	if op := clientOp(maskedFrame(opText, []byte(`{"op":6,"d":{"pad":"`+strings.Repeat("y", 200)+`"}}`))); op != 6 {
		t.Errorf("clientOp(long resume) = %d", op)
	}
	if op := clientOp(stream[:20]); op != -1 {
		t.Errorf("clientOp(part of a frame) = %d", op)
	}
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		var s frameScan
		var ops []int
		for p := stream; len(p) > 0; {
			n := min(size, len(p))
			s.feed(p[:n], func(op int) { ops = append(ops, op) })
			p = p[n:]
		}
		if want := []int{2, 1, 6, 1}; !slices.Equal(ops, want) {
			t.Errorf("chunks of %d: ops %v, want %v", size, ops, want)
		}
	}
}

func TestRouteOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		want         route
	}{
		{"POST", "/api/v9/channels/123/messages", route{key: "POST /channels/{major}/messages", major: "123"}},
		{"PATCH", "/api/v9/channels/123/messages/456", route{key: "PATCH /channels/{major}/messages/{id}", major: "123"}},
		{"POST", "/api/v9/interactions/77/tok/callback", route{key: "POST /interactions/{major}/{token}/callback", major: "77", interaction: true}},
		{"PATCH", "/api/v9/webhooks/1/tok/messages/@original", route{key: "PATCH /webhooks/{major}/{token}/messages/@original", major: "1/tok", interaction: true}},
		{"GET", "/api/v9/gateway/bot", route{key: "GET /gateway/bot"}},
	}
	for _, tc := range tests {
		if got := routeOf(tc.method, tc.path); got != tc.want {
			t.Errorf("routeOf(%s %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

// Concurrent requests during a global pause: one sleeps, the rest wait for it,
// and a cancelled sleeper hands over to a waiter; interaction routes never wait.
func TestLimiter_GlobalPauseSingleSleeper(t *testing.T) {
	t.Parallel()
	clock := failovertest.NewClock(t0)
	release := make(chan struct{})
	var sleeps []time.Duration
	sleep := func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d) // one sleeper at a time
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return clock.Sleep(ctx, d)
	}
	l := newLimiter(clock.Now, sleep, time.Minute, slogTo(&syncbuf.Buffer{}))
	resp := &http.Response{StatusCode: 429, Header: http.Header{"X-Ratelimit-Global": {"true"}},
		Body: http.NoBody}
	l.observe(routeOf("POST", "/api/v9/channels/1/messages"), resp)

	if err := l.wait(context.Background(), routeOf("POST", "/api/v9/interactions/1/t/callback")); err != nil {
		t.Fatalf("interaction waited: %v", err)
	}
	first, cancelFirst := context.WithCancel(context.Background())
	errs := make(chan error, 4)
	go func() { errs <- l.wait(first, routeOf("POST", "/api/v9/channels/1/messages")) }()
	if err := fakediscord.WaitFor(wait, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.pause.sleeping }); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"2", "3", "4"} {
		go func() { errs <- l.wait(context.Background(), routeOf("POST", "/api/v9/channels/"+ch+"/typing")) }()
	}
	cancelFirst() // the sleeper gives up: a waiter takes over
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleeper: %v", err)
	}
	if err := fakediscord.WaitFor(wait, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.pause != nil && l.pause.sleeping }); err != nil {
		t.Fatal(err)
	}
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(sleeps) != 2 || sleeps[0] != time.Second || sleeps[1] != time.Second {
		t.Fatalf("sleeps = %v, want the sleeper's 1s and its successor's 1s", sleeps)
	}
	if got := clock.Now().Sub(t0); got != time.Second {
		t.Fatalf("paused %v in all, want 1s (the 429 named no wait)", got)
	}
}

// Over TLS (wss, as with Discord itself) the tap sits above TLS: frames are read,
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
	a, err := New(Config{Token: canaryToken, APIURL: fake.URL(), Log: slogTo(logs), Sleep: clock.Sleep, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	a.dialer.tls = &tls.Config{RootCAs: pool}
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
