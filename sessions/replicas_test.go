//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// covers M2, D6, O1, O4, O5, N3: two routers on one database (two replicas)
// share a session's fallback override, notice state and history, and the
// profile cooldown one of them recorded; a /model typed on one is obeyed by the
// other on its next turn.
func TestReplicas_M2_ShareOverrideHistoryAndCooldown(t *testing.T) {
	testdb.Each(t, testReplicasShare)
}

func testReplicasShare(t *testing.T, driver string) {
	ctx := context.Background()
	a := newHarness(t, driver)
	b := a.replica()
	a.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})
	expect(t, a.say(key1, "hello"), "notice,reply")

	// The cooldown A recorded is read by B through its own handle.
	ps, err := b.states.Get(ctx, "p1:main")
	if err != nil || ps.CooldownUntil.IsZero() || ps.ErrorCount != 1 {
		t.Fatalf("replica B reads p1:main = %+v, %v; want A's cooldown", ps, err)
	}
	// B continues the session where A left it: on the fallback, no second
	// notice, no call to the primary inside the probe interval.
	a.clock.Advance(time.Minute)
	p1 := a.calls.count("p1")
	out := expect(t, b.say(key1, "second"), "reply")
	if out[0].Model != mFallback {
		t.Fatalf("replica B answered from %s, want the fallback A chose", out[0].Model)
	}
	if a.calls.count("p1") != p1 {
		t.Error("replica B called the primary inside the probe interval A started")
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		if hist := h.history(key1); len(hist) != 4 || hist[0].Content != "hello" || hist[2].Content != "second" {
			t.Errorf("history through %s = %+v, want both turns", name, hist)
		}
	}
	// A /model on B; A's next turn uses it.
	expect(t, b.say(key1, "/model "+mThird), "reply")
	out = expect(t, a.say(key1, "third"), "reply")
	if out[0].Model != mThird {
		t.Fatalf("replica A answered from %s after /model %s on B", out[0].Model, mThird)
	}
	st, err := b.r.Status(ctx, key1, "test")
	if err != nil || st.Selected != mThird || st.Source != "user" || st.HistoryTurns != 3 {
		t.Errorf("B's /status after A's turn = %+v, %v", st, err)
	}
}

// covers M2, V4: an outage seen by many sessions on two routers at once gives
// one admin report; a success on either router ends the incident for both, and
// the next outage is reported again.
func TestReplicas_M2_V4_OneReportPerIncident(t *testing.T) {
	testdb.Each(t, testReplicasOneReport)
}

func testReplicasOneReport(t *testing.T, driver string) {
	a := newHarness(t, driver)
	b := a.replica()
	a.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	var wg sync.WaitGroup
	for i := range 6 {
		for _, h := range []*harness{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: fmt.Sprintf("test:down:%d", i), Text: "hello"})
			}()
		}
	}
	wg.Wait()
	for _, h := range []*harness{a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := h.r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if n := len(a.admin.take()) + len(b.admin.take()); n != 1 {
		t.Fatalf("V4: %d admin reports for one incident across two routers, want 1", n)
	}
	if got := kinds(a.rec.take()) + "," + kinds(b.rec.take()); strings.Count(got, "error") != 12 {
		t.Fatalf("users got %q, want 12 errors", got)
	}
	// B's success ends the incident A reported.
	a.fake.Reset()
	a.clock.Advance(24 * time.Hour)
	expect(t, b.say("test:up", "back?"), "reply")
	a.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeModelNotFound404})
	expect(t, a.say("test:down:again", "down again"), "error")
	if rep := a.admin.take(); len(rep) != 1 {
		t.Fatalf("V4: the next incident after B's success was not reported by A:\n%s", dump(rep))
	}
}

// covers M1: NUL bytes and invalid UTF-8 in a user's message, in the answer and
// in a provider's error are stored (cleaned), never a failed write; a session
// key far over 255 bytes works.
func TestRouter_M1_DirtyTextAndLongKeys(t *testing.T) { testdb.Each(t, testDirtyText) }

