package failover

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// decisions returns the model_fallback_decision events of a harness's log.
func decisions(t *testing.T, h *harness) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(h.log.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "model_fallback_decision" {
			out = append(out, m)
		}
	}
	return out
}

// covers V2: one model_fallback_decision line per step. A fallback that
// answers writes the step that led to it and nothing more (it used to write
// the same step again as "succeeded"); two steps write two lines.
func TestRun_V2_OneDecisionLinePerStep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain []ModelRef
		fails []string
		steps []string // from -> to
	}{
		{"one fallback", []ModelRef{"openai/gpt-4o", "anthropic/claude"}, []string{"openai/gpt-4o"},
			[]string{"openai/gpt-4o -> anthropic/claude"}},
		{"two fallbacks", []ModelRef{"openai/gpt-4o", "anthropic/claude", "mistral/large"}, []string{"openai/gpt-4o", "anthropic/claude"},
			[]string{"openai/gpt-4o -> anthropic/claude", "anthropic/claude -> mistral/large"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			req := baseReq(tc.chain...)
			req.Profiles["openai"] = req.Profiles["openai"][:1]
			sc := newScript(h.clk, ok("answer"))
			for _, m := range tc.fails {
				sc.on(m, failR(classify.ReasonBilling))
			}
			res, err := h.e.Run(bg, req, sc.fn)
			if err != nil || res.Candidate.Ref() != string(tc.chain[len(tc.chain)-1]) {
				t.Fatalf("run: %v %+v", err, res.Candidate)
			}
			ev := decisions(t, h)
			var got []string
			for _, e := range ev {
				got = append(got, e["fallbackStepFromModel"].(string)+" -> "+e["fallbackStepToModel"].(string))
				if e["fallbackStepFinalOutcome"] != "next_candidate" || e["fallbackStepFromFailureReason"] != "billing" {
					t.Errorf("event %v", e)
				}
			}
			if strings.Join(got, "; ") != strings.Join(tc.steps, "; ") {
				t.Errorf("decision lines:\n%s\nwant one per step:\n%s", strings.Join(got, "\n"), strings.Join(tc.steps, "\n"))
			}
		})
	}
}

// covers V2: a candidate skipped for its disable is a step too, written once,
// with the skip's reason; the answer adds no line.
func TestRun_V2_SkipIsOneStep(t *testing.T) {
	h := newHarness(t)
	h.put(t, "anthropic:main", func(s *ProfileState) {
		s.DisabledUntil, s.DisabledReason = t0.Add(time.Hour), classify.ReasonBilling
	})
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("answer")).on("openai/gpt-4o", failR(classify.ReasonOverloaded))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Ref() != "ollama/qwen" {
		t.Fatalf("run: %v, answered by %s", err, res.Candidate.Ref())
	}
	var got []string
	for _, e := range decisions(t, h) {
		got = append(got, e["fallbackStepFromModel"].(string)+" -> "+e["fallbackStepToModel"].(string)+": "+e["fallbackStepFromFailureReason"].(string))
	}
	if want := "openai/gpt-4o -> anthropic/claude: overloaded; anthropic/claude -> ollama/qwen: billing"; strings.Join(got, "; ") != want {
		t.Fatalf("decision lines: %s\nwant %s", strings.Join(got, "; "), want)
	}
}
