package discord_test

// End-to-end: real discordgo against fakediscord, the real sessions router and
// failover engine on SQLite, the real llm client against fakeprovider, a fake clock.

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
	"github.com/detourbot/detour/notices"
)

const (
	e2ePrimary  = "p1/alpha"
	e2eFallback = "p2/beta"
)

var e2eKeys = map[string]string{
	"p1:main":   "sk-CANARY-e2e-p1main-1111",
	"p1:backup": "sk-CANARY-e2e-p1backup-2222",
	"p2:main":   "sk-CANARY-e2e-p2main-3333",
}

// e2eToken is the bot token; it must never reach a log or a message (P4).
const e2eToken = "CANARY-discord-bot-token-e2e-7f3a9c"

const wait = e2e.Wait

// world is a whole detour started through internal/app (the real router, failover
// engine, SQLite store and llm client against the fake provider) with the real
// discordgo client, through the adapter, against fakediscord.
type world struct {
	*e2e.World
	t      testing.TB
	clock  *failovertest.Clock
	llm    *fakeprovider.Server
	fake   *fakediscord.Server
	sleeps *failovertest.Clock
	logs   *e2e.SyncBuffer
}

// e2eOpts adjusts a world before it starts.
type e2eOpts struct {
	fake    func(*fakediscord.Server)
	adapter func(*discord.Config)
	// noWait skips waiting for the first connection and command registration.
	noWait bool
	// live turns streamed replies on (channels.discord.stream, the default of
	// the bot). Off, the world keeps the single post these tests of other rules
	// were written for.
	live bool
	// spec adjusts the world's specification.
	spec func(*e2e.Spec)
}

func newE2E(t testing.TB, opts ...e2eOpts) *world {
	t.Helper()
	e := &world{t: t, sleeps: failovertest.NewClock(e2e.T0)}
	e.fake = fakediscord.New()
	e.fake.Token = e2eToken
	e.fake.Now = e.sleeps.Now // one virtual clock for the adapter's waits and the fake's windows
	for _, o := range opts {
		if o.fake != nil {
			o.fake(e.fake)
		}
	}
	e.fake.Start()
	e.logs = &e2e.SyncBuffer{}
	cfg := discord.Config{Token: e2eToken, GuildID: "G1", APIURL: e.fake.URL(), Log: e2e.Logger(e.logs),
		Models:   func() []string { return []string{e2ePrimary, e2eFallback} },
		Profiles: func() []string { return []string{"p1:main", "p1:backup", "p2:main"} },
		Timing:   link.Timing{Sleep: e.sleeps.Sleep, Now: e.sleeps.Now, Rand: func() float64 { return 0.5 }}}
	for _, o := range opts {
		if o.adapter != nil {
			o.adapter(&cfg)
		}
	}
	a, err := discord.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.fake.Close()
		for _, secret := range append(slices.Collect(maps.Values(e2eKeys)), e2eToken) {
			for _, m := range e.fake.Messages() {
				if strings.Contains(m.Content, secret) {
					t.Errorf("secret leaked into a Discord message: %q", m.Content)
				}
			}
		}
	})
	spec := e2e.Spec{
		Primary: e2ePrimary, Fallbacks: []string{e2eFallback},
		Keys:         e2eKeys,
		Order:        map[string][]string{"p1": {"p1:main", "p1:backup"}},
		AdminChannel: "discord:ADMIN", AdminUsers: []string{"discord:UADMIN"},
		Adapter: a, Secrets: []string{e2eToken}, Logs: e.logs,
		Channels: "discord: {stream: false}",
	}
	for _, o := range opts {
		if o.live {
			spec.Channels = ""
		}
		if o.spec != nil {
			o.spec(&spec)
		}
	}
	e.World = e2e.Start(t, spec)
	e.clock, e.llm = e.Clock, e.LLM
	for _, o := range opts {
		if o.noWait {
			return e
		}
	}
	if err := e.fake.WaitConnected(wait, 1, 0); err != nil {
		t.Fatal(err)
	}
	// The bot reports itself connected (the "ready" line and /readyz wait for it).
	cctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.Sys.WaitConnected(cctx); err != nil {
		t.Fatalf("the system never reported the Discord gateway connected: %v", err)
	}
	if err := fakediscord.WaitFor(wait, func() bool { return len(e.fake.Commands()) > 0 }); err != nil {
		t.Fatal(err)
	}
	return e
}

