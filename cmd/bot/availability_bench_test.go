package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// The availability benchmarks drive built binaries through the console jsonl
// channel, so an older build runs the same script beside this one:
//
//	DETOUR_BENCH_BINARIES="before=/tmp/detour-74acf10,after=" go test -run '^$' -bench 'Flapping|Outage|OpsFlood' -benchtime 1x -timeout 60m ./cmd/bot
//
// (an empty path builds this tree). Without the variable only this tree runs.
// Every configuration below uses keys both builds know.

type benchBinary struct{ name, path string }

func benchBinaries(b *testing.B) []benchBinary {
	b.Helper()
	spec := os.Getenv("DETOUR_BENCH_BINARIES")
	if spec == "" {
		spec = "after="
	}
	var out []benchBinary
	for _, part := range strings.Split(spec, ",") {
		name, path, _ := strings.Cut(part, "=")
		if path == "" {
			path = buildBinary(b)
		}
		out = append(out, benchBinary{name, path})
	}
	return out
}

// startBinary runs bin on cfgPath (console jsonl) in dir; stop closes its input
// and waits for it.
func startBinary(b *testing.B, bin, cfgPath, dir, name string) (c jsonl, stop func()) {
	b.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--log-format", "json", "--log-level", "info")
	cmd.Dir, cmd.Stderr = dir, logf
	in, out := startPiped(b, cmd)
	waitLog(b, logf.Name(), `"msg":"ready"`, name+" ready")
	return jsonl{in: in, out: readLines(out)}, func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
	}
}

// startPiped starts cmd with pipes to its input and from its output.
func startPiped(b *testing.B, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	b.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return in, out
}

// soakTimeouts are the flapping soak's: idle 2 s, attempt 5 s (as measured
// when the issue was filed); everything else is the default.
const soakTimeouts = "idle_seconds: 2, attempt_seconds: 5, run_seconds: 60"

// BenchmarkFlapping: three providers flap every 3-6 s (429, 500, a stall; one
// provider or all of them at once) for about three minutes while two bot
// processes on one SQLite file answer 20 sessions each, one message after
// another. It reports the share of messages answered among those sent while a
// candidate was healthy, the paid calls per message, and the slowest refusal
// while every provider was down. covers A1, A3
func BenchmarkFlapping(b *testing.B) {
	for _, bin := range benchBinaries(b) {
		b.Run(bin.name, func(b *testing.B) {
			for range b.N {
				srv, conns := soakReplicas(b, bin)
				phases := fakeprovider.Flapping(fakeprovider.FlapOptions{
					Providers: soakProviders, Phases: 40, Min: 3 * time.Second, Max: 6 * time.Second, Seed: 21})
				b.ResetTimer()
				r := runSoak(b, conns, srv, phases, 20, 50*time.Millisecond, 2*time.Minute)
				b.StopTimer()
				b.ReportMetric(100*r.AnsweredShare, "answered-%")
				b.ReportMetric(r.CallsPerTurn, "calls/msg")
				b.ReportMetric(r.SlowestRefusal.Seconds(), "slowest-refusal-s")
				b.ReportMetric(r.Slowest.Seconds(), "slowest-s")
				b.Logf("%s: %d messages (%d sent while a candidate was healthy, %d while all were down), %d calls (%.2f a message), answered %.1f%% (%d), %d of the all-down ones refused, slowest %v, slowest refusal %v",
					bin.name, len(r.Turns), r.HealthyTurns, r.AllDownTurns, r.Calls, r.CallsPerTurn, 100*r.AnsweredShare, r.HealthyAnswered,
					r.AllDownRefused, r.Slowest.Round(time.Millisecond), r.SlowestRefusal.Round(time.Millisecond))
			}
		})
	}
}