func testDirtyText(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem))
	mem["p1"].fail = func(llm.Request) error {
		return &failover.Failure{Reason: classify.ReasonOverloaded, Class: classify.ClassTransient, Status: 500,
			Message: "upstream \x00 broke: \xff\xfe\xc3\x28", Provider: "p1", Model: "alpha", Profile: "p1:main"}
	}
	long := "test:" + strings.Repeat("thread-", 200) // 1.4 KB
	for _, key := range []string{key1, long, "test:\x00odd\xffkey"} {
		out := expect(t, h.say(key, "hi \x00 there \xff\xfe"), "notice,reply")
		if !strings.Contains(out[1].Text, "you said: hi") || out[1].Model != mFallback {
			t.Fatalf("%.40q: reply = %+v", key, out[1])
		}
		hist := h.history(store.CleanText(key))
		if len(hist) != 2 {
			t.Fatalf("%.40q: history = %+v, want the exchange", key, hist)
		}
		for _, m := range hist {
			if !utf8.ValidString(m.Content) || strings.ContainsRune(m.Content, 0) || !strings.HasPrefix(m.Content, "hi \uFFFD there") && !strings.Contains(m.Content, "you said: hi \uFFFD there") {
				t.Errorf("%.40q: stored message %q is not the cleaned text", key, m.Content)
			}
		}
	}
	var rows []AttemptRow
	if err := h.db.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range rows {
		if !utf8.ValidString(r.Summary) || strings.ContainsRune(r.Summary, 0) || !utf8.ValidString(r.SessionKey) || strings.ContainsRune(r.SessionKey, 0) {
			t.Errorf("attempt row %+v holds text that is not clean", r)
		}
		if strings.Contains(r.Summary, "upstream") {
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("no attempt row records the provider's error: %+v", rows)
	}
	ps, err := h.states.Get(context.Background(), "p1:main")
	if err != nil || ps.ErrorCount == 0 || !utf8.ValidString(ps.LastError) || strings.ContainsRune(ps.LastError, 0) {
		t.Errorf("p1:main = %+v, %v; want the failure recorded with clean text", ps, err)
	}
}

