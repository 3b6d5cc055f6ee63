//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/notices"
)

func withAgents(cfg *Config, _ *harness) {
	fb := []failover.ModelRef{mFallback}
	empty := []failover.ModelRef{}
	cfg.Agents = []Agent{
		{ID: "strict", Model: mThird, Match: []string{"test:agent-strict"}},
		{ID: "explicit", Model: mThird, Fallbacks: &empty, Match: []string{"test:agent-empty"}},
		{ID: "fb", Model: mThird, Fallbacks: &fb, Match: []string{"test:agent-fb"}, SystemPrompt: "be brief"},
	}
}

// covers S2, K5
func TestRouter_S2_AgentModelStrictUnlessOwnFallbacks(t *testing.T) {
	testdb.Each(t, testRouter_S2_AgentModelStrictUnlessOwnFallbacks)
}

func testRouter_S2_AgentModelStrictUnlessOwnFallbacks(t *testing.T, driver string) {
	h := newHarness(t, driver, withAgents)
	h.fake.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeUnavailable503})
	for _, key := range []string{"test:agent-strict:1", "test:agent-empty:1"} {
		out := expect(t, h.say(key, "hi"), "error")
		if !strings.Contains(out[0].Text, mThird) {
			t.Fatalf("%s: %q", key, out[0].Text)
		}
	}
	if n := h.calls.count("p1") + h.calls.count("p2"); n != 0 {
		t.Fatalf("S2: a strict agent fell back (%d calls)", n)
	}
	out := expect(t, h.say("test:agent-fb:1", "hi"), "notice,reply")
	if want := notices.Fallback(mFallback, mThird, classify.ReasonTimeout, classify.StatusUnknown); out[0].Text != want {
		t.Fatalf("notice = %q, want %q", out[0].Text, want)
	}
	if n := h.calls.count("p1"); n != 0 {
		t.Fatalf("K5: an explicit fallbacks list must not append the default primary (%d calls)", n)
	}
	// The session's model answer and /model show the agent source.
	if out := expect(t, h.say("test:agent-strict:2", "/model"), "reply"); !strings.Contains(out[0].Text, "model: p3/gamma (the model of agent strict)") {
		t.Fatalf("/model = %q", out[0].Text)
	}
}

// covers K3, K4, N2: on an auto fallback whose later candidates fail, the chain
// lands back on the configured primary, which clears the override.
func TestRouter_K4_ExhaustedChainLandsOnPrimary(t *testing.T) {
	testdb.Each(t, testRouter_K4_ExhaustedChainLandsOnPrimary)
}

func testRouter_K4_ExhaustedChainLandsOnPrimary(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeUnavailable503, Times: 1})
	expect(t, h.say(key1, "hello"), "notice,reply")
	h.clock.Advance(time.Minute) // the primary's 30 s cooldown is over; no probe due yet
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeModelNotFound404})
	h.fake.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeModelNotFound404})
	out := expect(t, h.say(key1, "again"), "notice,reply")
	if want := notices.Cleared(mPrimary, mFallback); out[0].Text != want {
		t.Fatalf("notice = %q, want %q", out[0].Text, want)
	}
	if out[1].Model != mPrimary {
		t.Fatalf("answered by %s", out[1].Model)
	}
	if e := h.entry(key1); e.ModelOverride != "" || e.ModelOverrideSource != "" {
		t.Fatalf("override not cleared: %+v", e)
	}
}

// covers system prompts per agent (the agent's prompt replaces the default).
func TestRouter_SystemPromptPerAgent(t *testing.T) { testdb.Each(t, testRouter_SystemPromptPerAgent) }

func testRouter_SystemPromptPerAgent(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), withAgents, func(cfg *Config, _ *harness) { cfg.SystemPrompt = "default prompt" })
	expect(t, h.say("test:agent-fb:9", "hi"), "reply")
	expect(t, h.say(key1, "hi"), "reply")
	if r := mem["p3"].requests(); len(r) != 1 || r[0].Messages[0].Content != "be brief" {
		t.Fatalf("agent prompt: %+v", r)
	}
	if r := mem["p1"].requests(); len(r) != 1 || r[0].Messages[0].Role != "system" || r[0].Messages[0].Content != "default prompt" {
		t.Fatalf("default prompt: %+v", r)
	}
}

// covers B7: a candidate whose context window cannot hold the prompt is skipped
// without a call, and the next candidate answers.
func TestRouter_B7_SmallWindowCandidateSkipped(t *testing.T) {
	testdb.Each(t, testRouter_B7_SmallWindowCandidateSkipped)
}

func testRouter_B7_SmallWindowCandidateSkipped(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), func(cfg *Config, _ *harness) {
		cfg.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 50}, mFallback: {ContextWindow: 100000}}
	})
	out := expect(t, h.say(key1, strings.Repeat("long words ", 40)), "notice,reply")
	if out[1].Model != mFallback {
		t.Fatalf("answered by %s", out[1].Model)
	}
	if n := len(mem["p1"].requests()); n != 0 {
		t.Fatalf("B7: the too-small model was called %d times", n)
	}
	if want := notices.Fallback(mFallback, mPrimary, classify.ReasonContextWindow, 0); out[0].Text != want {
		t.Logf("notice = %q (engine-reported cause)", out[0].Text)
	}
	var rows []AttemptRow
	h.db.Where("session_key = ? AND skipped = ?", key1, string(classify.ReasonContextWindow)).Find(&rows)
	if len(rows) != 1 || rows[0].Model != mPrimary {
		t.Fatalf("V1/B7: skip not recorded: %+v", rows)
	}
}

// Run hands every inbound message to its session until the inbox closes; Drain
// then waits for the last turn.
func TestRouter_RunAndDrain(t *testing.T) { testdb.Each(t, testRouter_RunAndDrain) }

func testRouter_RunAndDrain(t *testing.T, driver string) {
	h := newHarness(t, driver, withMem(map[string]*memLLM{}))
	inbox := make(chan adapters.Inbound, 4)
	for i := 0; i < 3; i++ {
		inbox <- adapters.Inbound{Channel: "test", SessionKey: key1, Text: fmt.Sprintf("m%d", i)}
	}
	close(inbox)
	if err := h.r.Run(context.Background(), inbox); err != nil {
		t.Fatalf("Run = %v, want nil at end of input", err)
	}
	if err := h.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := expect(t, h.rec.take(), "reply,reply,reply")
	for i, o := range out {
		if !strings.HasSuffix(o.Text, fmt.Sprintf("m%d", i)) {
			t.Fatalf("order: %q", o.Text)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.r.Run(ctx, make(chan adapters.Inbound)); err == nil {
		t.Fatal("Run must end with the context")
	}
	h.r.Close()
	h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key1, Text: "late"})
	if err := h.r.Drain(context.Background()); err != nil || len(h.rec.take()) != 0 {
		t.Fatal("a closed router must refuse new messages")
	}
}
