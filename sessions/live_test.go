//go:build cgo

package sessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// liveAdapter is a channel with every live-reply capability; it records what the
// router asks of it, in order, with what a person would see.
type liveAdapter struct {
	recorder
	refuse bool // StartStream fails, as a workspace without streaming does

	mu     sync.Mutex
	events []string // "progress", "status:…", "stop", "update:…", "finish:kind:…"
	shown  string   // the latest version of the streamed message
}

func newLiveAdapter() *liveAdapter { return &liveAdapter{recorder: recorder{name: "live"}} }

func (l *liveAdapter) log(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *liveAdapter) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *liveAdapter) StartProgress(ctx context.Context, in adapters.Inbound) adapters.Indicator {
	l.log("progress")
	return liveIndicator{l}
}

type liveIndicator struct{ l *liveAdapter }

func (i liveIndicator) Status(text string) { i.l.log("status:" + text) }
func (i liveIndicator) Stop()              { i.l.log("stop") }

func (l *liveAdapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	if l.refuse {
		return nil, errors.New("method_not_supported_for_channel_type")
	}
	return liveStream{l}, nil
}

type liveStream struct{ l *liveAdapter }

func (s liveStream) Update(ctx context.Context, text string) error {
	s.l.log("update:" + text)
	s.l.mu.Lock()
	s.l.shown = text
	s.l.mu.Unlock()
	return nil
}

// Restart takes what shows down and posts the lead as its own message, as the
// platforms' live.Reply does.
func (s liveStream) Restart(ctx context.Context, lead *adapters.Outbound) error {
	s.l.log("restart")
	s.l.mu.Lock()
	s.l.shown = ""
	s.l.mu.Unlock()
	if lead != nil {
		s.l.log("notice:" + lead.Text)
		return s.l.recorder.Send(ctx, *lead)
	}
	return nil
}

func (s liveStream) Finish(ctx context.Context, final adapters.Outbound) error {
	s.l.log("finish:" + string(final.Kind) + ":" + final.Text)
	s.l.mu.Lock()
	s.l.shown = final.Text
	s.l.mu.Unlock()
	return nil
}

func (h *harness) sayLive(la *liveAdapter, text string) []adapters.Outbound {
	h.t.Helper()
	h.sayAs(adapters.Inbound{Channel: "live", SessionKey: "live:s1", User: "live:u1", Text: text, ReplyTo: "t1"})
	return la.take()
}

func indexOf(events []string, prefix string) int {
	for i, e := range events {
		if strings.HasPrefix(e, prefix) {
			return i
		}
	}
	return -1
}

// indexOfText is the first event with prefix that holds sub.
func indexOfText(events []string, prefix, sub string) int {
	for i, e := range events {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, sub) {
			return i
		}
	}
	return -1
}

// covers A5, N1, N3: the primary fails before any text (a 500); the fallback's
// notice reaches the thread before its first words, and only once.
func TestLive_A5_NoticeBeforeTheFallbacksFirstText(t *testing.T) {
	testdb.Each(t, testLive_A5_NoticeBeforeTheFallbacksFirstText)
}

func testLive_A5_NoticeBeforeTheFallbacksFirstText(t *testing.T, driver string) {
	h := newHarness(t, driver)
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500})
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond})
	out := h.sayLive(la, "hello there")
	ev := la.seen()
	notice, first := indexOf(ev, "notice:"), indexOf(ev, "update:")
	if notice < 0 || first < notice || !strings.Contains(ev[notice], "model fallback: p2/beta") {
		t.Fatalf("the notice did not come before the fallback's first text: %q", ev)
	}
	if len(out) != 1 || out[0].Kind != adapters.KindNotice {
		t.Fatalf("want the notice once, as its own message:%s", dump(out))
	}
	if last := ev[len(ev)-1]; !strings.HasPrefix(last, "finish:reply:[p2/beta]") {
		t.Fatalf("final = %q", last)
	}
	// The next turn stays on the fallback: no notice, no restart (N3).
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond})
	if out := h.sayLive(la, "again"); len(out) != 0 {
		t.Fatalf("a second notice:%s", dump(out))
	}
	if n := strings.Count(strings.Join(la.seen(), "\n"), "restart"); n != 1 {
		t.Fatalf("%d restarts over two turns, want the fallback's one", n)
	}
}