// BenchmarkOutageRecovery: every provider answers 503 for 150 s, then all
// recover; messages keep coming (one a second from each of two processes). It
// reports the seconds from the recovery to the first answer. covers A1, R11
func BenchmarkOutageRecovery(b *testing.B) {
	for _, bin := range benchBinaries(b) {
		b.Run(bin.name, func(b *testing.B) {
			for range b.N {
				srv, conns := soakReplicas(b, bin)
				const outage = 150 * time.Second
				phases := []fakeprovider.Phase{
					{For: outage, Rules: []fakeprovider.Rule{{Mode: fakeprovider.ModeUnavailable503}}},
					{For: 45 * time.Second},
				}
				start := time.Now()
				b.ResetTimer()
				r := runSoak(b, conns, srv, phases, 5, time.Second, 2*time.Minute)
				b.StopTimer()
				healed := start.Add(outage)
				first := time.Duration(-1)
				for _, tr := range r.Turns {
					if tr.Kind == "reply" && tr.Done.After(healed) && (first < 0 || tr.Done.Sub(healed) < first) {
						first = tr.Done.Sub(healed)
					}
				}
				during, calls := 0, 0
				for _, tr := range r.Turns {
					if tr.Sent.Before(healed) {
						during++
					}
				}
				for _, c := range srv.Calls() {
					if c.Time.Before(healed) {
						calls++
					}
				}
				b.ReportMetric(first.Seconds(), "recovery-s")
				b.ReportMetric(float64(calls), "outage-calls")
				b.Logf("%s: first answer %v after the recovery; the %d messages sent during the outage cost %d calls (%.0f a minute)",
					bin.name, first.Round(100*time.Millisecond), during, calls, float64(calls)/outage.Minutes())
				if first < 0 || first > 35*time.Second {
					b.Errorf("%s: first answer %v after the recovery, want within 35 s", bin.name, first)
				}
			}
		})
	}
}

// soakReplicas starts a fake provider and two processes of bin on one SQLite
// file (console jsonl), with the soak's timeouts and every other default; they
// stop at the end of b.
func soakReplicas(b *testing.B, bin benchBinary) (*fakeprovider.Server, []jsonl) {
	b.Helper()
	srv := startFakeB(b)
	dir := b.TempDir()
	cfg := soakConfig(b, srv, filepath.Join(dir, "bot.db"), soakTimeouts, "jitter: 0.1", "retry_after_max_wait: 60s")
	var conns []jsonl
	for i := range 2 {
		c, stop := startBinary(b, bin.path, cfg, dir, fmt.Sprintf("replica%d", i))
		b.Cleanup(stop)
		conns = append(conns, c)
	}
	return srv, conns
}

func startFakeB(b *testing.B) *fakeprovider.Server {
	b.Helper()
	srv := fakeprovider.New()
	if err := srv.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return srv
}

// floodConns is how many idle connections BenchmarkOpsFlood holds, in
// floodChildren processes of the test binary (each within this machine's
// descriptor limit, which the benchmark cannot raise).
const (
	floodConns    = 20000
	floodChildren = 2
	floodAddrEnv  = "DETOUR_FLOOD_ADDR" // set: this process is a flood child
	floodNEnv     = "DETOUR_FLOOD_N"
)

// BenchmarkOpsFlood opens 20,000 connections to the operations endpoint of a
// bot process (whose descriptor limit is this machine's, 20,000), each sending
// one /healthz request and then idling, kept alive, while messages keep coming
// through the console. It reports how many connections the bot kept, how many
// messages the primary answered (no fallback, no error) and whether any
// provider's state changed (the metrics after the flood). covers A4, M5
func BenchmarkOpsFlood(b *testing.B) {
	for _, bin := range benchBinaries(b) {
		b.Run(bin.name, func(b *testing.B) {
			for range b.N {
				opsFlood(b, bin)
			}
		})
	}
}

// flooder is one flood child: it holds its connections until its input ends.
type flooder struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type floodReport struct {
	Held    int `json:"held"`    // connections whose /healthz request was answered
	Refused int `json:"refused"` // closed, unanswered or not accepted
	Open    int `json:"open"`    // still open when the flood ended
}

func (f *flooder) report(b *testing.B) floodReport {
	b.Helper()
	var r floodReport
	if !f.out.Scan() || json.Unmarshal(f.out.Bytes(), &r) != nil {
		b.Fatalf("a flood child said %q", f.out.Text())
	}
	return r
}