// posts waits until channel ch has n messages in all and returns them.
func (e *world) posts(ch string, n int) []fakediscord.Message {
	e.t.Helper()
	msgs, err := e.fake.WaitMessages(10*time.Second, n, fakediscord.InChannel(ch))
	if err != nil {
		e.t.Fatalf("channel %s: %v (have %+v)", ch, err, msgs)
	}
	return msgs
}

func isNotice(m fakediscord.Message) bool { return m.Flags&4096 != 0 }

func TestE2E_MentionThreadDM(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.fake.SendMention("G1", "C1", "U1", "hello channel")
	if m := e.posts("C1", 1); !strings.Contains(m[0].Content, "["+e2ePrimary+"] you said: hello channel") || isNotice(m[0]) {
		t.Fatalf("channel reply = %+v", m)
	}
	e.fake.AddThread("G1", "C1", "T1")
	e.fake.SendMention("G1", "T1", "U1", "hello thread")
	e.posts("T1", 1)
	e.fake.SendMessage(fakediscord.Msg{GuildID: "G1", ChannelID: "T1", AuthorID: "U1", Content: "no mention needed"})
	if m := e.posts("T1", 2); !strings.Contains(m[1].Content, "you said: no mention needed") {
		t.Fatalf("thread replies = %+v", m)
	}
	e.fake.SendDM("D1", "U2", "hello dm")
	if m := e.posts("D1", 1); !strings.Contains(m[0].Content, "you said: hello dm") {
		t.Fatalf("dm reply = %+v", m)
	}
	// The thread did not leak into the parent channel.
	if n := len(e.posts("C1", 1)); n != 1 {
		t.Fatalf("C1 has %d messages", n)
	}
}

// covers N1, N2, N3, N4, N5, S3 through Discord
func TestE2E_OverloadedPrimaryNoticeThenFallbackThenCleared(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})

	e.fake.SendMention("G1", "C1", "U1", "hello")
	m := e.posts("C1", 2)
	wantN1 := "-# " + notices.Fallback(e2eFallback, e2ePrimary, classify.ReasonOverloaded, 529)
	if m[0].Content != wantN1 || !isNotice(m[0]) {
		t.Fatalf("first post = %+v, want the N1 notice %q with suppress-notifications", m[0], wantN1)
	}
	if !strings.Contains(m[1].Content, "["+e2eFallback+"] you said: hello") || isNotice(m[1]) {
		t.Fatalf("second post = %+v, want the fallback's reply", m[1])
	}
	var keys []string
	for _, c := range e.llm.Calls() {
		if c.Provider == "p1" && !slices.Contains(keys, c.KeyID) {
			keys = append(keys, c.KeyID)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("primary tried with %d profiles, want both", len(keys))
	}

	// N5: /status through an interaction shows the active fallback.
	_, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
	st, err := e.fake.WaitMessages(10*time.Second, 1, fakediscord.ForInteraction(tok))
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Via != "edit-original" || !strings.Contains(st[0].Content, "active fallback: "+e2eFallback) {
		t.Fatalf("/status answer = %+v", st[0])
	}

	// N3: the next turn stays on the fallback without a new notice.
	e.clock.Advance(time.Minute)
	e.fake.SendMention("G1", "C1", "U1", "still there?")
	m = e.posts("C1", 3)
	if isNotice(m[2]) || !strings.Contains(m[2].Content, "["+e2eFallback+"]") {
		t.Fatalf("third post = %+v", m[2])
	}

	// S3 + N2: after the probe interval the primary is back: cleared notice, then its reply.
	e.clock.Advance(5 * time.Minute)
	e.llm.Reset()
	e.fake.SendMention("G1", "C1", "U1", "and now?")
	m = e.posts("C1", 5)
	wantN2 := "-# " + notices.Cleared(e2ePrimary, e2eFallback)
	if m[3].Content != wantN2 || !isNotice(m[3]) {
		t.Fatalf("fourth post = %+v, want %q", m[3], wantN2)
	}
	if !strings.Contains(m[4].Content, "["+e2ePrimary+"] you said: and now?") {
		t.Fatalf("fifth post = %+v", m[4])
	}
}

