//go:build cgo

package sessions

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

const (
	crashEnv       = "DETOUR_SESSIONS_CRASH_CHILD"
	crashDriverEnv = "DETOUR_SESSIONS_CRASH_DRIVER"
	crashDBEnv     = "DETOUR_SESSIONS_CRASH_DB"
	crashURLEnv    = "DETOUR_SESSIONS_CRASH_URL"
)

// crashChild is the child process: it serves one session, reading one message per
// stdin line and printing "ACK <reply>" once the turn is done and stored.
func crashChild(t *testing.T) {
	h := &harness{t: t, clock: failovertest.NewClock(t0), rec: &recorder{name: "test"}, admin: &recorder{name: "console"},
		logs: &syncbuf.Buffer{}, idle: time.Minute, logLevel: slog.LevelDebug, url: os.Getenv(crashURLEnv),
		driver: os.Getenv(crashDriverEnv), dsn: os.Getenv(crashDBEnv)}
	h.open(baseConfig())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		out := h.say(key1, sc.Text())
		last := out[len(out)-1]
		fmt.Fprintf(os.Stdout, "ACK %s %s\n", last.Kind, last.Model)
	}
}

// covers O2, D6, M1: a process killed while a fallback call hangs loses nothing
// that was acknowledged, and after restart the session continues on the fallback.
func TestRouter_O2_CrashDuringFallbackKeepsOverrideAndHistory(t *testing.T) {
	if os.Getenv(crashEnv) == "1" {
		crashChild(t)
		return
	}
	testdb.Each(t, testCrashDuringFallback)
}

func testCrashDuringFallback(t *testing.T, driver string) {
	h := newHarness(t, driver)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRouter_O2_CrashDuringFallbackKeepsOverrideAndHistory$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"=1", crashDriverEnv+"="+h.driver, crashDBEnv+"="+h.dsn, crashURLEnv+"="+h.url)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ACK ") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	ack := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("child exited early")
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("child did not acknowledge")
		}
		return ""
	}

	// Turn 1: acknowledged on the primary.
	fmt.Fprintln(stdin, "one")
	if l := ack(); l != "ACK reply "+mPrimary {
		t.Fatalf("turn 1: %q", l)
	}
	// Turn 2: the primary fails, the fallback call hangs; kill -9 the process then.
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeHangBeforeHeaders, Times: 1})
	fmt.Fprintln(stdin, "two")
	waitFor(t, "the fallback call to hang", func() bool { return h.calls.count("p2") >= 1 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()

	// Restart on the same database (the harness router was opened before the child
	// wrote; reopen to read fresh state like a restarted process).
	h.open(baseConfig())
	e := h.entry(key1)
	if e.ProviderOverride != "p2" || e.ModelOverride != "beta" || e.ModelOverrideSource != "auto" {
		t.Fatalf("O2: the override persisted before the hanging attempt was lost: %+v", e)
	}
	hist := h.history(key1)
	if len(hist) != 2 || hist[0].Content != "one" || hist[1].Role != "assistant" {
		t.Fatalf("acknowledged history lost or half an exchange stored: %+v", hist)
	}
	p1 := h.calls.count("p1")
	// The killed process never announced the fallback (its turn never finished),
	// so the first completed turn on it does (N3: once per state change seen).
	// Its turn's pending mark outlived it, so the person is also told that
	// the earlier message's answer was not saved (M4).
	h.clock.Advance(time.Minute) // the restarted process comes after the killed one
	out := expect(t, h.say(key1, "three"), "notice,notice,reply")
	if out[0].Text != earlierNotice {
		t.Errorf("first notice = %q, want that the earlier answer is missing", out[0].Text)
	}
	out = out[1:]
	if out[1].Model != mFallback {
		t.Fatalf("after restart answered by %s, want the fallback", out[1].Model)
	}
	if h.calls.count("p1") != p1 {
		t.Fatal("S3: the primary was called before the probe interval")
	}
	if n := len(h.history(key1)); n != 4 {
		t.Fatalf("history = %d messages, want 4", n)
	}
	// The dead turn's mark was dropped once a turn went on without it.
	expect(t, h.say(key1, "four"), "reply")
}
