//go:build cgo

package sessions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// covers M4 (issue 37): an exchange written late (kept in memory while the
// database failed, M8) reads in the place of the time it was answered, and
// compaction drops what comes before its mark in that order, on every driver.
func TestStore_M4_HistoryInAnsweredOrder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, withMem(map[string]*memLLM{}))
		ctx, key := context.Background(), "test:order"
		h.say(key, "first")
		at := func(d time.Duration) time.Time { return t0.Add(d) }
		x := func(id, text string, when time.Time) exchange {
			return exchange{id: id, key: key, messages: []Message{
				{SessionKey: key, Role: "user", Content: text, CreatedAt: when},
				{SessionKey: key, Role: "assistant", Content: "re " + text, CreatedAt: when}}}
		}
		// The third exchange is written before the second, as a replica's
		// turn is while another holds the second in memory.
		for _, e := range []exchange{x("x3", "third", at(time.Hour+3*time.Second)), x("x2", "second", at(time.Hour+2*time.Second))} {
			if err := h.r.st.storeExchange(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		hist, err := h.r.st.history(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := contents(hist), "first | you said: first | second | re second | third | re third"; !strings.Contains(got, "second | re second | third") ||
			!strings.HasPrefix(got, "first") {
			t.Fatalf("history = %q, want the answered order %q", got, want)
		}
		// Compaction keeping from "third" on drops "second" although it was
		// written after "third".
		var third Message
		for _, m := range hist {
			if m.Content == "third" {
				third = m
			}
		}
		if err := h.r.st.compact(ctx, key, third.ID, nil); err != nil {
			t.Fatal(err)
		}
		if hist, _ = h.r.st.history(ctx, key); contents(hist) != "third | re third" {
			t.Fatalf("after compaction the history is %q, want only the third exchange", contents(hist))
		}
	})
}

// contents is the messages' texts, answers shortened to what follows "] ".
func contents(msgs []Message) string {
	var s []string
	for _, m := range msgs {
		c := m.Content
		if i := strings.Index(c, "] "); i >= 0 {
			c = c[i+2:]
		}
		s = append(s, c)
	}
	return strings.Join(s, " | ")
}

