package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// startFake starts a fake LLM server on 127.0.0.1 for one test.
func startFake(t *testing.T, opts ...fakeprovider.Option) *fakeprovider.Server {
	t.Helper()
	srv := fakeprovider.New(opts...)
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// testConfig writes a config with the primary on provider p1 and two fallbacks
// on provider p2 (so a billing disable of p1's profile leaves p2 usable, D2).
func testConfig(t *testing.T, srv *fakeprovider.Server, extra string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`storage: {driver: sqlite, dsn: %q}
channels:
  console: {enabled: true, format: jsonl}
providers:
  p1: {base_url: %q}
  p2: {base_url: %q}
auth:
  profiles:
    p1:main: {provider: p1, key: "${DETOUR_TEST_P1_KEY:-sk-CANARY-p1-0001}"}
    p2:main: {provider: p2, key: "sk-CANARY-p2-0002"}
agents:
  defaults:
    model: {primary: p1/primary, fallbacks: [p2/fallback-1, p2/fallback-2]}
    timeouts: {idle_seconds: 5, attempt_seconds: 20, run_seconds: 60}
%s`, filepath.Join(dir, "bot.db"), srv.BaseURL("p1"), srv.BaseURL("p2"), extra)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type outLine struct {
	Type     string `json:"type"`
	Session  string `json:"session"`
	Text     string `json:"text"`
	Model    string `json:"model"`
	Replayed bool   `json:"replayed"`
}

func parseLines(t *testing.T, s string) []outLine {
	t.Helper()
	var out []outLine
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var o outLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}

// TestRun_JSONL_N1_FallbackNoticeThenReply drives the whole bot over the console
// jsonl contract against a fake provider: the primary fails with
// insufficient_quota, so the turn shows exactly one notice then the first
// fallback's reply; the next message is answered by the fallback with no notice.
// covers N1, N3, N4, B5, O2, D2
func TestRun_JSONL_N1_FallbackNoticeThenReply(t *testing.T) {
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeInsufficientQuota})
	path := testConfig(t, srv, "")
	in := `{"session": "s1", "user": "u1", "text": "hello"}` + "\n" + `{"session": "s1", "text": "and again"}` + "\n"
	var stdout, stderr syncbuf.Buffer
	code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	lines := parseLines(t, stdout.String())
	if len(lines) != 3 {
		t.Fatalf("want notice, reply, reply; got %d lines:\n%s", len(lines), stdout.String())
	}
	if l := lines[0]; l.Type != "notice" || l.Session != "s1" || l.Model != "" ||
		!strings.HasPrefix(l.Text, "↪️ model fallback: p2/fallback-1 (selected p1/primary; out of credits") {
		t.Errorf("line 1 = %+v, want the N1 notice", l)
	}
	if l := lines[1]; l.Type != "reply" || l.Session != "s1" || l.Model != "p2/fallback-1" || l.Text == "" {
		t.Errorf("line 2 = %+v, want the fallback's reply", l)
	}
	if l := lines[2]; l.Type != "reply" || l.Model != "p2/fallback-1" {
		t.Errorf("line 3 = %+v, want a reply from the fallback with no notice", l)
	}
	if strings.Contains(stdout.String(), "quota") {
		t.Errorf("an attempt-level error reached the user (B5):\n%s", stdout.String())
	}
	if s := stdout.String() + stderr.String(); strings.Contains(s, "CANARY") {
		t.Errorf("a secret leaked (P4):\n%s", s)
	}
	if n := srv.CallCount(fakeprovider.Filter{Provider: "p2"}); n != 2 {
		t.Errorf("fallback calls = %d, want 2", n)
	}
}

// TestRun_JSONL_SessionsAndErrors checks the jsonl contract details: plain-text
// lines go to session "default", a malformed line yields one error line and the
// bot goes on, and stdout carries nothing but JSON lines.
func TestRun_JSONL_SessionsAndErrors(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "")
	in := "plain hello\n{not json\n" + `{"session": "s2", "text": "/status"}` + "\n"
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	lines := parseLines(t, stdout.String())
	bySession := map[string][]outLine{}
	for _, l := range lines {
		bySession[l.Session] = append(bySession[l.Session], l)
	}
	d := bySession["default"]
	if len(d) != 2 {
		t.Fatalf("session default: %+v", d)
	}
	var sawReply, sawError bool
	for _, l := range d {
		sawReply = sawReply || (l.Type == "reply" && l.Model == "p1/primary")
		sawError = sawError || (l.Type == "error" && strings.Contains(l.Text, "not valid JSON"))
	}
	if !sawReply || !sawError {
		t.Errorf("session default lines: %+v", d)
	}
	if s := bySession["s2"]; len(s) != 1 || s[0].Type != "reply" || !strings.Contains(s[0].Text, "p1/primary") {
		t.Errorf("/status in s2: %+v", s)
	}
}

