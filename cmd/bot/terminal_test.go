package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// /dev/null is a character device but no terminal: a bot started with no
// stdin or stderr (systemd's StandardInput=null, exec.Cmd without them) is no
// person chatting. covers L1
func TestIsTerminal_DevNullIsNoTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if runtime.GOOS == "linux" && isTerminal(null) {
		t.Errorf("%s is taken for a terminal", os.DevNull)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Errorf("a pseudo-terminal (%s) is not taken for a terminal", tty.Name())
	}
}

// The demo started with stdin and stderr on /dev/null prints no "> " prompt
// and moves no log to detour-demo.log: both are for a person at a terminal.
func TestBinary_DevNullStdinIsNoChat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux tells a terminal from /dev/null here")
	}
	bin := builtBot(t)
	dir := t.TempDir()
	cmd := exec.Command(bin) // nil Stdin and Stderr: /dev/null
	cmd.Dir, cmd.Env = dir, cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exit: %v", err)
	}
	if strings.Contains(string(out), ">") {
		t.Errorf("stdout holds a prompt: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "detour-demo.log")); err == nil {
		t.Errorf("the logs went to detour-demo.log, as for a person at a terminal")
	}
}
