//go:build cgo

package sessions

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers W1, A5, N4, L1-L3, M8: what one message shows, streamed or not, with
// no fallback, a fallback before the first text and one after partial text,
// stored or kept in memory (M8), ending in a reply, an error or a panic: each
// notice once (the fallback's above its first words when streamed), then
// exactly one final answer, on SQLite and PostgreSQL.
func TestWriter_W1_OutputSequences(t *testing.T) {
	const notice = "notice: ↪️ model fallback: p2/beta"
	cases := []struct {
		name     string
		p1, p2   string
		streamed bool
		unsaved  bool
		want     []string
	}{
		{"streamed, no fallback", "ok", "ok", true, false,
			[]string{"progress", "stream", "update p1", "update p1 answers", "progress stop", "finish reply: p1 answers"}},
		{"whole, no fallback", "ok", "ok", false, false,
			[]string{"progress", "progress stop", "send reply: p1 answers"}},
		{"streamed, fallback before the first text", "fail", "ok", true, false,
			[]string{"progress", "stream", "restart, lead " + notice, "update p2", "update p2 answers", "progress stop", "finish reply: p2 answers"}},
		{"whole, fallback before the first text", "fail", "ok", false, false,
			[]string{"progress", "send " + notice, "progress stop", "send reply: p2 answers"}},
		{"streamed, fallback after partial text", "partial", "ok", true, false,
			[]string{"progress", "stream", "update part", "restart, lead " + notice, "update p2", "update p2 answers", "progress stop", "finish reply: p2 answers"}},
		{"streamed, fallback after partial text, not stored (M8)", "partial", "ok", true, true,
			[]string{"progress", "stream", "update part", "restart, lead " + notice, "update p2", "update p2 answers",
				"send notice: ↪️ this answer is not saved yet", "progress stop", "finish reply: p2 answers"}},
		{"whole, fallback, not stored (M8)", "fail", "ok", false, true,
			[]string{"progress", "send " + notice, "send notice: ↪️ this answer is not saved yet", "progress stop", "send reply: p2 answers"}},
		{"streamed, every model fails after partial text", "partial", "fail", true, false,
			[]string{"progress", "stream", "update part", "progress stop", "finish error: all models failed"}},
		{"whole, every model fails", "fail", "fail", false, false,
			[]string{"progress", "progress stop", "send error: all models failed"}},
		{"a panic", "panic", "ok", true, false,
			[]string{"progress", "progress stop", "send error: internal error; the message was not processed"}},
	}
	testdb.Each(t, func(t *testing.T, driver string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := &tape{}
				modes := map[string]string{"p1": tc.p1, "p2": tc.p2, "p3": "fail"}
				h := newHarness(t, driver, func(c *Config, h *harness) {
					c.Fallbacks = []failover.ModelRef{mFallback}
					if !tc.streamed {
						c.NoStream = map[string]bool{"tape": true}
					}
					h.extra = append(h.extra, p)
					h.clients = func(provider, _ string) (LLM, error) {
						return &scripted{provider: provider, mode: func() string { return modes[provider] }}, nil
					}
				})
				if tc.unsaved {
					fail := failExchanges(t, h.db)
					fail.Store(-1)
					t.Cleanup(func() { // before the failing write is removed: the background writer must be done with it
						fail.Store(0)
						waitFor(t, "the background writer", func() bool { h.r.unsaved.mu.Lock(); defer h.r.unsaved.mu.Unlock(); return !h.r.unsaved.running })
					})
				}
				h.sayAs(adapters.Inbound{Channel: "tape", SessionKey: "tape:s1", User: "tape:u1", Text: "hello", ReplyTo: "r", Direct: true})
				got := p.take()
				if len(got) != len(tc.want) {
					t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
				}
				for i := range got {
					if !strings.HasPrefix(got[i], tc.want[i]) {
						t.Fatalf("event %d is %q, want %q; events:\n  %s", i, got[i], tc.want[i], strings.Join(got, "\n  "))
					}
				}
				finals := 0
				for _, e := range got {
					if strings.HasPrefix(e, "finish ") || strings.HasPrefix(e, "send reply") || strings.HasPrefix(e, "send error") {
						finals++
					}
				}
				if finals != 1 {
					t.Fatalf("%d final answers, want one", finals)
				}
			})
		}
	})
}
