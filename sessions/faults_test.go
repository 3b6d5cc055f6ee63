//go:build cgo

package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

var errInjected = errors.New("injected: the database refused the write")

// failExchanges makes the next n writes of history messages fail (n < 0:
// every one until set to 0 again), as a database that went away between a
// turn's start and its answer does.
func failExchanges(t *testing.T, db *gorm.DB) *atomic.Int64 {
	t.Helper()
	n := &atomic.Int64{}
	name := fmt.Sprintf("test:fail-exchange-%p", n)
	err := db.Callback().Create().Before("gorm:create").Register(name, func(tx *gorm.DB) {
		if tx.Statement.Table != (Message{}).TableName() {
			return
		}
		for {
			v := n.Load()
			if v == 0 {
				return
			}
			if v < 0 || n.CompareAndSwap(v, v-1) {
				_ = tx.AddError(errInjected)
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Callback().Create().Remove(name) })
	return n
}

func roles(msgs []Message) string {
	var s []string
	for _, m := range msgs {
		s = append(s, m.Role+":"+m.Content)
	}
	return strings.Join(s, " | ")
}

// covers M8: a write of the exchange that fails a few times is tried again,
// with a growing pause on the router's clock, and the turn ends as usual: one
// reply, no notice, the history holds it once.
func TestRouter_M8_StoreRetried(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, withMem(map[string]*memLLM{}))
		fail := failExchanges(t, h.db)
		fail.Store(storeTries - 1)
		out := expect(t, h.say("test:s1", "hello"), "reply")
		if !strings.Contains(out[0].Text, "you said: hello") {
			t.Errorf("reply = %q", out[0].Text)
		}
		if got := roles(h.history("test:s1")); got != "user:hello | assistant:"+out[0].Text {
			t.Errorf("history = %s", got)
		}
		var waits []time.Duration
		for _, d := range h.clock.Sleeps() {
			if d >= storeBackoff && d < time.Second*10 {
				waits = append(waits, d)
			}
		}
		if want := []time.Duration{storeBackoff, 2 * storeBackoff, 4 * storeBackoff}; !slices.Equal(waits, want) {
			t.Errorf("pauses between writes = %v, want %v", waits, want)
		}
	})
}

// covers M8, N4: when every write fails, the paid answer is still delivered,
// after a notice (its own message: the message keeps one reply) that it is not
// saved yet; once the database takes writes again, the next message, in any
// session, stores it first: the history then holds it once and in order, and
// the session's counters count it.
func TestRouter_M8_UnsavedAnswerKeptUntilTheDatabaseIsBack(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, withMem(map[string]*memLLM{}))
		fail := failExchanges(t, h.db)
		fail.Store(-1)
		out := expect(t, h.say("test:s1", "hello"), "notice,reply")
		if n := out[0].Text; !strings.HasPrefix(n, "↪️ this answer is not saved yet (the database failed)") || !strings.Contains(n, "added to the conversation's history when the database is back") {
			t.Errorf("notice = %q", n)
		}
		answer := out[1].Text
		if !strings.Contains(answer, "you said: hello") || out[1].Model != mPrimary {
			t.Errorf("reply = %+v", out[1])
		}
		if got := h.history("test:s1"); len(got) != 0 {
			t.Fatalf("history while the database fails = %s", roles(got))
		}

		fail.Store(0) // the database is back
		expect(t, h.say("test:s2", "hi"), "reply")
		if got := roles(h.history("test:s1")); got != "user:hello | assistant:"+answer {
			t.Fatalf("history once the database is back = %s", got)
		}
		second := expect(t, h.say("test:s1", "again"), "reply")
		if got := roles(h.history("test:s1")); got != "user:hello | assistant:"+answer+" | user:again | assistant:"+second[0].Text {
			t.Errorf("history after the next turn = %s", got)
		}
		if e := h.entry("test:s1"); e.PaidCalls != 2 {
			t.Errorf("paid calls = %d, want 2", e.PaidCalls)
		}
		if h.r.unsaved.pending() {
			t.Error("an exchange still waits")
		}
	})
}

