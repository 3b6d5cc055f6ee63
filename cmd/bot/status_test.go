package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/healthdb"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// statusConfigFile is testConfig whose p1 key comes from a variable this
// machine does not set: `bot status` must not need it.
func statusConfigFile(t *testing.T, srv *fakeprovider.Server, driver string) (run, status string) {
	t.Helper()
	run = testConfig(t, srv, "")
	if driver == testdb.Postgres {
		withStorage(t, run, `storage: {driver: postgres, dsn: "`+testdb.DSN(t, driver)+`"}`)
	}
	src, err := os.ReadFile(run)
	if err != nil {
		t.Fatal(err)
	}
	status = strings.TrimSuffix(run, ".yaml") + "-nokeys.yaml"
	noKeys := strings.Replace(string(src), `"${DETOUR_TEST_P1_KEY:-sk-CANARY-p1-0001}"`, `"${DETOUR_STATUS_TEST_UNSET_KEY}"`, 1)
	noKeys = strings.Replace(noKeys, `"sk-CANARY-p2-0002"`, `"${DETOUR_STATUS_TEST_UNSET_KEY2}"`, 1)
	if noKeys == string(src) {
		t.Fatal("the test config changed: no key to take out")
	}
	if err := os.WriteFile(status, []byte(noKeys), 0o600); err != nil {
		t.Fatal(err)
	}
	return run, status
}

func statusRun(t *testing.T, args ...string) (health.Board, string) {
	t.Helper()
	var out, errw syncbuf.Buffer
	if code := dispatch(context.Background(), append([]string{"status"}, args...), nil, &out, &errw); code != 0 {
		t.Fatalf("bot status %v: exit %d\n%s", args, code, errw.String())
	}
	var b health.Board
	if strings.Contains(strings.Join(args, " "), "--json") {
		dec := json.NewDecoder(strings.NewReader(out.String()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			t.Fatalf("bot status --json: %v\n%s", err, out.String())
		}
	}
	return b, out.String()
}

// TestStatus_Issue38_BoardFromTheDatabase: after a fallback (p1's key out of
// credits), `bot status` shows the board from the database, with no provider
// key on the machine, as a table and as JSON, on SQLite and Postgres; the
// public board names no key and no session.
// covers issue 38, D3, N1
func TestStatus_Issue38_BoardFromTheDatabase(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		srv := startFake(t)
		srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeInsufficientQuota})
		run, status := statusConfigFile(t, srv, driver)
		in := `{"session": "s1", "text": "hello"}` + "\n"
		var stdout, stderr syncbuf.Buffer
		if code := dispatch(context.Background(), []string{"--config", run}, strings.NewReader(in), &stdout, &stderr); code != 0 {
			t.Fatalf("bot: exit %d\n%s", code, stderr.String())
		}

		b, raw := statusRun(t, "--config", status, "--json")
		if b.Version != health.Version || !b.Admin {
			t.Fatalf("schema version %d admin %v:\n%s", b.Version, b.Admin, raw)
		}
		if len(b.Providers) != 2 || b.Providers[0].Name != "p1" || len(b.Providers[0].Keys) != 1 {
			t.Fatalf("providers:\n%s", raw)
		}
		if k := b.Providers[0].Keys[0]; k.ID != "p1:main" || k.State != health.Disabled || k.Reason != "billing" {
			t.Errorf("p1:main: %+v, want disabled for billing", k)
		}
		if m := b.Providers[0].Models[0]; m.Ref != "p1/primary" || m.State != health.Disabled {
			t.Errorf("p1/primary: %+v, want disabled", m)
		}
		if len(b.Fallbacks) != 1 || b.Fallbacks[0].From != "p1/primary" || b.Fallbacks[0].To != "p2/fallback-1" || b.Fallbacks[0].Count != 1 {
			t.Errorf("fallbacks: %+v", b.Fallbacks)
		}
		kinds := map[string]bool{}
		for _, e := range b.Timeline {
			kinds[e.Kind] = true
		}
		if !kinds[health.FallbackStarted] || !kinds[health.KeyDisabled] {
			t.Errorf("timeline misses the fallback or the disable: %+v", b.Timeline)
		}
		if b.Today == nil || b.Today.Calls < 2 {
			t.Errorf("today: %+v, want the 2 calls", b.Today)
		}
		if strings.Contains(raw, "CANARY") || strings.Contains(raw, standIn) {
			t.Fatal("a key (or its placeholder) in the board")
		}

		_, text := statusRun(t, "--config", status)
		for _, want := range []string{"admin view", "p1/primary", "disabled", "key p1:main", "p1/primary → p2/fallback-1", "Today ("} {
			if !strings.Contains(text, want) {
				t.Errorf("the table misses %q:\n%s", want, text)
			}
		}
		pub, praw := statusRun(t, "--config", status, "--json", "--public")
		if pub.Admin || pub.Today != nil || strings.Contains(praw, "p1:main") || strings.Contains(praw, "console:s1") {
			t.Errorf("the public board shows keys, sessions or spend:\n%s", praw)
		}
	})
}

// TestStatus_Issue38_TwoReplicasOneBoard: two bots on one Postgres database
// (each its own connection pool and state store), each taking turns; `bot
// status` computes the same board whichever of them it sits beside, and
// healthdb reads the same state through either replica's database handle.
// covers issue 38, M1, M2
func TestStatus_Issue38_TwoReplicasOneBoard(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeInsufficientQuota})
	run, status := statusConfigFile(t, srv, testdb.Postgres)
	var wg sync.WaitGroup
	for i, sess := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := `{"session": "` + sess + `", "text": "hello"}` + "\n"
			var stdout, stderr syncbuf.Buffer
			if code := dispatch(context.Background(), []string{"--config", run}, strings.NewReader(in), &stdout, &stderr); code != 0 {
				t.Errorf("replica %d: exit %d\n%s", i, code, stderr.String())
			}
		}()
	}
	wg.Wait()
	first, _ := statusRun(t, "--config", status, "--json")
	second, _ := statusRun(t, "--config", status, "--json")
	first.At = second.At
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if string(a) != string(b) {
		t.Fatalf("two reads of the shared state differ:\n%s\n%s", a, b)
	}
	if n := first.Fallbacks; len(n) != 1 || n[0].Count != 2 {
		t.Fatalf("both replicas' sessions on the fallback: %+v", n)
	}
	// The same state through two handles (two replicas' pools), at one moment.
	cfg, code := loadForStorage("bot status", status, "", io.Discard)
	if code != exitOK {
		t.Fatalf("config: %d", code)
	}
	now := time.Now()
	var boards [2]string
	for i := range boards {
		gdb, err := database.Open(context.Background(), cfg.Storage.Driver, cfg.Storage.DSN, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		st, err := healthdb.Read(context.Background(), gdb, healthdb.Providers(cfg), cfg.Policy, now)
		database.Close(gdb)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(health.Build(st, true))
		boards[i] = string(js)
	}
	if boards[0] != boards[1] {
		t.Fatalf("two replicas' boards differ:\n%s\n%s", boards[0], boards[1])
	}
}
