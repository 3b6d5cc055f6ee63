package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// Load of BenchmarkReplicas: sessions × messages, through two processes.
const (
	benchSessions = 1000
	benchMessages = 5
	benchDeadline = 10 * time.Minute
)

// BenchmarkReplicas drives two processes of the built binary (console jsonl,
// one shared database) with 1,000 sessions × 5 messages. Every session has one
// message in flight at a time and its messages alternate between the two
// processes, so each turn reads the history the other process wrote (M2). It
// checks that no reply is lost (each answers its own message; every session
// ends with 10 stored messages) and reports the total time, the turns per
// second, the client's round trip and the bot's own share of a turn (the
// per-turn log line's duration less its model calls) at p50 and p99.
//
// The console answers one input line at a time, in order (its jsonl contract),
// so each process runs one turn at a time: the client's round trip is mostly
// the wait behind the lines queued before it, and the throughput is that of two
// turns in flight. The bot's own share of a turn is the figure to compare.
//
//	.ci/with-postgres go test -run '^$' -bench Replicas -benchtime 1x ./cmd/bot
//
// The Postgres case is skipped, saying why, without DETOUR_TEST_POSTGRES_DSN.
func BenchmarkReplicas(b *testing.B) {
	for _, driver := range []string{testdb.Postgres, testdb.SQLite} {
		b.Run(driver, func(b *testing.B) {
			testdb.Require(b, driver)
			bin := buildBinary(b)
			for range b.N {
				replicaLoad(b, bin, driver)
			}
		})
	}
}

func buildBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "detour")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// replica is one running bot process.
type replica struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr string // its log file
}

type replyEvent struct {
	at   time.Time
	line outLine
}