// covers M8: beyond its bound, an unsaved answer is not kept, and the notice
// says the history will miss it.
func TestRouter_M8_BoundOnKeptAnswers(t *testing.T) {
	var u unsaved
	for i := range maxUnsaved {
		if !u.keep(&exchange{key: fmt.Sprint(i)}) {
			t.Fatalf("exchange %d refused below the bound", i)
		}
	}
	if u.keep(&exchange{key: "one too many"}) {
		t.Error("an exchange beyond the bound was kept")
	}
	var big unsaved
	if big.keep(&exchange{messages: []Message{{Content: strings.Repeat("x", maxUnsavedBytes)}}}) {
		t.Error("an exchange beyond the byte bound was kept")
	}
	if n := unsavedNotice(errInjected, false); !strings.Contains(n, "could not be saved") || !strings.Contains(n, "will miss it") {
		t.Errorf("notice = %q", n)
	}
}

// covers M8: an exchange written again after its first commit was in doubt
// (the connection broke during COMMIT) is found stored and not stored twice.
func TestStore_M8_ExchangeStoredOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, withMem(map[string]*memLLM{}))
		ctx := context.Background()
		if _, err := h.r.st.beginTurn(ctx, "test:s1", t0); err != nil {
			t.Fatal(err)
		}
		x := exchange{id: exchangeID(), key: "test:s1", paidCalls: 1, messages: []Message{
			{SessionKey: "test:s1", Role: "user", Content: "q", CreatedAt: t0},
			{SessionKey: "test:s1", Role: "assistant", Content: "a", CreatedAt: t0},
		}}
		for range 3 {
			if err := h.r.st.storeExchange(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		if got := roles(h.history("test:s1")); got != "user:q | assistant:a" {
			t.Errorf("history = %s", got)
		}
		if e := h.entry("test:s1"); e.PaidCalls != 1 || e.LastExchange != x.id {
			t.Errorf("entry = paid %d, last exchange %q", e.PaidCalls, e.LastExchange)
		}
		y := x
		y.id = exchangeID()
		if err := h.r.st.storeExchange(ctx, y); err != nil {
			t.Fatal(err)
		}
		if n := len(h.history("test:s1")); n != 4 {
			t.Errorf("a new exchange was not stored: %d messages", n)
		}
	})
}

// flaky is a channel whose first failing sends fail (a platform that refused
// the post): the message counts as not delivered.
type flaky struct {
	recorder
	failures atomic.Int32
}

func (f *flaky) Send(ctx context.Context, o adapters.Outbound) error {
	_ = f.recorder.Send(ctx, o)
	if f.failures.Load() > 0 {
		f.failures.Add(-1)
		return errors.New("platform refused the post")
	}
	return nil
}

// covers M7, M3: a message sent again with an id already answered gets the
// stored answer again, marked Replayed, with no model call and nothing stored
// twice; commands are replayed the same way. A turn that ended in an error
// keeps nothing under its id (issue 37, M2): the message sent again with it is
// a new turn, answered once the model is back. Without Replay (a platform's
// redelivery) an answer already delivered is not posted again.
func TestRouter_M7_ReplayByMessageID(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		mem := map[string]*memLLM{}
		h := newHarness(t, driver, withMem(mem))
		calls := func() int {
			n := 0
			for _, m := range mem {
				n += len(m.requests())
			}
			return n
		}
		in := adapters.Inbound{Channel: "test", SessionKey: "test:s1", User: "test:u1", Text: "hello", ReplyTo: "r1",
			EventID: "console:m1", Replay: true}
		h.sayAs(in)
		first := expect(t, h.rec.take(), "reply")
		if first[0].Replayed || calls() != 1 {
			t.Fatalf("first answer %+v after %d calls", first[0], calls())
		}
		h.sayAs(in)
		again := expect(t, h.rec.take(), "reply")
		if o := again[0]; !o.Replayed || o.Text != first[0].Text || o.Model != first[0].Model || o.SessionKey != "test:s1" {
			t.Errorf("re-sent message got %+v, want the first answer marked Replayed", o)
		}
		if n := calls(); n != 1 {
			t.Errorf("%d model calls, want 1: the replay paid again", n)
		}
		if n := len(h.history("test:s1")); n != 2 {
			t.Errorf("history has %d messages, want 2: the replay stored again", n)
		}

		// A platform's redelivery of an answered, delivered event: silence.
		in.Replay = false
		h.sayAs(in)
		expect(t, h.rec.take(), "")

		// A command, and a turn that fails, are replayed the same way.
		status := adapters.Inbound{Channel: "test", SessionKey: "test:s1", User: "test:u1", Text: "/status", ReplyTo: "r1",
			EventID: "console:m2", Replay: true}
		h.sayAs(status)
		s1 := expect(t, h.rec.take(), "reply")
		h.sayAs(status)
		if s2 := expect(t, h.rec.take(), "reply"); !s2[0].Replayed || s2[0].Text != s1[0].Text || s2[0].Ephemeral != s1[0].Ephemeral {
			t.Errorf("replayed /status = %+v, want %+v marked Replayed", s2[0], s1[0])
		}
		for _, m := range mem {
			m.fail = func(llm.Request) error {
				return &failover.Failure{Reason: classify.ReasonFormat, Class: classify.ClassDeterministic, Message: "bad request"}
			}
		}
		bad := adapters.Inbound{Channel: "test", SessionKey: "test:s1", User: "test:u1", Text: "fail please", ReplyTo: "r1",
			EventID: "console:m3", Replay: true}
		h.sayAs(bad)
		expect(t, h.rec.take(), "error")
		before := calls()
		for _, m := range mem {
			m.fail = nil // the model is back
		}
		h.sayAs(bad)
		if again := expect(t, h.rec.take(), "reply"); again[0].Replayed || calls() == before {
			t.Errorf("the failed message sent again with its id = %+v after %d calls, want a new answer", again[0], calls()-before)
		}
		before = calls()

		// Taken, but no answer stored (its turn runs elsewhere, or stopped).
		lost := adapters.Inbound{Channel: "test", SessionKey: "test:s1", User: "test:u1", Text: "hello?", ReplyTo: "r1",
			EventID: "console:m4", Replay: true}
		if taken, _, err := h.r.st.claimEvent(context.Background(), lost, t0); err != nil || !taken {
			t.Fatalf("claim: %v %v", taken, err)
		}
		h.sayAs(lost)
		if o := expect(t, h.rec.take(), "error"); !strings.Contains(o[0].Text, "no stored answer") || !strings.Contains(o[0].Text, "new id") {
			t.Errorf("answer = %q", o[0].Text)
		}
		if calls() != before {
			t.Error("a message id taken before led to a model call")
		}
	})
}

