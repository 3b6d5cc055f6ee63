package discord_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/healthdb"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// Discord's usual bucket of a channel's message routes: 5 requests per 5 s
// per channel (major parameter channel_id). The documents give the mechanism
// (per-route buckets, X-RateLimit-* headers, a 429 past them) rather than the
// numbers, and ask bots not to hard-code them:
// https://discord.com/developers/docs/topics/rate-limits
const (
	bucketN   = 5
	bucketPer = 5 * time.Second
)

// TestE2E_Issue38_StatusMessagePacedWithinItsBucket: many state changes come
// quickly (a dozen conversations falling back one after another, then the
// providers flapping: all down, recovered, the primary failing again, recovered
// for good) while the fake holds the status message's routes to Discord's
// bucket, its window counted on the app's clock, the one the board feed paces
// itself on. The bot never gets a 429 there (discordgo would wait one out in
// real time and retry: the point is never to need that), the status message is
// posted once and edited in place, and it ends showing the final state.
// covers issue 38
func TestE2E_Issue38_StatusMessagePacedWithinItsBucket(t *testing.T) {
	var app atomic.Pointer[failovertest.Clock] // the world's clock, once it exists
	e := newE2E(t, e2eOpts{fake: func(f *fakediscord.Server) {
		f.Now = func() time.Time {
			if c := app.Load(); c != nil {
				return c.Now()
			}
			return e2e.T0 // where the world's clock starts
		}
		f.Limit("PATCH /channels/{id}/messages/{mid}", bucketN, bucketPer)
		f.Limit("POST /channels/{id}/messages", bucketN, bucketPer)
	}})
	app.Store(e.clock)

	n := 0
	turn := func(ch string) {
		t.Helper()
		n++
		ch = fmt.Sprintf("%s-%d", ch, n)
		e.fake.SendMention("G1", ch, "U1", "hello")
		if _, err := e.fake.WaitMessages(wait, 1, fakediscord.InChannel(ch)); err != nil {
			t.Fatalf("no answer in %s: %v\n%s", ch, err, e.logs.String())
		}
		e.Drain() // the turn is under way: let it end before the next
	}
	again := func(ch string) { // a turn in a conversation that exists
		t.Helper()
		in := func() int { return len(e.fake.Latest(ch)) }
		before := in()
		e.fake.SendMention("G1", ch, "U1", "again")
		if err := fakediscord.WaitFor(wait, func() bool { return in() > before }); err != nil {
			t.Fatalf("no answer in %s: %v", ch, err)
		}
		e.Drain()
	}

	// A dozen conversations fall back, one after the other: each one more
	// session on the fallback, each a change of the board.
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	var fell []string
	for range 12 {
		turn("C")
		fell = append(fell, fmt.Sprintf("C-%d", n))
	}
	// The providers flap.
	for range 3 {
		e.llm.Script(fakeprovider.Rule{Mode: fakeprovider.ModeOverloaded529})
		turn("D") // all down
		e.llm.Reset()
		e.clock.Advance(2 * time.Hour) // every cooldown over
		turn("R")
		again(fell[0]) // back on the primary
		e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
		turn("F")
	}
	// Recovered for good: every conversation back on the primary.
	e.llm.Reset()
	e.clock.Advance(2 * time.Hour)
	for _, ch := range fell {
		again(ch)
	}

	// The status message ends showing the final state: the board as computed
	// from the database now (but for its "updated" line).
	want := func() string {
		cfg := e.Sys.Config
		st, err := healthdb.Read(context.Background(), e.Sys.DB, healthdb.Providers(cfg), cfg.Policy, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return body(discord.BoardText(health.Build(st, true), discord.MaxMessageLen))
	}
	var status fakediscord.Message
	if err := fakediscord.WaitFor(wait, func() bool {
		for _, m := range e.fake.Messages() {
			if isStatus(m) {
				status = m
			}
		}
		return status.ID != "" && body(status.Content) == want()
	}); err != nil {
		t.Errorf("the status message does not show the final state:\n%s\nwant:\n%s", status.Content, want())
	}
	if strings.Contains(status.Content, "All models are unavailable") || !strings.Contains(status.Content, "`p1/alpha` answering") {
		t.Errorf("the final board is not the recovered one:\n%s", status.Content)
	}

	// Posted once, edited in place, never a 429 on its routes.
	if posts := countStatus(e.fake); posts != 1 || len(e.fake.Deletes()) != 0 {
		t.Errorf("%d status messages posted, %d deleted; want one, edited", posts, len(e.fake.Deletes()))
	}
	edits := 0
	for _, ed := range e.fake.Edits() {
		if ed.MessageID == status.ID {
			edits++
		}
	}
	if edits < 8 {
		// The test is only worth its name when the bucket was under pressure.
		t.Errorf("the status message was edited %d times; the changes did not come as meant", edits)
	}
	var limited []string
	for _, r := range e.fake.Requests() {
		if strings.HasPrefix(r.Path, "/channels/ADMIN/") && r.Status == 429 {
			limited = append(limited, r.Method+" "+r.Path)
		}
	}
	if len(limited) > 0 {
		t.Errorf("%d requests on the admin channel's routes answered 429, the first %s", len(limited), limited[0])
	}
	if n := e.fake.RateLimited(); n != 0 {
		t.Errorf("%d requests rate limited", n)
	}
	t.Logf("%d turns, %d status edits over %s on the app's clock", n+3+len(fell), edits, e.clock.Now().Sub(e2e.T0))
}

// body is a status message without its first line (its "updated" time).
// body is a status message without its "updated" line and its "Today" line:
// the feed edits the message when what the board shows changes, not for the
// calls and spend that move with every turn (internal/app's fingerprint), so a
// check call recorded after the last change may be missing from the count.
func body(s string) string {
	_, rest, _ := strings.Cut(s, "\n")
	var kept []string
	for line := range strings.Lines(rest) {
		if !strings.HasPrefix(line, "**Today**") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}