func replicaLoad(b *testing.B, bin, driver string) {
	b.StopTimer()
	llm := fakeprovider.New()
	if err := llm.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer llm.Close()
	dir := b.TempDir()
	dsn := testdb.DSN(b, driver)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`storage: {driver: %s, dsn: %q}
channels: {console: {enabled: true, format: jsonl}}
providers:
  p1: {base_url: %q}
  p2: {base_url: %q}
auth:
  profiles:
    p1:main: {provider: p1, key: "sk-bench-p1-0001"}
    p2:main: {provider: p2, key: "sk-bench-p2-0002"}
agents:
  defaults:
    model: {primary: p1/primary, fallbacks: [p2/fallback-1]}
limits: {max_paid_attempts_per_minute: 1000000}
`, driver, dsn, llm.BaseURL("p1"), llm.BaseURL("p2"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	events := make(chan replyEvent, benchSessions*benchMessages*2)
	reps := make([]*replica, 2)
	for i := range reps {
		reps[i] = startReplica(b, ctx, bin, cfgPath, dir, i, events)
	}
	for i, r := range reps {
		waitLog(b, r.stderr, `"msg":"ready"`, fmt.Sprintf("replica %d ready", i))
	}

	type session struct {
		next   int // messages sent
		sentAt time.Time
	}
	sess := make([]session, benchSessions)
	text := func(s, m int) string { return fmt.Sprintf("bench s%04d m%d", s, m) }
	send := func(s int) {
		st := &sess[s]
		r := reps[(s+st.next)%2] // alternate processes: each turn reads the other's writes
		line := fmt.Sprintf(`{"session": "s%04d", "user": "u%d", "text": %q}`+"\n", s, s, text(s, st.next))
		st.sentAt = time.Now()
		st.next++
		if _, err := io.WriteString(r.stdin, line); err != nil {
			b.Fatalf("write to a replica: %v", err)
		}
	}

	b.StartTimer()
	start := time.Now()
	for s := range benchSessions {
		send(s)
	}
	var rtts []time.Duration
	lost, wrong := 0, 0
	for done := 0; done < benchSessions*benchMessages; {
		var ev replyEvent
		select {
		case ev = <-events:
		case <-ctx.Done():
			b.Fatalf("after %s: %d of %d turns answered", benchDeadline, done, benchSessions*benchMessages)
		}
		if ev.line.Type != "reply" && ev.line.Type != "error" {
			continue // a notice
		}
		var s int
		if _, err := fmt.Sscanf(ev.line.Session, "s%04d", &s); err != nil || s < 0 || s >= benchSessions {
			b.Fatalf("a reply to an unknown session: %+v", ev.line)
		}
		st := &sess[s]
		rtts = append(rtts, ev.at.Sub(st.sentAt))
		switch {
		case ev.line.Type == "error":
			lost++
			b.Logf("error instead of a reply: %+v", ev.line)
		case !strings.Contains(ev.line.Text, "you said: "+text(s, st.next-1)):
			wrong++
			b.Logf("a reply to another message: %+v", ev.line)
		}
		done++
		if st.next < benchMessages {
			send(s)
		}
	}
	total := time.Since(start)
	b.StopTimer()

	for i, r := range reps {
		_ = r.stdin.Close() // end of input: the bot drains and exits 0
		if err := r.cmd.Wait(); err != nil {
			b.Errorf("replica %d: %v", i, err)
		}
	}
	overhead, turnDur, llmDur, outcomes := turnLines(b, reps)
	stored := storedMessages(b, driver, dsn)

	turns := benchSessions * benchMessages
	if lost > 0 || wrong > 0 || len(overhead) != turns {
		b.Errorf("%d errors, %d replies to another message, %d turn log lines (want %d)", lost, wrong, len(overhead), turns)
	}
	if bad := stored[fmt.Sprint(2*benchMessages)]; bad != benchSessions {
		b.Errorf("sessions by stored message count: %v; want all %d with %d", stored, benchSessions, 2*benchMessages)
	}
	b.ReportMetric(total.Seconds(), "total-s")
	b.ReportMetric(float64(turns)/total.Seconds(), "turns/s")
	b.ReportMetric(ms(pct(rtts, 50)), "p50-rtt-ms")
	b.ReportMetric(ms(pct(rtts, 99)), "p99-rtt-ms")
	b.ReportMetric(ms(pct(overhead, 50)), "p50-overhead-ms")
	b.ReportMetric(ms(pct(overhead, 99)), "p99-overhead-ms")
	b.ReportMetric(float64(lost+wrong), "lost")
	b.Logf("%s: %d sessions × %d messages through 2 processes in %s; outcomes %v; lost %d; llm calls %d\n"+
		"  client round trip p50 %.1f ms p99 %.1f ms; turn (bot's log line) p50 %.1f ms p99 %.1f ms;\n"+
		"  of which model calls p50 %.1f ms p99 %.1f ms; the bot's own share p50 %.2f ms p99 %.2f ms",
		driver, benchSessions, benchMessages, total.Round(time.Millisecond), outcomes, lost+wrong, llm.CallCount(fakeprovider.Filter{}),
		ms(pct(rtts, 50)), ms(pct(rtts, 99)), ms(pct(turnDur, 50)), ms(pct(turnDur, 99)),
		ms(pct(llmDur, 50)), ms(pct(llmDur, 99)), ms(pct(overhead, 50)), ms(pct(overhead, 99)))
}

func startReplica(b *testing.B, ctx context.Context, bin, cfgPath, dir string, i int, events chan<- replyEvent) *replica {
	b.Helper()
	r := &replica{stderr: filepath.Join(dir, fmt.Sprintf("replica%d.log", i))}
	logf, err := os.Create(r.stderr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = logf.Close() })
	r.cmd = exec.CommandContext(ctx, bin, "run", "--config", cfgPath, "--log-format", "json", "--log-level", "info")
	r.cmd.Dir = dir
	r.cmd.Stderr = logf
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	go func() { // ends when the process closes its stdout
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l outLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				events <- replyEvent{at: time.Now(), line: l}
			}
		}
	}()
	return r
}

// waitLog waits until the log file at path contains s.
func waitLog(b *testing.B, path, s, what string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		data, _ := os.ReadFile(path)
		if strings.Contains(string(data), s) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within a minute:\n%s", what, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// turnLines reads every replica's per-turn log lines: the bot's own share of
// each turn, and the count of each outcome.
func turnLines(b *testing.B, reps []*replica) (own, turn, calls []time.Duration, outcomes map[string]int) {
	b.Helper()
	outcomes = map[string]int{}
	for _, r := range reps {
		f, err := os.Open(r.stderr)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg      string  `json:"msg"`
				Outcome  string  `json:"outcome"`
				Duration float64 `json:"duration_ms"`
				LLM      float64 `json:"llm_ms"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "turn" {
				continue
			}
			outcomes[l.Outcome]++
			own = append(own, time.Duration((l.Duration-l.LLM)*float64(time.Millisecond)))
			turn = append(turn, time.Duration(l.Duration*float64(time.Millisecond)))
			calls = append(calls, time.Duration(l.LLM*float64(time.Millisecond)))
		}
		_ = f.Close()
	}
	return own, turn, calls, outcomes
}

// storedMessages counts sessions by how many history messages they stored.
func storedMessages(b *testing.B, driver, dsn string) map[string]int {
	b.Helper()
	db, err := database.Open(context.Background(), driver, dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer database.Close(db)
	var rows []struct {
		SessionKey string
		N          int
	}
	if err := db.Raw("SELECT session_key, COUNT(*) AS n FROM session_messages GROUP BY session_key").Scan(&rows).Error; err != nil {
		b.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[fmt.Sprint(r.N)]++
	}
	return out
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
