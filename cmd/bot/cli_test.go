package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// Every subcommand answers --help with its usage on stdout and exit 0; the bot
// answers --version like `bot version`.
func TestCLI_HelpAndVersion(t *testing.T) {
	for _, cmd := range []string{"run", "check", "classify", "fake-llm", "drill"} {
		for _, flag := range []string{"--help", "-h"} {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), []string{cmd, flag}, strings.NewReader(""), &stdout, &stderr)
			if code != exitOK {
				t.Errorf("%s %s: exit %d, want 0 (stderr %q)", cmd, flag, code, stderr.String())
			}
			if !strings.Contains(stdout.String(), "Usage") || !strings.Contains(stdout.String(), "-") {
				t.Errorf("%s %s: no usage on stdout: %q", cmd, flag, stdout.String())
			}
		}
	}
	for _, flag := range []string{"--version", "-version"} {
		var stdout bytes.Buffer
		if code := dispatch(context.Background(), []string{flag}, nil, &stdout, io.Discard); code != exitOK || !strings.HasPrefix(stdout.String(), "detour ") {
			t.Errorf("%s: exit %d, %q", flag, code, stdout.String())
		}
	}
	var stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check", "--bogus"}, nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "bogus") {
		t.Errorf("bad flag: exit %d, %q", code, stderr.String())
	}
}

