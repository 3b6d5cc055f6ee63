//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// longConversation says turns messages of about size characters in one
// session (the first naming a fact) and returns the calls the fake provider
// received: the turns' and the summaries'.
func longConversation(t testing.TB, h *harness, turns, size int) (calls, summaries int) {
	t.Helper()
	for i := range turns {
		text := fmt.Sprintf("turn %d: ", i)
		if i == 0 {
			text += "remember FACT-ALPHA-42. "
		}
		text += strings.Repeat(fmt.Sprintf("w%d ", i%10), size/3)
		out := h.say(key1, text[:min(len(text), size)])
		if len(out) == 0 || out[len(out)-1].Kind != adapters.KindReply {
			t.Fatalf("turn %d: %s", i, dump(out))
		}
	}
	for _, c := range h.fake.Calls() {
		calls++
		if len(c.Messages) > 0 && strings.HasPrefix(c.Messages[0].Text, "You summarise conversations") {
			summaries++
		}
	}
	return calls, summaries
}

// compactionHarness: a window of window tokens on the primary, summaries on
// (400 tokens, the default), the low mark at half the window.
func compactionHarness(t testing.TB, driver string, window int, opts ...harnessOpt) *harness {
	return newHarnessTB(t, driver, append(opts, func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: window}}
		c.Summary, c.SummaryMaxTokens, c.SummaryTarget = true, 400, 0.5
	})...)
}

// covers R16, R15: at the window (32,000 tokens), compaction summarises down
// to the low mark (half the window), so one summary covers many turns: a
// 1,000-turn conversation of 2,000-character messages costs at most 1.1 paid
// calls per answered turn, and one of 200-token turns at most 1.05. No prompt
// passes the window, and every summary is written right after an answer,
// never before one (the person does not wait for it).
func TestRouter_R16_CompactionPaysOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		for _, tc := range []struct {
			name         string
			turns, size  int
			maxCallsTurn float64
		}{
			{"2000-character messages", 300, 2000, 1.1},
			{"200-token turns", 400, 500, 1.05},
		} {
			t.Run(tc.name, func(t *testing.T) {
				turns := tc.turns
				if driver == testdb.SQLite && !testing.Short() {
					turns = 1000
				}
				h := compactionHarness(t, driver, 32000)
				calls, summaries := longConversation(t, h, turns, tc.size)
				perTurn := float64(calls) / float64(turns)
				t.Logf("%d turns: %d calls (%d summaries), %.3f a turn", turns, calls, summaries, perTurn)
				if summaries == 0 {
					t.Fatal("no summary was written: the conversation never reached the window")
				}
				if perTurn > tc.maxCallsTurn {
					t.Errorf("%.3f paid calls per answered turn, want at most %.2f", perTurn, tc.maxCallsTurn)
				}
				var prev fakeprovider.Call
				for i, c := range h.fake.Calls() {
					if est := estimateLogged(c.Messages); est > 32000 {
						t.Fatalf("call %d sent about %d tokens, past the 32,000-token window", i, est)
					}
					if isSummaryCall(c) && (i == 0 || isSummaryCall(prev)) {
						t.Fatalf("call %d: a summary not written right after an answer", i)
					}
					prev = c
				}
				if e := h.entry(key1); e.Summaries != summaries {
					t.Errorf("the session counts %d summaries, the provider saw %d", e.Summaries, summaries)
				}
				out := expect(t, h.say(key1, "/status"), "reply")
				if want := fmt.Sprintf("%d summary call(s) paid for so far", summaries); !strings.Contains(out[0].Text, want) {
					t.Errorf("/status lacks %q:\n%s", want, out[0].Text)
				}
				out = expect(t, h.say(key1, "/usage"), "reply")
				if want := fmt.Sprintf("this conversation paid for %d summary call(s)", summaries); !strings.Contains(out[0].Text, want) {
					t.Errorf("/usage lacks %q:\n%s", want, out[0].Text)
				}
			})
		}
	})
}

// covers R16: each summary folds the one before it in, so what the first
// turn said is still in the prompt after many compactions (the model here
// keeps every FACT- word it is given, as a summary should).
func TestRouter_R16_FactsSurviveManySummaries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		mem := map[string]*memLLM{}
		h := compactionHarness(t, driver, 8000, withMem(mem))
		mem["p1"].reply = func(req llm.Request) string {
			if !strings.HasPrefix(req.Messages[0].Content, "You summarise conversations") {
				return "noted"
			}
			var facts []string
			for _, w := range strings.Fields(req.Messages[len(req.Messages)-1].Content) {
				if w = strings.Trim(w, ".,()"); strings.HasPrefix(w, "FACT-") && !slices.Contains(facts, w) {
					facts = append(facts, w)
				}
			}
			return "Facts so far: " + strings.Join(facts, " ")
		}
		_, _ = longConversation(t, h, 60, 2000)
		if n := h.entry(key1).Summaries; n < 3 {
			t.Fatalf("%d summaries, want several", n)
		}
		reqs := mem["p1"].requests()
		last := reqs[len(reqs)-1]
		var prompt strings.Builder
		for _, m := range last.Messages {
			prompt.WriteString(m.Content + "\n")
		}
		if !strings.Contains(prompt.String(), "FACT-ALPHA-42") {
			t.Fatalf("the first turn's fact is lost after %d summaries:\n%.600s", h.entry(key1).Summaries, prompt.String())
		}
	})
}

// covers R16, O7: a summary written after an answer is dropped, not stored,
// when the conversation was reset meanwhile.
func TestRouter_R16_LateSummaryAfterResetIsDropped(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := compactionHarness(t, driver, 8000)
		longConversation(t, h, 12, 2000) // past the mark: summaries are written
		e := h.entry(key1)
		hist := h.history(key1)
		expect(t, h.say(key1, "/reset"), "reply")
		stored, err := h.r.st.compactIf(context.Background(), key1, hist[len(hist)-2].ID, "stale summary", e.CompactionCount)
		if err != nil || stored {
			t.Fatalf("compactIf after /reset: stored %v, %v", stored, err)
		}
		if e := h.entry(key1); e.Summary != "" || e.Summaries != 0 {
			t.Fatalf("after /reset: %+v", e)
		}
	})
}

func isSummaryCall(c fakeprovider.Call) bool {
	return len(c.Messages) > 0 && strings.HasPrefix(c.Messages[0].Text, "You summarise conversations")
}

// estimateLogged estimates a prompt as the fake logged it.
func estimateLogged(msgs []fakeprovider.Logged) int {
	n := 0
	for _, m := range msgs {
		n += EstimateTokens(m.Text) + perMessage
	}
	return n
}