// covers M7, M3: an answer stored but never delivered (the platform refused the
// post, or the process died in between) is delivered when the platform
// delivers the event again, without a model call; once delivered, a further
// redelivery is dropped.
func TestRouter_M7_UndeliveredAnswerDeliveredOnRedelivery(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		mem := map[string]*memLLM{}
		h := newHarness(t, driver, withMem(mem))
		f := &flaky{recorder: recorder{name: "flaky"}}
		f.failures.Store(1)
		h.r.AddAdapter(f)
		in := adapters.Inbound{Channel: "flaky", SessionKey: "flaky:s1", User: "flaky:u1", Text: "hello", ReplyTo: "r1", EventID: "flaky:ev1"}
		h.sayAs(in)
		first := expect(t, f.take(), "reply")
		h.sayAs(in)
		again := expect(t, f.take(), "reply")
		if !again[0].Replayed || again[0].Text != first[0].Text {
			t.Errorf("redelivery got %+v, want the stored answer", again[0])
		}
		h.sayAs(in)
		expect(t, f.take(), "")
		if n := len(mem["p1"].requests()); n != 1 {
			t.Errorf("%d model calls, want 1", n)
		}
		if n := len(h.history("flaky:s1")); n != 2 {
			t.Errorf("history has %d messages, want 2", n)
		}
	})
}