// SIGHUP is a reload the shipped unit honours: a configuration file with a
// problem is refused (logged; the bot keeps answering on the one it started
// with), a good one drains the in-flight turn and exits 3, the status
// packaging/detour.service restarts on (RestartForceExitStatus=3).
func TestBinary_SIGHUPReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildBot(t)
	if err != nil {
		t.Fatal(err)
	}
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOK, Delay: 500 * time.Millisecond, Reply: "slow answer"})
	cfg := testConfig(t, srv, "")
	good, _ := os.ReadFile(cfg)
	cmd := exec.Command(bin, "--config", cfg, "--log-format", "json")
	stdin, _ := cmd.StdinPipe()
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	waitUntil(t, "ready", func() bool { return strings.Contains(stderr.String(), `"msg":"ready"`) })

	// A typo in the file: refused, and the bot goes on.
	if err := os.WriteFile(cfg, append(good, []byte("agents: {defaults: {model: {primary: nope/x}}}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the refusal", func() bool { return strings.Contains(stderr.String(), "reload refused") })
	_, _ = io.WriteString(stdin, `{"session": "s1", "text": "still there?"}`+"\n")
	waitUntil(t, "an answer after the refused reload", func() bool { return strings.Count(stdout.String(), "\n") == 1 })

	// The file fixed: the in-flight turn is answered, then exit 3.
	if err := os.WriteFile(cfg, good, 0o600); err != nil {
		t.Fatal(err)
	}
	calls := srv.CallCount(fakeprovider.Filter{Provider: "p1"})
	_, _ = io.WriteString(stdin, `{"session": "s1", "text": "hi"}`+"\n")
	waitUntil(t, "the turn to reach the provider", func() bool { return srv.CallCount(fakeprovider.Filter{Provider: "p1"}) > calls })
	_ = cmd.Process.Signal(syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitRestart {
			t.Fatalf("exit after a good reload: %v, want status %d\nstderr:\n%s", err, exitRestart, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGHUP")
	}
	if lines := parseLines(t, stdout.String()); len(lines) != 2 || lines[1].Text != "slow answer" {
		t.Fatalf("in-flight turn lost: %q", stdout.String())
	}
	unit, err := os.ReadFile(filepath.Join("..", "..", "packaging", "detour.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nRestartForceExitStatus=3\n", "\nRestart=on-failure\n", "\nExecReload=/bin/kill -HUP $MAINPID\n", "\nExecStart=/usr/local/bin/bot run "} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("packaging/detour.service lacks %q", strings.TrimSpace(want))
		}
	}
}

// A person chatting in a terminal (a real pty): the prompt shows, a status line
// while the turn runs (L1), log lines stay out of the chat (they go to
// detour.log), and the first Ctrl-C during a turn says that the current turn is
// being finished; the answer still arrives.
func TestBinary_TerminalChat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildBot(t)
	if err != nil {
		t.Fatal(err)
	}
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOK, Delay: 1500 * time.Millisecond, Reply: "thought about it"})
	cfgPath := testConfig(t, srv, "")
	data, _ := os.ReadFile(cfgPath)
	_ = os.WriteFile(cfgPath, bytes.Replace(data, []byte("format: jsonl"), []byte("format: text"), 1), 0o600)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Dir = dir
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal on this machine: %v", err)
	}
	defer tty.Close()
	screen := &syncbuf.Buffer{}
	go func() { _, _ = io.Copy(screen, tty) }()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok(screen.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; the terminal shows:\n%s", what, screen.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the prompt", func(s string) bool { return strings.Contains(s, "> ") })
	_, _ = io.WriteString(tty, "hello\r")
	waitFor("the turn to reach the provider", func(string) bool { return srv.CallCount(fakeprovider.Filter{Provider: "p1"}) > 0 })
	waitFor("the status line (L1)", func(s string) bool { return strings.Contains(s, "thinking") })
	_, _ = tty.Write([]byte{3}) // Ctrl-C
	waitFor("the Ctrl-C message", func(s string) bool { return strings.Contains(s, "finishing the current turn") })
	waitFor("the answer", func(s string) bool { return strings.Contains(s, "thought about it") })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, screen.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no exit after Ctrl-C:\n%s", screen.String())
	}
	sc := bufio.NewScanner(strings.NewReader(screen.String()))
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, "level=") || strings.Contains(l, "msg=") {
			t.Errorf("a log line reached the chat: %q", l)
		}
	}
	logs, err := os.ReadFile(filepath.Join(dir, "detour.log"))
	if err != nil || !strings.Contains(string(logs), "signal received") {
		t.Errorf("logs not in detour.log (%v): %q", err, logs)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// screen renders what a terminal shows for raw pty output: enough of a
// terminal for the console's own control sequences (carriage return, line
// feed, erase to end of line, save and restore the cursor, erase below).
func screen(raw string) string {
	lines := []string{""}
	row, col := 0, 0
	saveRow, saveCol := 0, 0
	put := func(r rune) {
		l := []rune(lines[row])
		for len(l) < col {
			l = append(l, ' ')
		}
		if col < len(l) {
			l[col] = r
		} else {
			l = append(l, r)
		}
		lines[row] = string(l)
		col++
	}
	for i := 0; i < len(raw); {
		switch {
		case strings.HasPrefix(raw[i:], "\x1b[K"):
			l := []rune(lines[row])
			lines[row] = string(l[:min(col, len(l))])
			i += 3
		case strings.HasPrefix(raw[i:], "\x1b[J"):
			l := []rune(lines[row])
			lines[row] = string(l[:min(col, len(l))])
			lines = lines[:row+1]
			i += 3
		case strings.HasPrefix(raw[i:], "\x1b7"):
			saveRow, saveCol = row, col
			i += 2
		case strings.HasPrefix(raw[i:], "\x1b8"):
			row, col = saveRow, saveCol
			i += 2
		case raw[i] == '\r':
			col = 0
			i++
		case raw[i] == '\n':
			row++
			if row == len(lines) {
				lines = append(lines, "")
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(raw[i:])
			put(r)
			i += size
		}
	}
	return strings.Join(lines, "\n")
}

// The README's demo transcript at a real terminal (a pty): the fallback notice
// is a line of its own before the reply, as the README shows it, though the
// reply streams; and a paste longer than the terminal's line limit is not sent
// half, but answered with what to do. covers N4, L2, T4
func TestBinary_TerminalTranscriptAsInTheReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := builtBot(t)
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = t.TempDir(), cleanEnv()
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal on this machine: %v", err)
	}
	defer tty.Close()
	raw := &syncbuf.Buffer{}
	go func() { _, _ = io.Copy(raw, tty) }()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(screen(raw.String())) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; the terminal shows:\n%s", what, screen(raw.String()))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the prompt", func(s string) bool { return strings.HasSuffix(s, "> ") })
	_, _ = io.WriteString(tty, "hello\r")
	waitFor("the answer", func(s string) bool { return strings.HasSuffix(s, "you said: hello\n> ") })
	_, _ = io.WriteString(tty, "what is 2+2? #fail:rate_limit\r")
	waitFor("the fallback's answer", func(s string) bool { return strings.HasSuffix(s, "#fail:rate_limit\n> ") })
	_, _ = io.WriteString(tty, strings.Repeat("x", 5000)+"\r")
	waitFor("the warning", func(s string) bool { return strings.Contains(s, "the most a terminal passes on in one line") })
	_, _ = tty.Write([]byte{4}) // Ctrl-D
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after Ctrl-D")
	}
	shown := screen(raw.String())
	transcript := "> hello\n[demo/primary] you said: hello\n" +
		"> what is 2+2? #fail:rate_limit\n" +
		"↪️ model fallback: backup/fallback-1 (selected demo/primary; rate limit)\n" +
		"[backup/fallback-1] you said: what is 2+2? #fail:rate_limit\n"
	if !strings.Contains(shown, transcript) {
		t.Errorf("the terminal shows:\n%s\nwant, as the README:\n%s", shown, transcript)
	}
	inReadme(t, transcript)
	if strings.Contains(shown, "you said: xxxx") {
		t.Error("the cut paste was sent")
	}
}
