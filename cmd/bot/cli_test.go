package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// SIGHUP drains like SIGTERM: the in-flight turn is answered and the bot exits 0.
func TestBinary_SIGHUPDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildBot(t)
	if err != nil {
		t.Fatal(err)
	}
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOK, Delay: 500 * time.Millisecond, Reply: "slow answer"})
	cmd := exec.Command(bin, "--config", testConfig(t, srv, ""))
	stdin, _ := cmd.StdinPipe()
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	_, _ = io.WriteString(stdin, `{"session": "s1", "text": "hi"}`+"\n")
	waitUntil(t, "the turn to reach the provider", func() bool { return srv.CallCount(fakeprovider.Filter{Provider: "p1"}) > 0 })
	_ = cmd.Process.Signal(syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGHUP")
	}
	if lines := parseLines(t, stdout.String()); len(lines) != 1 || lines[0].Text != "slow answer" {
		t.Fatalf("in-flight turn lost: %q", stdout.String())
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