// covers L1, L2: progress shows before the first word; the reply grows through
// updates and ends complete, replaced once by the final answer; nothing else is
// posted for it.
func TestLive_L1_L2_ProgressThenAGrowingReply(t *testing.T) {
	testdb.Each(t, testLive_L1_L2_ProgressThenAGrowingReply)
}

func testLive_L1_L2_ProgressThenAGrowingReply(t *testing.T, driver string) {
	h := newHarness(t, driver)
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond})
	out := h.sayLive(la, "tell me a long story please")
	ev := la.seen()
	if indexOf(ev, "progress") != 0 || indexOf(ev, "update:") < 0 {
		t.Fatalf("events: %q", ev)
	}
	if n := strings.Count(strings.Join(ev, "\n"), "update:"); n < 2 {
		t.Fatalf("the reply did not grow (%d updates): %q", n, ev)
	}
	last := ev[len(ev)-1]
	if !strings.HasPrefix(last, "finish:reply:") || !strings.Contains(last, "tell me a long story please") {
		t.Fatalf("no final answer: %q", ev)
	}
	if stop, finish := indexOf(ev, "stop"), indexOf(ev, "finish:"); stop < 0 || stop > finish {
		t.Fatalf("progress not cleared before the answer: %q", ev)
	}
	if len(out) != 0 {
		t.Fatalf("the answer was also posted as a message:%s", dump(out))
	}
	if hist := h.history("live:s1"); len(hist) != 2 || !strings.Contains(hist[1].Content, "tell me a long story") {
		t.Fatalf("history: %+v", hist)
	}
}

// covers L3, N4, R8: the primary streams some words and stalls; the fallback
// answers. The latest version of the reply is the fallback's answer only, the
// fallback notice is its own message, and history holds the final answer alone.
func TestLive_L3_FailoverMidStreamReplacesThePartialText(t *testing.T) {
	testdb.Each(t, testLive_L3_FailoverMidStreamReplacesThePartialText)
}

func testLive_L3_FailoverMidStreamReplacesThePartialText(t *testing.T, driver string) {
	h := newHarness(t, driver, func(_ *Config, h *harness) { h.idle = 300 * time.Millisecond })
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeStallAfterFirstChunk})
	out := h.sayLive(la, "hello there")
	ev := la.seen()
	firstUpdate := ev[indexOf(ev, "update:")]
	if strings.Contains(firstUpdate, "p2/beta") {
		t.Fatalf("the primary showed nothing before it stalled: %q", ev)
	}
	la.mu.Lock()
	shown := la.shown
	la.mu.Unlock()
	if !strings.HasPrefix(shown, "[p2/beta] you said: hello there") || strings.Contains(shown, "p1/alpha") {
		t.Fatalf("latest version of the reply = %q (events %q)", shown, ev)
	}
	if len(out) != 1 || out[0].Kind != adapters.KindNotice || !strings.Contains(out[0].Text, "model fallback: p2/beta") {
		t.Fatalf("the notice is not its own message:%s", dump(out))
	}
	// A5: the partial text is taken down, then the notice, then the answer.
	restart, notice, answer := indexOf(ev, "restart"), indexOf(ev, "notice:"), indexOfText(ev, "update:", "p2/beta")
	if restart < 0 || notice < restart || answer < notice {
		t.Fatalf("want restart < notice < the fallback's first text: %q", ev)
	}
	hist := h.history("live:s1")
	if len(hist) != 2 || !strings.HasPrefix(hist[1].Content, "[p2/beta]") {
		t.Fatalf("history: %+v", hist)
	}
}

