package failover

import (
	"errors"
	"testing"

	"github.com/detourbot/detour/classify"
)

// covers I5: a prompt with images skips the candidates that do not take them,
// recorded like B7's context_window skip, and answers from one that does.
func TestRun_I5_ImagesSkipTextOnlyCandidates(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/text", "openai/vision")
	req.Images = true
	req.TakesImages = map[ModelRef]bool{"openai/vision": true}
	sc := newScript(h.clk, ok("a cat"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Model != "vision" || sc.count() != 1 {
		t.Fatalf("want one call to openai/vision: res %+v err %v calls %v", res, err, sc.keys())
	}
	if a := res.Attempts[0]; a.Skipped != classify.ReasonImageInput || a.Candidate.Model != "text" {
		t.Fatalf("first record = %+v, want openai/text skipped for image_input", a)
	}
	if !res.FellBack || res.Cause == nil || res.Cause.Reason != classify.ReasonImageInput {
		t.Fatalf("cause = %+v, want the image_input skip", res.Cause)
	}

	// Nobody takes images: every candidate is skipped, no call is made.
	req.TakesImages = nil
	sc = newScript(h.clk, ok("x"))
	_, err = h.e.Run(bg, req, sc.fn)
	var s *SummaryError
	if !errors.As(err, &s) || sc.count() != 0 {
		t.Fatalf("want a summary error and no call: %v, %d calls", err, sc.count())
	}

	// Without images nothing is skipped.
	req.Images = false
	sc = newScript(h.clk, ok("x"))
	if res, err := h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Model != "text" {
		t.Fatalf("text prompt: %+v %v", res, err)
	}
}

// covers B1, R16: what the turn paid for before the run (a summary of dropped
// history) counts against the turn budget.
func TestRun_B1_SpentBeforeTheRunCounts(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.MaxPaidAttemptsPerTurn = 2
	req := baseReq("openai/a", "openai/b")
	req.Spent = Spend{Calls: 1}
	sc := newScript(h.clk, ok("x")).on("openai/a", failR(classify.ReasonBilling))
	_, err := h.e.Run(bg, req, sc.fn)
	var s *SummaryError
	if !errors.As(err, &s) || !errors.Is(s.Stop, ErrTurnBudget) || sc.count() != 1 {
		t.Fatalf("want the budget to stop after one call: %v, calls %v", err, sc.keys())
	}
	h.e.Policy.MaxPaidAttemptsPerTurn = 0
	h.e.Policy.MaxTurnCostUSD = 0.01
	req = baseReq("openai/a")
	req.Spent = Spend{USD: 0.02}
	sc = newScript(h.clk, ok("x"))
	if _, err := h.e.Run(bg, req, sc.fn); !errors.As(err, &s) || !errors.Is(s.Stop, ErrTurnBudget) || sc.count() != 0 {
		t.Fatalf("want the cost cap to stop before any call: %v, %d calls", err, sc.count())
	}
}
