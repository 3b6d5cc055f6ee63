package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// jsonlBot is the bot run over the console jsonl contract with input the test
// writes line by line.
type jsonlBot struct {
	t      *testing.T
	in     *io.PipeWriter
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	done   chan int
}

func startJSONL(t *testing.T, path string) *jsonlBot {
	t.Helper()
	pr, pw := io.Pipe()
	b := &jsonlBot{t: t, in: pw, done: make(chan int, 1)}
	go func() { b.done <- dispatch(context.Background(), []string{"--config", path}, pr, &b.stdout, &b.stderr) }()
	t.Cleanup(func() { _ = pw.Close() })
	return b
}

// send writes one input line.
func (b *jsonlBot) send(line string) {
	b.t.Helper()
	if _, err := io.WriteString(b.in, line+"\n"); err != nil {
		b.t.Fatal(err)
	}
}

// wait returns the output lines once there are n.
func (b *jsonlBot) wait(n int) []outLine {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := strings.TrimSpace(b.stdout.String())
		if out != "" && strings.Count(out, "\n")+1 >= n {
			return parseLines(b.t, out)
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("want %d output lines, have:\n%s\nstderr:\n%s", n, out, b.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the input and waits for the bot to exit 0.
func (b *jsonlBot) stop() {
	b.t.Helper()
	_ = b.in.Close()
	select {
	case code := <-b.done:
		if code != 0 {
			b.t.Fatalf("exit %d\n%s", code, b.stderr.String())
		}
	case <-time.After(30 * time.Second):
		b.t.Fatal("the bot did not stop at the end of its input")
	}
}

// covers M7, M3: over the console jsonl contract, a line sent again with an id
// already answered gets the stored answer again, marked "replayed", with no new
// model call, also after a restart; a new id is a new turn.
func TestRun_JSONL_M7_ResentIDGetsTheStoredAnswer(t *testing.T) {
	srv := startFake(t)
	path := testConfig(t, srv, "")
	first := `{"session": "s1", "id": "m-1", "text": "hello"}`
	in := first + "\n" + first + "\n" + `{"session": "s1", "id": "m-2", "text": "hello"}` + "\n"
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines := parseLines(t, stdout.String())
	if len(lines) != 3 {
		t.Fatalf("want one line per input line, got:\n%s", stdout.String())
	}
	if l := lines[0]; l.Type != "reply" || l.Replayed {
		t.Errorf("line 1 = %+v", l)
	}
	if l := lines[1]; l.Type != "reply" || !l.Replayed || l.Text != lines[0].Text || l.Model != lines[0].Model {
		t.Errorf("line 2 = %+v, want line 1's answer marked replayed", l)
	}
	if l := lines[2]; l.Type != "reply" || l.Replayed {
		t.Errorf("line 3 (a new id) = %+v, want a new answer", l)
	}
	if n := srv.CallCount(fakeprovider.Filter{}); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
	if !strings.Contains(stdout.String(), `"replayed":true`) {
		t.Errorf("the jsonl line does not say replayed:\n%s", stdout.String())
	}

	// A restart: the answer is in the database, not the process.
	stdout.Reset()
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(first+"\n"), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if l := parseLines(t, stdout.String()); len(l) != 1 || !l[0].Replayed || l[0].Text != lines[0].Text {
		t.Errorf("after a restart: %q", stdout.String())
	}
	if n := srv.CallCount(fakeprovider.Filter{}); n != 2 {
		t.Errorf("%d model calls after the restart, want 2", n)
	}
	if got := messagesOf(t, filepath.Join(filepath.Dir(path), "bot.db"), "console:s1"); len(got) != 4 {
		t.Errorf("history of console:s1 = %q, want two exchanges", got)
	}
}

// messagesOf reads a session's stored history from a SQLite file.
func messagesOf(t *testing.T, db, session string) []string {
	t.Helper()
	g, err := database.Open(context.Background(), database.DriverSQLite, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close(g)
	var rows []struct{ Role, Content string }
	if err := g.Raw("SELECT role, content FROM session_messages WHERE session_key = ? ORDER BY id", session).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Role+":"+r.Content)
	}
	return out
}

// gatedProvider passes calls to the fake provider; while held, each waits
// until the test releases it, and arrived counts the calls that came.
type gatedProvider struct {
	next    http.Handler
	held    atomic.Bool
	release chan struct{}
	arrived atomic.Int32
}

func (g *gatedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.arrived.Add(1)
	if g.held.Load() {
		<-g.release
	}
	g.next.ServeHTTP(w, r)
}

// covers T7, M8, N4: over the console jsonl contract, with the database's
// files made read-only while the bot runs (chattr +i): a line gets one error
// saying the database is read-only, and no model is called; a line whose
// answer arrives once the files turned read-only gets the notice that it is
// not saved yet and then exactly one reply; once the files are writable again
// the next line stores it first, and the history holds every answer once, in
// order. Nothing crashes. It needs root and a file system with the immutable
// flag.
func TestRun_JSONL_T7_ReadOnlyWhileRunning(t *testing.T) {
	testdb.RequireChattr(t)
	llm := startFake(t)
	gate := &gatedProvider{next: llm.Handler(), release: make(chan struct{})}
	gated := httptest.NewServer(gate)
	t.Cleanup(gated.Close)
	path := testConfig(t, llm, "")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(src), llm.BaseURL("p1"), gated.URL+"/p1/v1", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(filepath.Dir(path), "bot.db-shm")
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", shm).Run() })
	immutable := func(on bool) {
		t.Helper()
		flag := "-i"
		if on {
			flag = "+i"
		}
		if out, err := exec.Command("chattr", flag, shm).CombinedOutput(); err != nil {
			t.Fatalf("chattr %s: %v %s", flag, err, out)
		}
	}

	b := startJSONL(t, path)
	b.send(`{"session": "s1", "text": "one"}`)
	b.wait(1)
	immutable(true)
	b.send(`{"session": "s1", "text": "two"}`)
	lines := b.wait(2)
	if l := lines[1]; l.Type != "error" || !strings.Contains(l.Text, "the database is read-only") || !strings.Contains(l.Text, "nothing was sent to a model") {
		t.Errorf("line 2 = %+v, want the read-only error", l)
	}
	if n := gate.arrived.Load(); n != 1 {
		t.Errorf("%d model calls, want 1: a turn that cannot be stored was paid for", n)
	}
	immutable(false)

	gate.held.Store(true)
	b.send(`{"session": "s1", "text": "three"}`)
	for deadline := time.Now().Add(20 * time.Second); gate.arrived.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the third line never reached the model")
		}
	}
	immutable(true) // the answer is on its way; the database turns read-only
	gate.held.Store(false)
	close(gate.release)
	lines = b.wait(4)
	if l := lines[2]; l.Type != "notice" || !strings.Contains(l.Text, "not saved yet (the database is read-only)") {
		t.Errorf("line 3 = %+v, want the not-saved notice", l)
	}
	if l := lines[3]; l.Type != "reply" || l.Model != "p1/primary" || !strings.Contains(l.Text, "three") {
		t.Errorf("line 4 = %+v, want the third line's reply", l)
	}
	immutable(false)
	b.send(`{"session": "s1", "text": "four"}`)
	lines = b.wait(5)
	b.stop()
	if len(lines) != 5 || lines[4].Type != "reply" {
		t.Fatalf("want notice, then one reply, per line:\n%s", b.stdout.String())
	}
	got := messagesOf(t, filepath.Join(filepath.Dir(path), "bot.db"), "console:s1")
	var roles []string
	for _, m := range got {
		role, text, _ := strings.Cut(m, ":")
		if role == "user" {
			roles = append(roles, text)
		}
	}
	if want := "one,three,four"; strings.Join(roles, ",") != want || len(got) != 6 {
		t.Errorf("history = %q, want the exchanges of lines %s, once each, in order", got, want)
	}
}