// covers M4, M8 (issue 37): two replicas on one PostgreSQL server, which is
// killed while replica A's turn waits for its model and started again before
// replica B answers the next message of the same conversation. A keeps the
// answer in memory (M8); B's turn finds it pending and waits for it:
//   - when A writes it meanwhile, B's prompt holds it;
//   - when A does not within the bound, B answers without it and says so.
//
// Either way the history reads first, second, third once A has written it.
func TestReplicas_M4_OrderAcrossPostgresRestart(t *testing.T) {
	pg := testdb.OwnPostgres(t)
	var block sync.Mutex // held: the next "second" question waits for release
	started, release := make(chan struct{}, 1), make(chan struct{})
	mem := map[string]*memLLM{}
	mem["p1"] = &memLLM{provider: "p1", fail: func(req llm.Request) error {
		if strings.HasSuffix(req.Messages[len(req.Messages)-1].Content, "second") && block.TryLock() {
			started <- struct{}{}
			<-release
		}
		return nil
	}}
	onPG := func(_ *Config, h *harness) { h.driver, h.dsn = testdb.Postgres, pg.DSN() }
	a := newHarness(t, testdb.SQLite, withMem(mem), onPG)
	var hook struct {
		sync.Mutex
		fn func()
	}
	b := &harness{t: t, fake: a.fake, url: a.url, calls: a.calls, clock: a.clock, rec: &recorder{name: "test"}, admin: &recorder{name: "console"},
		logs: a.logs, driver: a.driver, dsn: a.dsn, idle: a.idle, logLevel: a.logLevel, clients: a.clients,
		routerClock: hookedClock{Clock: a.clock, onSleep: func(d time.Duration) {
			hook.Lock()
			fn := hook.fn
			hook.fn = nil
			hook.Unlock()
			if d == earlierPoll && fn != nil {
				fn()
			}
		}}}
	b.open(a.cfg)
	ctx := context.Background()

	// loseSecond answers "second" in key on A while the database is down, so
	// A keeps the exchange in memory, and brings the database back.
	loseSecond := func(key string) {
		t.Helper()
		a.say(key, "first")
		block = sync.Mutex{}
		release = make(chan struct{})
		a.r.Handle(ctx, adapters.Inbound{Channel: "test", SessionKey: key, User: "test:u1", Text: "second", ReplyTo: key})
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the second turn did not reach its model")
		}
		pg.Kill()
		close(release)
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_ = a.r.Drain(dctx) // the kept answer cannot be written yet
		out := a.rec.take()
		if !strings.Contains(dump(out), "not saved yet") || !a.r.unsaved.pending() {
			t.Fatalf("A did not keep the second answer in memory:\n%s", dump(out))
		}
		pg.Start()
		waitReady(t, b)
	}
	flushA := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for a.r.unsaved.pending() && time.Now().Before(deadline) {
			_ = a.r.Drain(ctx) // the pool reconnects as it goes
			time.Sleep(20 * time.Millisecond)
		}
		if a.r.unsaved.pending() {
			t.Fatal("A never wrote the kept answer")
		}
	}
	lastPrompt := func() string {
		reqs := mem["p1"].requests()
		var s []string
		for _, m := range reqs[len(reqs)-1].Messages {
			s = append(s, m.Content)
		}
		return strings.Join(s, " | ")
	}
	wantOrder := func(key string) {
		t.Helper()
		hist, err := b.r.st.history(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got := contents(hist); !strings.HasPrefix(got, "first | you said: first | second | you said: second | third | you said: third") {
			t.Errorf("history of %s = %q, want first, second, third", key, got)
		}
	}

	t.Run("A writes it while B waits", func(t *testing.T) {
		key := "test:m4-waits"
		loseSecond(key)
		hook.Lock()
		hook.fn = flushA // the database is back: A writes what it kept
		hook.Unlock()
		out := b.say(key, "third")
		if s := dump(out); strings.Contains(s, "written without it") || !strings.Contains(s, "you said: third") {
			t.Fatalf("B's answer:\n%s", s)
		}
		if p := lastPrompt(); !strings.Contains(p, "second | [p1/") {
			t.Errorf("B's prompt lacks the second exchange: %q", p)
		}
		wantOrder(key)
	})

	t.Run("A does not write it in time", func(t *testing.T) {
		key := "test:m4-late"
		loseSecond(key)
		out := b.say(key, "third")
		if s := dump(out); !strings.Contains(s, earlierNotice) || !strings.Contains(s, "you said: third") {
			t.Fatalf("B's answer does not say it was written without the earlier one:\n%s", s)
		}
		flushA()
		wantOrder(key)
		// The next turn, on either replica, waits for nothing.
		out = b.say(key, "fourth")
		if s := dump(out); strings.Contains(s, "written without it") {
			t.Fatalf("a later turn still waits:\n%s", s)
		}
		if p := lastPrompt(); !strings.Contains(p, "second | [p1/") || !strings.Contains(p, "third | [p1/") {
			t.Errorf("the fourth turn's prompt lacks an exchange: %q", p)
		}
	})
}

// hookedClock is a clock whose Sleep first calls onSleep.
type hookedClock struct {
	Clock interface {
		Now() time.Time
		Sleep(context.Context, time.Duration) error
	}
	onSleep func(time.Duration)
}

func (c hookedClock) Now() time.Time { return c.Clock.Now() }
func (c hookedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.onSleep(d)
	return c.Clock.Sleep(ctx, d)
}

// waitReady waits until h's database answers again after a restart (its pool
// drops the dead connections as it goes).
func waitReady(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.db.Exec("SELECT 1").Error != nil {
		if time.Now().After(deadline) {
			t.Fatal("the database did not come back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
