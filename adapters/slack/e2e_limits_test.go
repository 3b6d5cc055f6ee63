package slack_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// replyOf returns the one post of a thread, failing unless there is exactly one.
func (e *world) only(channel, ts string) fakeslack.Post {
	e.t.Helper()
	ps := e.waitThread(channel, ts, 1)
	if len(ps) != 1 {
		e.t.Fatalf("thread %s/%s has %d posts, want exactly one:%s", channel, ts, len(ps), describe(ps))
	}
	return ps[0]
}

// paced fails unless every two posts to channel are at least a second apart on
// the fake's clock.
func paced(t *testing.T, posts []fakeslack.Post, channel string) {
	t.Helper()
	var at []time.Time
	for _, p := range posts {
		if p.Channel == channel && p.Method == "chat.postMessage" {
			at = append(at, p.At)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < time.Second {
			t.Fatalf("posts to %s only %v apart", channel, gap)
		}
	}
}

// A burst of six mentions in one channel: every one is answered exactly once,
// the posts keep Slack's pace of one per second in the channel (the strict fake
// answers no 429), and under a run of 429s the replies wait instead of being
// dropped.
func TestE2E_SlackChannelBurstOfSixMentions_AllAnsweredPacedNoneDropped(t *testing.T) {
	e := startE2E(t)
	burst := func(channel string) []fakeslack.Sent {
		var ms []fakeslack.Sent
		for i := range 6 {
			ms = append(ms, e.slack.Mention(channel, "U1", fmt.Sprintf("question %d in %s", i, channel), ""))
		}
		for i, m := range ms {
			if p := e.only(channel, m.TS); !strings.Contains(p.Text, fmt.Sprintf("question %d in %s", i, channel)) {
				t.Fatalf("thread %d answered %q", i, p.Text)
			}
		}
		return ms
	}

	burst("C1")
	if th := e.slack.Throttles(); len(th) != 0 {
		t.Fatalf("the fake refused posts (the adapter did not keep the pace): %+v", th)
	}
	paced(t, e.slack.Posts(), "C1")

	// Slack answers 429 five times in a row: the replies wait and all arrive.
	for range 5 {
		e.slack.RateLimitNext("chat.postMessage", 3)
	}
	burst("C2")
	if th := e.slack.Throttles(); len(th) != 5 {
		t.Fatalf("throttles = %+v, want the 5 injected", th)
	}
	paced(t, e.slack.Posts(), "C2")
	if logs := e.logs.String(); strings.Contains(logs, "send failed") {
		t.Fatalf("a reply was given up:\n%s", logs)
	}
}

// "/model x" typed in a channel (Slack sends it without a thread) sets the model
// new threads there start with; threads already started keep theirs, "!model" in
// a thread stays in that thread, and "/reset" goes back to the configured model.
// Only an admin may do it: anyone else gets a clear refusal, and nothing
// changes. covers S4, T9
func TestE2E_SlackChannelModelCommand_NewThreadAnsweredByIt(t *testing.T) {
	e := startE2E(t, asAdmin)
	old := e.slack.Mention("C1", "U1", "before", "")
	if p := e.only("C1", old.TS); !strings.HasPrefix(p.Text, "[p1/alpha]") {
		t.Fatalf("before: %q", p.Text)
	}

	e.slack.Slash("/model", "p2/beta", "C1", "U2")
	refusal, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral && p.User == "U2" })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(refusal.Text, "only admins may choose the model for new threads in #general") {
		t.Fatalf("a non-admin's channel /model was answered %q", refusal.Text)
	}
	e.drain() // the refusal touched no session: the channel has none yet

	e.slack.Slash("/model", "p3/gamma", "C1", "U1")
	eph, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral && p.User == "U1" })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(eph.Text, "new threads in #general will use p3/gamma") || eph.User != "U1" {
		t.Fatalf("slash answer = %+v", eph)
	}
	e.drain()

	fresh := e.slack.Mention("C1", "U2", "after", "")
	if p := e.only("C1", fresh.TS); !strings.HasPrefix(p.Text, "[p3/gamma]") {
		t.Fatalf("new thread answered %q, want p3/gamma", p.Text)
	}
	e.slack.ThreadMessage("C1", "U1", "still here", old.TS)
	if ps := e.waitThread("C1", old.TS, 2); !strings.HasPrefix(ps[1].Text, "[p1/alpha]") {
		t.Fatalf("old thread answered %q, want p1/alpha", ps[1].Text)
	}
	e.slack.ThreadMessage("C1", "U2", "!model p2/beta", fresh.TS)
	e.waitThread("C1", fresh.TS, 2)
	other := e.slack.Mention("C1", "U3", "another", "")
	if p := e.only("C1", other.TS); !strings.HasPrefix(p.Text, "[p3/gamma]") {
		t.Fatalf("a thread's !model changed the channel default: %q", p.Text)
	}

	e.slack.Slash("/reset", "", "C1", "U1")
	if _, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool {
		return p.Ephemeral && strings.HasPrefix(p.Text, "new threads in #general will use the configured model p1/alpha")
	}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	last := e.slack.Mention("C1", "U1", "after reset", "")
	if p := e.only("C1", last.TS); !strings.HasPrefix(p.Text, "[p1/alpha]") {
		t.Fatalf("after /reset answered %q", p.Text)
	}
}

