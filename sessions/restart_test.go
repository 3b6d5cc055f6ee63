//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// covers M8, M1: PostgreSQL is killed while three turns wait for their models,
// and started again. Every answer is delivered (after the notice that it is not
// saved yet), and once the database is back each is in its conversation's
// history, once; nothing was paid for twice. The server is the test's own
// (testdb.OwnPostgres), so killing it disturbs no other test.
func TestRouter_M8_PostgresKilledMidTurn(t *testing.T) {
	pg := testdb.OwnPostgres(t)
	const turns = 3
	started, release := make(chan struct{}, turns), make(chan struct{})
	mem := map[string]*memLLM{}
	for _, p := range []string{"p1", "p2", "p3"} {
		mem[p] = &memLLM{provider: p, fail: func(llm.Request) error {
			started <- struct{}{}
			<-release // the model answers once the database is gone
			return nil
		}}
	}
	h := newHarness(t, testdb.SQLite, withMem(mem), func(_ *Config, h *harness) { h.driver, h.dsn = testdb.Postgres, pg.DSN() })
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("test:inflight-%d", i) }
	for i := range turns {
		h.r.Handle(ctx, adapters.Inbound{Channel: "test", SessionKey: key(i), User: "test:u1", Text: fmt.Sprintf("question %d", i), ReplyTo: key(i)})
	}
	for range turns {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the turns did not reach their model calls")
		}
	}
	pg.Kill()
	close(release)
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := h.r.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	answers := map[string]string{}
	for _, o := range h.rec.take() {
		switch o.Kind {
		case adapters.KindReply:
			if answers[o.SessionKey] != "" {
				t.Errorf("%s answered twice", o.SessionKey)
			}
			answers[o.SessionKey] = o.Text
		case adapters.KindError:
			t.Errorf("%s got an error: %s", o.SessionKey, o.Text)
		}
	}
	if len(answers) != turns {
		t.Fatalf("%d of %d answers delivered", len(answers), turns)
	}

	pg.Start()
	deadline := time.Now().Add(30 * time.Second)
	for h.r.unsaved.pending() && time.Now().Before(deadline) {
		_ = h.r.Drain(ctx) // writes what waits; the pool reconnects as it goes
		time.Sleep(50 * time.Millisecond)
	}
	for i := range turns {
		got := h.history(key(i))
		want := fmt.Sprintf("user:question %d | assistant:%s", i, answers[key(i)])
		if roles(got) != want {
			t.Errorf("history of %s = %q, want %q", key(i), roles(got), want)
		}
	}
	calls := 0
	for _, m := range mem {
		calls += len(m.requests())
	}
	if calls != turns {
		t.Errorf("%d model calls, want %d", calls, turns)
	}
	if s := h.logs.String(); !strings.Contains(s, "stored now") {
		t.Errorf("no log line says the kept answers were stored:\n%s", s)
	}
}
