package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// TestRun_JSONL_A2_RefusedResponses drives the whole bot over the console
// jsonl channel while the primary's edge answers with what detour refuses: a
// redirect, a gzip body it did not ask for, an answer over max_answer_bytes.
// Every turn is answered by the fallback, the notice names the refusal (never
// "invalid request"), and a new session right after does not call the primary:
// it cools down.
// covers A2, T1, T2, N1
func TestRun_JSONL_A2_RefusedResponses(t *testing.T) {
	srv := startFake(t)
	var c jsonl
	send := func(session string) (notice, reply outLine) {
		t.Helper()
		if _, err := io.WriteString(c.in, fmt.Sprintf(`{"session": %q, "text": "hello"}`+"\n", session)); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case o := <-c.out:
				switch o.Type {
				case "notice":
					notice = o
				case "reply", "error":
					return notice, o
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: no answer", session)
			}
		}
	}
	for i, tc := range []struct {
		rule fakeprovider.Rule
		says string
	}{
		{fakeprovider.Rule{Mode: fakeprovider.ModeRedirectOtherPort}, "response refused by detour: redirect to http://127.0.0.1:"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeGzipBomb}, `response refused by detour: compressed body (Content-Encoding "gzip"`},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeChunk, Size: 2 << 20}, "response refused by detour: answer longer than limits.max_answer_bytes (1048576 bytes)"},
	} {
		srv.Reset()
		tc.rule.Provider = "p1"
		srv.Script(tc.rule)
		// Each kind on a bot of its own (a fresh database), so no case waits
		// for the cooldown the one before started.
		path := soakConfig(t, srv, filepath.Join(t.TempDir(), "bot.db"),
			"idle_seconds: 5, attempt_seconds: 20, run_seconds: 60", "jitter: 0",
			"cooldown_probe_window: 1s # no R11 probe of the cooling primary here")
		var stop func()
		c, stop = startSoakBot(t, path)
		notice, reply := send(fmt.Sprintf("new%d", i))
		if reply.Type != "reply" || reply.Model != "p2/b" {
			t.Fatalf("%s: %+v, want the fallback's reply", tc.rule.Mode, reply)
		}
		if !strings.Contains(notice.Text, tc.says) || strings.Contains(notice.Text, "invalid request") {
			t.Fatalf("%s: notice %q, want it to say %q", tc.rule.Mode, notice.Text, tc.says)
		}
		if n := srv.CallCount(fakeprovider.Filter{Provider: "p1"}); n != 1 {
			t.Fatalf("%s: %d calls to the primary, want 1", tc.rule.Mode, n)
		}
		_, reply = send(fmt.Sprintf("after%d", i))
		if reply.Type != "reply" || reply.Model != "p2/b" {
			t.Fatalf("%s, next session: %+v", tc.rule.Mode, reply)
		}
		if n := srv.CallCount(fakeprovider.Filter{Provider: "p1"}); n != 1 {
			t.Fatalf("%s: the primary was called again (%d) while it cools down", tc.rule.Mode, n)
		}
		if hits := srv.TrapHits(); len(hits) != 0 {
			t.Fatalf("T2: the redirect target was reached: %+v", hits)
		}
		stop()
	}
}