// TestRun_SignalDrainsInFlight checks that a signal (ctx end) stops reading but
// lets the in-flight turn finish and be delivered, and the exit code is 0.
func TestRun_SignalDrainsInFlight(t *testing.T) {
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOK, Delay: 400 * time.Millisecond, Reply: "slow answer"})
	path := testConfig(t, srv, "")
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, []string{"--config", path}, pr, &stdout, &stderr) }()
	if _, err := io.WriteString(pw, `{"session": "s1", "text": "hi"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.CallCount(fakeprovider.Filter{Provider: "p1"}) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the turn never reached the provider; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel() // as SIGINT would
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the bot did not stop after the signal")
	}
	lines := parseLines(t, stdout.String())
	if len(lines) != 1 || lines[0].Type != "reply" || lines[0].Text != "slow answer" {
		t.Errorf("in-flight turn not delivered: %q", stdout.String())
	}
}

func TestRun_BadConfigExit2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents:\n  defaults:\n    model: {primary: x/y}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncbuf.Buffer
	code := dispatch(context.Background(), []string{"run", "--config", path}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), path+":5: agents.defaults.model.primary:") {
		t.Errorf("stderr lacks file:line: key: %s", stderr.String())
	}
	if stdout.String() != "" {
		t.Errorf("stdout not empty: %q", stdout.String())
	}
	for _, args := range [][]string{{"--format", "xml"}, {"--log-level", "loud"}, {"extra"}} {
		code := dispatch(context.Background(), append([]string{"run", "--config", testConfig(t, startFake(t), "")}, args...), strings.NewReader(""), io.Discard, io.Discard)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestRun_NoChannel(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "")
	data, _ := os.ReadFile(path)
	_ = os.WriteFile(path, bytes.Replace(data, []byte("enabled: true, format: jsonl"), []byte("enabled: false"), 1), 0o600)
	var stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "no channel is enabled") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestDispatch(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"version"}, nil, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "detour ") {
		t.Errorf("version: %d %q", code, stdout.String())
	}
	stdout.Reset()
	if code := dispatch(context.Background(), []string{"--help"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "bot check") {
		t.Errorf("help: %d %q", code, stdout.String())
	}
	if code := dispatch(context.Background(), []string{"bogus"}, nil, &stdout, &stderr); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

func TestDemoConfig(t *testing.T) {
	cfg, err := demoConfig("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Storage.DSN != "detour-demo.db" || cfg.Channels.Console.Format != "text" || cfg.Admin.Channel != "console" {
		t.Errorf("demo config = %+v", cfg)
	}
	if got := joinRefs(cfg.Agents.Defaults.Model.Fallbacks); got != "backup/fallback-1 -> backup/fallback-2" {
		t.Errorf("fallbacks = %s", got)
	}
	if cfg.Providers["demo"].BaseURL != "http://127.0.0.1:1/demo/v1" {
		t.Errorf("base url = %s", cfg.Providers["demo"].BaseURL)
	}
}

// TestBinary_Demo builds the real binary and drives the embedded demo over
// stdin/stdout in a fresh folder: a typed message is answered, /status works, a
// #fail marker produces the fallback notice (N1), and end of input exits 0.
func TestBinary_Demo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildBot(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stdin = strings.NewReader("hello there\n/status\nhi #fail:insufficient_quota\n")
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("bot: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("bot did not exit at end of input\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	out := stdout.String()
	sc := bufio.NewScanner(strings.NewReader(out))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 || !strings.Contains(lines[0], "hello there") {
		t.Errorf("first line is not the answer: %q", out)
	}
	if !strings.Contains(out, "selected model: demo/primary") {
		t.Errorf("/status output missing: %q", out)
	}
	if !strings.Contains(out, "↪️ model fallback: backup/fallback-1 (selected demo/primary; out of credits") {
		t.Errorf("fallback notice missing: %q", out)
	}
	if !strings.Contains(stderr.String(), "detour demo") || strings.Contains(out, "detour demo") {
		t.Errorf("the banner must be on stderr only")
	}
	if _, err := os.Stat(filepath.Join(dir, "detour-demo.db")); err != nil {
		t.Errorf("demo database not in the working folder: %v", err)
	}
	t.Logf("demo transcript:\n%s", out)
}

// TestStartup_Ready measures start-up to ready (config parsed, SQLite opened and
// migrated, engine, router and adapters wired) on a fresh database.
func startOnce(t testing.TB, cfgPath, db string) time.Duration {
	start := time.Now()
	src := configSource{path: cfgPath}
	cfg, err := src.load()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Storage.DSN = db
	sys, err := app.New(context.Background(), cfg, app.Options{Stdin: strings.NewReader(""), Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	sys.Close()
	return d
}

// BenchmarkStartup measures start-up to ready on a fresh SQLite database.
func BenchmarkStartup(b *testing.B) {
	srv := fakeprovider.New()
	if err := srv.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	dir := b.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	_ = os.WriteFile(cfgPath, []byte(fmt.Sprintf("channels: {console: {format: jsonl}}\nproviders:\n  p1: {base_url: %q}\nagents: {defaults: {model: {primary: p1/primary}}}\n", srv.BaseURL("p1"))), 0o600)
	var ready time.Duration
	n := 0
	for b.Loop() {
		ready += startOnce(b, cfgPath, filepath.Join(dir, fmt.Sprintf("b%d.db", n)))
		n++
	}
	// ns/op includes closing (the WAL checkpoint); ready-ms is start-up alone.
	b.ReportMetric(float64(ready.Microseconds())/1000/float64(n), "ready-ms")
}

// covers T5 through the console jsonl channel: a user not in access.users gets
// one short refusal per line and causes no provider call; a listed user is
// answered.
func TestRun_JSONL_T5_AccessRefusesStrangers(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "access: {users: [console:alice]}\n")
	in := `{"session": "s1", "user": "mallory", "text": "spend your keys"}
{"session": "s1", "user": "mallory", "text": "/model p2/fallback-1"}
{"session": "s2", "user": "alice", "text": "hello"}
`
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := parseLines(t, stdout.String())
	if len(lines) != 3 || lines[0].Type != "error" || lines[1].Type != "error" || lines[2].Type != "reply" {
		t.Fatalf("output: %q", stdout.String())
	}
	if !strings.Contains(lines[0].Text, "access.users") {
		t.Errorf("refusal: %q", lines[0].Text)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("%d provider calls, want 1 (alice's only)", n)
	}
}

// covers T6 through the console jsonl channel: the per-user daily count is
// stored, so a restarted bot still refuses a user past the budget, with no
// provider call.
func TestRun_JSONL_T6_DailyBudgetSurvivesARestart(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "limits: {per_user_daily_paid_calls: 1}\n")
	run := func(lines string) []outLine {
		var stdout, stderr syncbuf.Buffer
		if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(lines), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return parseLines(t, stdout.String())
	}
	if out := run(`{"user": "alice", "text": "one"}` + "\n"); len(out) != 1 || out[0].Type != "reply" {
		t.Fatalf("first run: %+v", out)
	}
	calls := len(srv.Calls())
	out := run(`{"user": "alice", "text": "two"}` + "\n" + `{"session": "s2", "user": "bob", "text": "hi"}` + "\n")
	if len(out) != 2 || out[0].Type != "error" || !strings.Contains(out[0].Text, "daily limit of 1 paid calls") || out[1].Type != "reply" {
		t.Fatalf("after a restart: %+v", out)
	}
	if n := len(srv.Calls()) - calls; n != 1 {
		t.Fatalf("%d provider calls after the restart, want 1 (bob's)", n)
	}
}

// covers U1, T6 through the console jsonl channel: a provider that never
// reports usage is counted by the estimate, so the per-user dollar cap stops
// its user, and /usage says the tokens were estimated.
func TestRun_JSONL_U1_DollarCapActsWithoutReportedUsage(t *testing.T) {
	srv := startFake(t, fakeprovider.WithRules(fakeprovider.Rule{NoUsage: true}))
	path := testConfig(t, srv, "models:\n  p1/primary: {usd_per_mtok_in: 500, usd_per_mtok_out: 500}\nlimits: {per_user_daily_usd: 0.05}\n")
	var lines strings.Builder
	for range 40 {
		lines.WriteString(`{"user": "alice", "text": "a question about the release plan"}` + "\n")
	}
	lines.WriteString(`{"user": "alice", "text": "/usage"}` + "\n")
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(lines.String()), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := parseLines(t, stdout.String())
	replies, refused := 0, 0
	for _, o := range out[:len(out)-1] {
		switch {
		case o.Type == "reply":
			replies++
		case o.Type == "error" && strings.Contains(o.Text, "daily limit of $0.05"):
			refused++
		default:
			t.Fatalf("unexpected line %+v", o)
		}
	}
	if replies == 0 || refused == 0 || replies+refused != 40 {
		t.Fatalf("%d answered, %d refused: the $0.05 cap must stop alice although the provider reports no usage", replies, refused)
	}
	if calls := len(srv.Calls()); calls != replies {
		t.Fatalf("%d provider calls for %d answers: a refused line must cost no call", calls, replies)
	}
	usage := out[len(out)-1]
	if !strings.Contains(usage.Text, fmt.Sprintf("your usage today (%s UTC): %d paid call(s)", time.Now().UTC().Format(time.DateOnly), replies)) ||
		!strings.Contains(usage.Text, "estimated: the provider sent no usage") {
		t.Fatalf("/usage: %+v", usage)
	}
}