func TestE2E_ModelInteractionWithAutocomplete(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	id, _ := e.fake.SendAutocomplete(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model",
		Options: []fakediscord.Option{{Name: "model", Value: "bet", Focused: true}}})
	rs, err := e.fake.WaitInteractionResponses(wait, 1, func(r fakediscord.InteractionResponse) bool { return r.InteractionID == id })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rs[0].Choices {
		got = append(got, c.Value)
	}
	if want := []string{e2eFallback, e2eFallback + "@p2:main"}; !slices.Equal(got, want) {
		t.Fatalf("autocomplete = %v, want %v", got, want)
	}

	id, tok := e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model",
		Options: []fakediscord.Option{{Name: "model", Value: e2eFallback}}})
	ans, err := e.fake.WaitMessages(10*time.Second, 1, fakediscord.ForInteraction(tok))
	if err != nil {
		t.Fatal(err)
	}
	if ans[0].Via != "edit-original" || !strings.Contains(ans[0].Content, "model set to "+e2eFallback) {
		t.Fatalf("/model answer = %+v", ans[0])
	}
	if rs := e.fake.InteractionResponses(); rs[len(rs)-1].InteractionID != id || rs[len(rs)-1].Type != 5 {
		t.Fatalf("interaction not deferred first: %+v", rs)
	}
	e.fake.SendMention("G1", "C1", "U1", "which model?")
	if m := e.posts("C1", 1); !strings.Contains(m[0].Content, "["+e2eFallback+"] you said: which model?") {
		t.Fatalf("reply after /model = %+v", m)
	}
}

func TestE2E_ReconnectMidConversation(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.fake.SendMention("G1", "C1", "U1", "one")
	e.posts("C1", 1)
	if err := e.fake.ForceReconnect(fakediscord.ReconnectDrop); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.WaitConnected(wait, 1, 1); err != nil {
		t.Fatalf("no resume: %v", err)
	}
	e.fake.SendMention("G1", "C1", "U1", "two")
	e.posts("C1", 2)
	e.fake.SendMention("G1", "C1", "U1", "three")
	m := e.posts("C1", 3)
	n := 0
	for _, p := range m {
		if strings.Contains(p.Content, "you said: two") {
			n++
		}
	}
	if n != 1 || len(m) != 3 || !strings.Contains(m[2].Content, "you said: three") {
		t.Fatalf("after reconnect: %d answers to 'two'; posts %+v", n, m)
	}
}

func TestE2E_RateLimitedReplyDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.fake.RateLimitNext("POST /channels/{id}/messages", 50*time.Millisecond)
	e.fake.SendMention("G1", "C1", "U1", "limited")
	m := e.posts("C1", 1)
	if !strings.Contains(m[0].Content, "you said: limited") {
		t.Fatalf("reply = %+v", m)
	}
	e.fake.SendMention("G1", "C1", "U1", "next")
	if m := e.posts("C1", 2); strings.Contains(m[1].Content, "you said: limited") {
		t.Fatalf("limited reply posted twice: %+v", m)
	}
	if e.fake.RateLimited() != 1 || !slices.Equal(e.sleeps.Sleeps(), []time.Duration{50 * time.Millisecond}) {
		t.Fatalf("429s %d, sleeps %v", e.fake.RateLimited(), e.sleeps.Sleeps())
	}
}