// Two adapters on one app (the sockets of two replicas) share Slack's events:
// each envelope goes to one socket, an app_mention and its message twin may land
// on different ones, and an envelope whose ack was lost is sent again, maybe to the
// other socket. Every message is answered once. Within one process the adapters
// share their Memory; across processes the router's durable de-duplication by
// Inbound.EventID (M3, not built yet) takes that role. covers M3 (one process)
func TestE2E_SlackTwoReplicaSockets_EachEventAnsweredOnce(t *testing.T) {
	e := startE2E(t, func(s *setup) {
		s.replicas = 2
		s.config.Memory = slack.NewMemory(s.config.Now)
		s.fake.AckTimeout = 300 * time.Millisecond
	})
	e.slack.DropAcks(1) // the first mention's ack is lost: Slack sends it again
	var ms []fakeslack.Sent
	for i := range 6 {
		ms = append(ms, e.slack.Mention("C1", "U1", fmt.Sprintf("replica question %d", i), ""))
	}
	if err := e.slack.WaitRetried(1, wait); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if p := e.only("C1", m.TS); !strings.Contains(p.Text, fmt.Sprintf("replica question %d", i)) {
			t.Fatalf("thread %d answered %q", i, p.Text)
		}
	}
	if d := e.slack.Deliveries(); len(d) != 2 || d[1] == 0 || d[2] == 0 {
		t.Fatalf("events not spread over both sockets: %v", d)
	}
	if n := e.LLM.CallCount(fakeprovider.Filter{}); n != 6 {
		t.Fatalf("%d model calls for 6 messages", n)
	}
}

// Model output written to ping (Markdown links to !channel and @U123, raw
// <!here>, !subteam^S1, @everyone, a Discord role) reaches Slack as plain text:
// the strict fake records no live mention (checked on every post when the test
// ends); real links still render. covers T3
func TestE2E_SlackHostileModelOutput_NoLiveMention(t *testing.T) {
	e := startE2E(t)
	hostile := "[x](!channel) <!here> [y](@U123) !subteam^S1 @everyone <@&123> " +
		"<!subteam^S1|team> [docs](https://example.com/d?a=1&b=2) <https://example.com/e> [mail](mailto:a@example.com)"
	e.llm.Script(fakeprovider.Rule{Reply: hostile})
	m := e.slack.Mention("C1", "U1", "say it", "")
	p := e.only("C1", m.TS)
	if len(p.Mentions) != 0 {
		t.Fatalf("live mentions %v in %q", p.Mentions, p.Text)
	}
	for _, want := range []string{"x (!channel)", "&lt;!here&gt;", "y (@U123)", "!subteam^S1", "@everyone", "&lt;@&amp;123&gt;",
		"<https://example.com/d?a=1&amp;b=2|docs>", "<https://example.com/e>", "<mailto:a@example.com|mail>"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("reply lacks %q:\n%s", want, p.Text)
		}
	}
	// User text echoed in an answer is escaped as well.
	e.slack.Slash("/model", "<!channel>/x", "C1", "U1")
	eph, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral })
	if err != nil {
		t.Fatal(err)
	}
	if len(eph.Mentions) != 0 || !strings.Contains(eph.Text, "&lt;!channel&gt;") {
		t.Fatalf("slash answer %+v", eph)
	}
}

// One slow chat.postMessage (5 s) holds only its own channel: a reply in another
// channel lands while it is still in flight.
func TestE2E_SlackSlowPostInOneChannel_OtherChannelAnswered(t *testing.T) {
	e := startE2E(t)
	e.slack.Slow("CSLOW", 5*time.Second)
	slow := e.slack.Mention("CSLOW", "U1", "slow one", "")
	if err := e.slack.WaitInFlight("CSLOW", 1, wait); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fast := e.slack.Mention("C2", "U1", "fast one", "")
	if _, err := e.slack.WaitThread("C2", fast.TS, 1, 4*time.Second); err != nil {
		t.Fatalf("the other channel waited for the slow post: %v", err)
	}
	took := time.Since(start)
	if e.slack.InFlight("CSLOW") != 1 || len(e.slack.Thread("CSLOW", slow.TS)) != 0 {
		t.Fatal("the slow post finished first; the test proves nothing")
	}
	e.slack.Slow("CSLOW", 0) // Slack answers at last
	e.only("CSLOW", slow.TS)
	t.Logf("other channel answered in %v while one post was held", took)
}