// covers T7: when the disk holding the database is full, a turn stops before its
// first paid call with an error that says why, the bot stays up, and turns work
// again once there is room. Root only (it mounts a small tmpfs).
func TestRouter_T7_DiskFullNoPaidCall(t *testing.T) {
	dir := testdb.SmallDisk(t, 2<<20)
	h := newHarnessTB(t, testdb.SQLite, func(_ *Config, h *harness) { h.dsn = filepath.Join(dir, "detour.db") })
	expect(t, h.say(key1, "warm up"), "reply")
	filler := testdb.FillDisk(t, dir)
	calls := len(h.fake.Calls())
	for i, key := range []string{key1, "test:new-session"} {
		out := expect(t, h.say(key, fmt.Sprintf("message %d on a full disk", i)), "error")
		if !strings.Contains(out[0].Text, "full") || !strings.Contains(out[0].Text, "nothing was sent to a model") {
			t.Errorf("error on a full disk = %q, want it to say the disk is full and nothing was sent", out[0].Text)
		}
	}
	if n := len(h.fake.Calls()) - calls; n != 0 {
		t.Fatalf("%d paid calls made while nothing could be stored", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	expect(t, h.say(key1, "room again"), "reply")
	if n := len(h.history(key1)); n != 4 {
		t.Errorf("history = %d messages, want the 2 stored exchanges", n)
	}
}

// covers M4: routers starting together on one new database, as replicas do,
// all start (every table created once, under the migration lock), in one
// process with separate handles and, below, as separate processes.
func TestRouter_M4_ReplicasStartTogether(t *testing.T) { testdb.Each(t, testReplicasStart) }

func testReplicasStart(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = startReplica(driver, dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	// Processes, on a new database and again on the existing one.
	for _, dsn := range []string{testdb.DSN(t, driver), dsn} {
		goFile := filepath.Join(t.TempDir(), "go")
		cmds := make([]*exec.Cmd, 4)
		outs := make([]strings.Builder, len(cmds))
		for i := range cmds {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
			cmds[i].Env = append(os.Environ(), replicaDriverEnv+"="+driver, replicaDSNEnv+"="+dsn, replicaGoEnv+"="+goFile)
			cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(goFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil || !strings.Contains(outs[i].String(), "REPLICA READY") {
				t.Errorf("replica process %d did not start (%v):\n%s", i, err, outs[i].String())
			}
		}
	}
}

const (
	replicaDriverEnv = "DETOUR_SESSIONS_REPLICA_DRIVER"
	replicaDSNEnv    = "DETOUR_SESSIONS_REPLICA_DSN"
	replicaGoEnv     = "DETOUR_SESSIONS_REPLICA_GO"
)

// TestMain runs a replica process of TestRouter_M4_ReplicasStartTogether when
// asked to, else the tests.
func TestMain(m *testing.M) {
	if driver := os.Getenv(replicaDriverEnv); driver != "" {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(os.Getenv(replicaGoEnv)); err == nil {
				break
			}
		}
		if err := startReplica(driver, os.Getenv(replicaDSNEnv)); err != nil {
			fmt.Println("replica:", err)
			os.Exit(1)
		}
		fmt.Println("REPLICA READY")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startReplica starts what a bot process starts on the database (store, state
// store, router) and closes it.
func startReplica(driver, dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := database.Open(ctx, driver, dsn, nil)
	if err != nil {
		return err
	}
	defer database.Close(db)
	states, err := store.NewStateStore(db)
	if err != nil {
		return err
	}
	r, err := NewRouter(baseConfig(), Options{DB: db, Engine: &failover.Engine{Store: states},
		Clients: func(string, string) (LLM, error) { return nil, fmt.Errorf("no clients") }})
	if err != nil {
		return err
	}
	r.Close()
	return nil
}

// runTwoRouters sends perSession messages in each of sessions sessions, half
// of the sessions through router a and half through b (one database), all at
// once, and checks that every reply arrives once, in order, in its own
// session, and that every exchange is stored. It returns how long it took.
func runTwoRouters(t testing.TB, a, b *harness, sessions, perSession int) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for s := range sessions {
		h := a
		if s%2 == 1 {
			h = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("test:two:%d", s)
			for m := range perSession {
				h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key, Text: fmt.Sprintf("%s msg %d", key, m)})
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, h := range []*harness{a, b} {
		if err := h.r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	next := map[string]int{}
	for _, h := range []*harness{a, b} {
		for _, o := range h.rec.take() {
			want := fmt.Sprintf("%s msg %d", o.SessionKey, next[o.SessionKey])
			if o.Kind != adapters.KindReply || !strings.HasSuffix(o.Text, "you said: "+want) {
				t.Fatalf("session %s: got %s %q, want the reply to %q", o.SessionKey, o.Kind, o.Text, want)
			}
			next[o.SessionKey]++
		}
	}
	for s := range sessions {
		if k := fmt.Sprintf("test:two:%d", s); next[k] != perSession {
			t.Fatalf("session %s got %d replies, want %d", k, next[k], perSession)
		}
	}
	var stored int64
	a.db.Model(&Message{}).Count(&stored)
	if stored != int64(2*sessions*perSession) {
		t.Fatalf("stored %d messages, want %d", stored, 2*sessions*perSession)
	}
	return took
}

// covers M2: two routers on one database answer many sessions at once; no
// reply is lost, duplicated or out of order, and every exchange is stored.
func TestReplicas_M2_ManySessionsTwoRouters(t *testing.T) { testdb.Each(t, testManyTwoRouters) }

func testManyTwoRouters(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	a := newHarness(t, driver, withMem(mem), func(_ *Config, h *harness) { h.logLevel = slog.LevelWarn })
	b := a.replica()
	took := runTwoRouters(t, a, b, 100, 5)
	t.Logf("%s: 100 sessions x 5 messages through two routers in %v", driver, took)
}

// BenchmarkReplicas_ManySessions: 1,000 sessions x 5 messages at once through
// two routers on one database (two replicas; the in-process LLM answers at
// once), per driver: the total time and turns per second. One run per
// iteration; use -benchtime=1x.
func BenchmarkReplicas_ManySessions(b *testing.B) {
	for _, driver := range testdb.Drivers {
		b.Run(driver, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				mem := map[string]*memLLM{}
				h := newHarnessTB(b, driver, withMem(mem), func(_ *Config, h *harness) { h.logLevel = slog.LevelWarn })
				r := h.replica()
				b.StartTimer()
				took := runTwoRouters(b, h, r, 1000, 5)
				b.ReportMetric(float64(took.Milliseconds()), "total-ms")
				b.ReportMetric(5000/took.Seconds(), "turns/s")
			}
		})
	}
}