// covers L2: a workspace that refuses streaming still gets the whole answer, once.
func TestLive_L2_RefusedStreamPostsTheWholeAnswer(t *testing.T) {
	testdb.Each(t, testLive_L2_RefusedStreamPostsTheWholeAnswer)
}

func testLive_L2_RefusedStreamPostsTheWholeAnswer(t *testing.T, driver string) {
	h := newHarness(t, driver)
	la := newLiveAdapter()
	la.refuse = true
	h.r.AddAdapter(la)
	out := h.sayLive(la, "hi")
	if len(out) != 1 || out[0].Kind != adapters.KindReply || !strings.Contains(out[0].Text, "you said: hi") {
		t.Fatalf("answer:%s", dump(out))
	}
}

// covers L2: streaming and progress off for the channel: today's single post.
func TestLive_L2_StreamingOff(t *testing.T) { testdb.Each(t, testLive_L2_StreamingOff) }

func testLive_L2_StreamingOff(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) {
		c.NoStream = map[string]bool{"live": true}
		c.NoProgress = map[string]bool{"live": true}
	})
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	out := h.sayLive(la, "hi")
	if len(out) != 1 || out[0].Kind != adapters.KindReply || len(la.seen()) != 0 {
		t.Fatalf("answer:%s events %q", dump(out), la.seen())
	}
}

// covers L3: when every model fails after showing text, the error replaces it.
func TestLive_L3_ErrorReplacesPartialText(t *testing.T) {
	testdb.Each(t, testLive_L3_ErrorReplacesPartialText)
}

func testLive_L3_ErrorReplacesPartialText(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, h *harness) {
		h.idle = 300 * time.Millisecond
		c.Fallbacks = nil
	})
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeStallAfterFirstChunk})
	out := h.sayLive(la, "hello")
	ev := la.seen()
	if indexOf(ev, "update:") < 0 || !strings.HasPrefix(ev[len(ev)-1], "finish:error:") || len(out) != 0 {
		t.Fatalf("events %q, posts:%s", ev, dump(out))
	}
}

// covers L1, R6: while the turn sleeps through a provider's stated wait because
// nothing else is usable, the progress says what it waits for.
func TestLive_L1_R6_TheWaitIsShown(t *testing.T) { testdb.Each(t, testLive_L1_R6_TheWaitIsShown) }

func testLive_L1_R6_TheWaitIsShown(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) { c.Fallbacks = nil })
	la := newLiveAdapter()
	h.r.AddAdapter(la)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeRateLimit, RetryAfter: 20 * time.Second, Times: 1})
	h.sayLive(la, "hi")
	ev := la.seen()
	if i := indexOf(ev, "status:waiting 20s for p1"); i < 0 || !strings.Contains(ev[i], "rate") {
		t.Fatalf("events: %q", ev)
	}
	if !strings.HasPrefix(ev[len(ev)-1], "finish:reply:") {
		t.Fatalf("not answered after the wait: %q", ev)
	}
}

// covers L4: /model without an argument offers the configured models as a pick;
// choosing one sends "/model <ref>", which applies it like typing it.
func TestLive_L4_ModelPickerOffersTheModels(t *testing.T) {
	testdb.Each(t, testLive_L4_ModelPickerOffersTheModels)
}

func testLive_L4_ModelPickerOffersTheModels(t *testing.T, driver string) {
	h := newHarness(t, driver)
	out := h.say(key1, "/model")
	if len(out) != 1 || len(out[0].Choices) < 3 {
		t.Fatalf("answer:%s choices %+v", dump(out), out)
	}
	var pick adapters.Choice
	for _, c := range out[0].Choices {
		if c.Label == mThird {
			pick = c
		}
	}
	if pick.Command != "/model "+mThird {
		t.Fatalf("choices %+v", out[0].Choices)
	}
	h.say(key1, pick.Command)
	if e := h.entry(key1); e.ModelOverride != "gamma" || e.ModelOverrideSource != "user" {
		t.Fatalf("the pick was not applied: %+v", e)
	}
}