// covers T5: access.channels follows a thread to its channel (Inbound.Parent),
// and access.direct_messages counts a group DM as a direct message while a
// private channel stays a channel.
func TestRouter_T5_ThreadsAndGroupDMs(t *testing.T) {
	discordThread := adapters.Inbound{Channel: "discord", SessionKey: "discord:G1:T9", User: "discord:7", Parent: "discord:G1:C1",
		Conversation: adapters.ConversationChannel}
	slackThread := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:C1:1712.0001", User: "slack:U1", Conversation: adapters.ConversationChannel}
	groupDM := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:G7:1712.0002", User: "slack:U1", Conversation: adapters.ConversationGroup}
	private := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:G8:1712.0003", User: "slack:U1", Conversation: adapters.ConversationChannel}
	dm := adapters.Inbound{Channel: "slack", SessionKey: "slack:T1:D1", User: "slack:U1", Direct: true}
	console := adapters.Inbound{Channel: "console", SessionKey: "console:default", User: "console:local", Direct: true}
	with := func(in adapters.Inbound, parent string) adapters.Inbound { in.Parent = parent; return in }
	for _, tc := range []struct {
		name   string
		access Access
		in     adapters.Inbound
		want   bool
	}{
		{"a thread of an allowed Discord channel", Access{Channels: []string{"discord:G1:C1"}}, discordThread, true},
		{"a thread of another Discord channel", Access{Channels: []string{"discord:G1:C2"}}, discordThread, false},
		{"a thread whose channel is unknown", Access{Channels: []string{"discord:G1:C1"}}, with(discordThread, ""), false},
		{"a thread of an allowed guild", Access{Channels: []string{"discord:G1"}}, discordThread, true},
		{"a thread named itself", Access{Channels: []string{"discord:G1:T9"}}, with(discordThread, ""), true},
		{"a parent that only shares a prefix", Access{Channels: []string{"discord:G1:C1"}}, with(discordThread, "discord:G1:C10"), false},
		{"a Slack thread of an allowed channel", Access{Channels: []string{"slack:T1:C1"}}, slackThread, true},
		{"a group DM without direct messages", Access{RefuseDirect: true}, groupDM, false},
		{"a group DM with direct messages", Access{}, groupDM, true},
		{"a private channel without direct messages", Access{RefuseDirect: true}, private, true},
		{"a direct message without direct messages", Access{RefuseDirect: true}, dm, false},
		{"the console is always direct and allowed", Access{RefuseDirect: true}, console, true},
	} {
		r := &Router{cfg: Config{Access: tc.access}}
		if got := r.allowed(tc.in); got != tc.want {
			t.Errorf("%s: allowed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// covers T5, T7: when the database cannot be written, a turn of a refused
// person and a turn that cannot begin each give one clear answer, and no model
// is called.
func TestRouter_T7_OneAnswerNoCallWhenTheTurnCannotBegin(t *testing.T) {
	mem := map[string]*memLLM{}
	h := newHarness(t, testdb.SQLite, withMem(mem))
	err := h.db.Callback().Update().Before("gorm:update").Register("test:refuse-begin", func(tx *gorm.DB) {
		if tx.Statement.Table == (Entry{}).TableName() {
			_ = tx.AddError(errInjected)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	out := expect(t, h.say("test:s1", "hello"), "error")
	if !strings.Contains(out[0].Text, "nothing was sent to a model") {
		t.Errorf("error = %q", out[0].Text)
	}
	if n := len(mem["p1"].requests()); n != 0 {
		t.Errorf("%d model calls for a turn that could not begin", n)
	}
}

// covers M7 (issue 37, M1): an id answered for one message answers only that
// message: the same id from another session, another person, or with other
// text gets a clear error, never another person's answer, and no model call.
func TestRouter_M7_IdsAreScopedToTheirMessage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		mem := map[string]*memLLM{}
		h := newHarness(t, driver, withMem(mem))
		alice := adapters.Inbound{Channel: "test", SessionKey: "test:alice", User: "test:alice", Text: "what is my salary?", ReplyTo: "r",
			EventID: "console:id:1", Replay: true}
		h.sayAs(alice)
		answer := expect(t, h.rec.take(), "reply")[0].Text
		calls := len(mem["p1"].requests())
		for name, in := range map[string]adapters.Inbound{
			"another session and person": {Channel: "test", SessionKey: "test:bob", User: "test:bob", Text: "hello", ReplyTo: "r", EventID: "console:id:1", Replay: true},
			"another person":             {Channel: "test", SessionKey: "test:alice", User: "test:bob", Text: "what is my salary?", ReplyTo: "r", EventID: "console:id:1", Replay: true},
			"other text":                 {Channel: "test", SessionKey: "test:alice", User: "test:alice", Text: "something else", ReplyTo: "r", EventID: "console:id:1", Replay: true},
		} {
			h.sayAs(in)
			out := expect(t, h.rec.take(), "error")
			if strings.Contains(out[0].Text, answer) || !strings.Contains(out[0].Text, "used before for another message") || out[0].SessionKey != in.SessionKey {
				t.Errorf("%s: got %+v", name, out[0])
			}
		}
		if n := len(mem["p1"].requests()); n != calls {
			t.Errorf("%d model calls for messages with a taken id", n-calls)
		}
		h.sayAs(alice) // the same message: its answer again
		if o := expect(t, h.rec.take(), "reply")[0]; !o.Replayed || o.Text != answer {
			t.Errorf("alice's own replay = %+v", o)
		}
	})
}
