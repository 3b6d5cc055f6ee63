//go:build cgo

package sessions

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// covers R15, B7, P2: history that does not fit the model's window is compacted
// before sending, and the compaction count grows.
func TestRouter_R15_CompactsToFitContextWindow(t *testing.T) {
	testdb.Each(t, testRouter_R15_CompactsToFitContextWindow)
}

func testRouter_R15_CompactsToFitContextWindow(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), func(cfg *Config, _ *harness) {
		cfg.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 300}}
	})
	long := strings.Repeat("word ", 60) // 300 chars ≈ 91 tokens
	for i := 0; i < 6; i++ {
		expect(t, h.say(key1, long), "reply")
	}
	for i, req := range mem["p1"].requests() {
		if n := estimate(req.Messages); n > 300 {
			t.Fatalf("request %d has %d estimated tokens > window 300", i, n)
		}
	}
	e := h.entry(key1)
	if e.CompactionCount == 0 {
		t.Fatal("R15: compaction count did not grow")
	}
	if n := len(h.history(key1)); n >= 12 {
		t.Fatalf("history not compacted: %d messages", n)
	}
}

// covers R15, C8: a context_overflow from the provider compacts and retries once.
func TestRouter_R15_OverflowCompactsAndRetries(t *testing.T) {
	testdb.Each(t, testRouter_R15_OverflowCompactsAndRetries)
}

func testRouter_R15_OverflowCompactsAndRetries(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem))
	for i := 0; i < 4; i++ {
		expect(t, h.say(key1, "turn"), "reply")
	}
	overflow := func(req llm.Request) error {
		if len(req.Messages) > 6 {
			return &failover.Failure{Reason: classify.ReasonContextOverflow, Class: classify.ClassDeterministic, Status: 400,
				Message: "maximum context length exceeded", Provider: "p1", Model: req.Model, Profile: "p1:main"}
		}
		return nil
	}
	mem["p1"].mu.Lock()
	mem["p1"].fail = overflow
	mem["p1"].mu.Unlock()
	before := len(mem["p1"].requests())
	out := expect(t, h.say(key1, "big"), "reply")
	if out[0].Model != mPrimary {
		t.Fatalf("answered by %s", out[0].Model)
	}
	reqs := mem["p1"].requests()[before:]
	if len(reqs) != 2 || len(reqs[1].Messages) >= len(reqs[0].Messages) {
		t.Fatalf("want one compacted retry, got %d requests", len(reqs))
	}
	if n := mem["p2"].requests(); len(n) != 0 {
		t.Fatal("C8: context_overflow must not advance the fallback chain")
	}
	if e := h.entry(key1); e.CompactionCount != 1 {
		t.Fatalf("compaction count = %d", e.CompactionCount)
	}
	// Nothing left to compact: the user is told what to do.
	mem["p1"].mu.Lock()
	mem["p1"].fail = func(req llm.Request) error {
		return overflow(llm.Request{Model: req.Model, Messages: make([]llm.Message, 9)})
	}
	mem["p1"].mu.Unlock()
	expect(t, h.say(key1, "/reset"), "reply")
	out = expect(t, h.say(key1, "huge"), "error")
	if !strings.Contains(out[0].Text, "/reset") || !strings.Contains(out[0].Text, "larger window") {
		t.Fatalf("R15 message = %q", out[0].Text)
	}
}

// R15: when even the newest turn does not fit, all history goes (no panic) and
// the request still carries the user's message.
func TestRouter_R15_HistoryDroppedEntirely(t *testing.T) {
	testdb.Each(t, testRouter_R15_HistoryDroppedEntirely)
}

func testRouter_R15_HistoryDroppedEntirely(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), func(cfg *Config, _ *harness) {
		cfg.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 150}}
	})
	expect(t, h.say(key1, strings.Repeat("a", 300)), "reply") // ≈ 90 tokens + the answer
	expect(t, h.say(key1, strings.Repeat("b", 300)), "reply")
	reqs := mem["p1"].requests()
	if last := reqs[len(reqs)-1]; len(last.Messages) != 1 {
		t.Fatalf("want only the new message, got %d messages", len(last.Messages))
	}
	if n := len(h.history(key1)); n != 2 {
		t.Fatalf("history = %d, want the last exchange only", n)
	}
}

// covers R15: a timeout on a prompt that uses more than 65% of the model's window
// compacts the history and retries the same model, instead of falling back.
func TestRouter_R15_TimeoutOnLargePromptCompacts(t *testing.T) {
	testdb.Each(t, testRouter_R15_TimeoutOnLargePromptCompacts)
}

func testRouter_R15_TimeoutOnLargePromptCompacts(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), func(cfg *Config, _ *harness) {
		cfg.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 1000}}
	})
	long := strings.Repeat("word ", 100) // ≈ 150 tokens a message
	for i := 0; i < 2; i++ {
		expect(t, h.say(key1, long), "reply")
	}
	// The next prompt (history + message) is well above 65% of 1000 tokens: the
	// provider times out on it and answers once it is smaller.
	mem["p1"].mu.Lock()
	mem["p1"].fail = func(req llm.Request) error {
		if estimate(req.Messages) > 650 {
			return &failover.Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient,
				Message: "attempt timeout", Provider: "p1", Model: req.Model, Profile: "p1:main"}
		}
		return nil
	}
	mem["p1"].mu.Unlock()
	before := len(mem["p1"].requests())
	out := expect(t, h.say(key1, long), "reply")
	if out[0].Model != mPrimary {
		t.Fatalf("answered by %s, want the primary after compaction", out[0].Model)
	}
	reqs := mem["p1"].requests()[before:]
	if len(reqs) != 2 || estimate(reqs[0].Messages) <= 650 || estimate(reqs[1].Messages) > 650 {
		t.Fatalf("want one timeout on the large prompt then one smaller retry; got %d requests", len(reqs))
	}
	if len(mem["p2"].requests()) != 0 {
		t.Fatal("R15: the timeout on a large prompt fell back instead of compacting")
	}
	if e := h.entry(key1); e.CompactionCount == 0 {
		t.Fatal("R15: compaction count did not grow")
	}
}
