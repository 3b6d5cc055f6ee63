package sessions

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/llm"
)

func TestEstimateTokens_R15(t *testing.T) {
	cases := map[string]int{"": 0, "abcd": 2, strings.Repeat("x", 400): 121}
	for in, want := range cases {
		if got := EstimateTokens(in); got != want {
			t.Errorf("EstimateTokens(%d chars) = %d, want %d", len(in), got, want)
		}
	}
}

func TestBuildPrompt_R15_DropsOldestTurns(t *testing.T) {
	hist := []Message{
		{ID: 1, Role: "user", Content: strings.Repeat("a", 400)},
		{ID: 2, Role: "assistant", Content: strings.Repeat("b", 400)},
		{ID: 3, Role: "user", Content: "short"},
		{ID: 4, Role: "assistant", Content: "short"},
	}
	msgs, dropped := buildPrompt(promptParts{system: "sys", hist: hist, user: llm.Message{Role: "user", Content: "now"}}, 100)
	if dropped != 2 {
		t.Fatalf("dropped = %d, want the whole first turn (2)", dropped)
	}
	if msgs[0].Role != "system" || msgs[1].Content != "short" || msgs[len(msgs)-1].Content != "now" {
		t.Fatalf("prompt = %+v", msgs)
	}
	if estimate(msgs) > 100 {
		t.Fatalf("prompt does not fit: %d", estimate(msgs))
	}
	if _, d := buildPrompt(promptParts{hist: hist, user: llm.Message{Role: "user", Content: "now"}}, 0); d != 0 {
		t.Fatal("no window must keep everything")
	}
}