func startFlooder(b *testing.B, addr string, n int) *flooder {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodAddrEnv+"="+addr, fmt.Sprintf("%s=%d", floodNEnv, n))
	cmd.Stderr = os.Stderr
	in, out := startPiped(b, cmd)
	b.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	return &flooder{cmd: cmd, in: in, out: bufio.NewScanner(out)}
}

// floodChild dials its connections, one /healthz request each, reports, holds
// them until its input ends, and reports how many are still open.
func floodChild() int {
	addr := os.Getenv(floodAddrEnv)
	var n int
	fmt.Sscan(os.Getenv(floodNEnv), &n)
	var mu sync.Mutex
	var held []net.Conn
	refused := 0
	dials := make(chan struct{}, n)
	for range n {
		dials <- struct{}{}
	}
	close(dials)
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 5 * time.Second}
			for range dials {
				nc, err := d.Dial("tcp", addr)
				if err == nil {
					_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
					_, err = io.WriteString(nc, "GET /healthz HTTP/1.1\r\nHost: ops\r\n\r\n")
					if err == nil {
						var resp *http.Response
						if resp, err = http.ReadResponse(bufio.NewReader(nc), nil); err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							_ = resp.Body.Close()
						}
					}
					_ = nc.SetDeadline(time.Time{})
				}
				mu.Lock()
				if err != nil {
					refused++
					if nc != nil {
						_ = nc.Close()
					}
				} else {
					held = append(held, nc)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(floodReport{Held: len(held), Refused: refused})
	_, _ = io.Copy(io.Discard, os.Stdin) // hold until the parent ends the flood
	open := 0
	for _, nc := range held {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		_, err := nc.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			open++
		}
		_ = nc.Close()
	}
	_ = enc.Encode(floodReport{Open: open})
	return 0
}

func opsFlood(b *testing.B, bin benchBinary) {
	srv := startFakeB(b)
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cfg := soakConfig(b, srv, filepath.Join(dir, "bot.db"), soakTimeouts, "jitter: 0.1", "retry_after_max_wait: 60s")
	data, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append(data, []byte(fmt.Sprintf("server: {listen: %q}\n", addr))...), 0o600); err != nil {
		b.Fatal(err)
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	c, stop := startBinary(b, bin.path, cfg, dir, "bot")
	defer stop()

	b.ResetTimer()
	start := time.Now()
	var floods []*flooder
	for range floodChildren {
		floods = append(floods, startFlooder(b, addr, floodConns/floodChildren))
	}
	// Messages while the flood comes and stays.
	type answer struct{ kind, model string }
	var answers []answer
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := io.WriteString(c.in, fmt.Sprintf(`{"session": "s%d", "text": "during the flood %d"}`+"\n", i%10, i)); err != nil {
			b.Fatal(err)
		}
		a := answer{kind: "stuck"}
	wait:
		for {
			select {
			case o := <-c.out:
				if o.Type == "reply" || o.Type == "error" {
					a = answer{o.Type, o.Model}
					break wait
				}
			case <-time.After(2 * time.Minute):
				break wait
			}
		}
		answers = append(answers, a)
		time.Sleep(500 * time.Millisecond)
	}
	var held, refused, open int
	for _, f := range floods {
		r := f.report(b)
		held, refused = held+r.Held, refused+r.Refused
	}
	dialed := time.Since(start)
	for _, f := range floods {
		_ = f.in.Close()
		open += f.report(b).Open
	}
	b.StopTimer()
	primary, other := 0, 0
	for _, a := range answers {
		if a.kind == "reply" && a.model == "p1/a" {
			primary++
		} else {
			other++
		}
	}
	metrics := scrape(b, addr)
	unavailable := 0
	var failed []string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "detour_profile_available{") && strings.HasSuffix(l, " 0") {
			unavailable++
		}
		if strings.HasPrefix(l, "detour_llm_calls_total{") && !strings.Contains(l, `outcome="ok"`) {
			failed = append(failed, l)
		}
	}
	b.ReportMetric(float64(open), "conns-kept")
	b.ReportMetric(float64(primary), "primary-answers")
	b.ReportMetric(float64(other), "other-answers")
	b.ReportMetric(float64(unavailable), "profiles-down")
	b.Logf("%s (the bot's descriptor limit %d): of %d connections %d got their /healthz answer and %d did not, %d still open after %v; %d messages meanwhile: %d answered by the primary, %d otherwise; failed provider calls: %v; profiles unavailable after the flood: %d",
		bin.name, lim.Cur, floodConns, held, refused, open, dialed.Round(time.Second), len(answers), primary, other, failed, unavailable)
	if bin.name == "after" && (other > 0 || unavailable > 0 || len(failed) > 0) {
		b.Errorf("the flood touched provider state or the answers (A4)")
	}
}

// scrape reads /metrics of the bot at addr (after the flood has been released).
func scrape(b *testing.B, addr string) string {
	b.Helper()
	var last error
	for range 30 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			return string(body)
		}
		last = err
		time.Sleep(time.Second)
	}
	b.Logf("metrics not readable: %v", last)
	return ""
}

// BenchmarkStallFallback: a primary with two keys stalls mid-stream, or hangs
// before its headers, with idle_seconds 10; it reports the seconds from the
// message to the fallback's answer and the calls made. covers R5, E1
func BenchmarkStallFallback(b *testing.B) {
	for _, bin := range benchBinaries(b) {
		for _, mode := range []fakeprovider.Mode{fakeprovider.ModeStallAfterFirstChunk, fakeprovider.ModeHangBeforeHeaders} {
			b.Run(bin.name+"/"+string(mode), func(b *testing.B) {
				for range b.N {
					srv := startFakeB(b)
					dir := b.TempDir()
					cfg := fmt.Sprintf(`storage: {driver: sqlite, dsn: %q}
channels:
  console: {enabled: true, format: jsonl}
providers:
  p1: {base_url: %q}
  p2: {base_url: %q}
auth:
  profiles:
    p1:a: {provider: p1, key: "sk-stall-p1-0001"}
    p1:b: {provider: p1, key: "sk-stall-p1-0002"}
    p2:main: {provider: p2, key: "sk-stall-p2-0003"}
agents:
  defaults:
    model: {primary: p1/a, fallbacks: [p2/b]}
    timeouts: {idle_seconds: 10}
`, filepath.Join(dir, "bot.db"), srv.BaseURL("p1"), srv.BaseURL("p2"))
					path := filepath.Join(dir, "config.yaml")
					if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
						b.Fatal(err)
					}
					c, stop := startBinary(b, bin.path, path, dir, "bot")
					srv.Script(fakeprovider.Rule{Provider: "p1", Mode: mode})
					b.ResetTimer()
					start := time.Now()
					if _, err := io.WriteString(c.in, `{"session": "s", "text": "hello"}`+"\n"); err != nil {
						b.Fatal(err)
					}
					var got outLine
				wait:
					for {
						select {
						case o := <-c.out:
							if o.Type == "reply" || o.Type == "error" {
								got = o
								break wait
							}
						case <-time.After(3 * time.Minute):
							b.Fatal("no answer within 3 minutes")
						}
					}
					took := time.Since(start)
					b.StopTimer()
					calls := len(srv.Calls())
					stop()
					b.ReportMetric(took.Seconds(), "fallback-s")
					b.ReportMetric(float64(calls), "calls")
					b.Logf("%s, %s: %s from %s after %v, %d calls", bin.name, mode, got.Type, got.Model, took.Round(100*time.Millisecond), calls)
					// Two idle timeouts (20 s), then the fallback's own answer: a
					// second of it is the allowance for that answer.
					if bin.name == "after" && (got.Model != "p2/b" || took > 21*time.Second || calls > 3) {
						b.Errorf("%s: %s from %s after %v with %d calls, want the fallback within 2 x idle_seconds (and its own answer) with at most 3 calls", mode, got.Type, got.Model, took, calls)
					}
				}
			})
		}
	}
}
