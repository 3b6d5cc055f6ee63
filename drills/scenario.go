package drills

import (
	"fmt"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// Scenario is one drill, declared as data: which faults the fake provider
// injects, which turns users send, and what must hold afterwards.
type Scenario struct {
	Name string
	Doc  string // one line, shown in listings and README.drills.md
	// OpenClaw is the comparable OpenClaw 2026.9.6 figure, if any (BENCHMARKS.md).
	OpenClaw string
	Steps    []Step
	Checks   []Check
}

// Step is one round of the drill: optionally move the clock and re-script the
// fake, then send Text from Sessions sessions at once and wait for every answer.
type Step struct {
	// Advance moves the drill clock forward before the turn.
	Advance time.Duration
	// AdvanceProbe additionally moves it past the primary probe interval (S3).
	AdvanceProbe bool
	// Faults, when non-nil, replace the fake's rules before the turn (an empty
	// non-nil slice heals every model). Nil keeps the previous rules.
	Faults []Fault
	// Text is what each session says ("" = a default question).
	Text string
	// Sessions is how many sessions send at once (0 = 1). Every step uses the
	// same session keys, so step 2 of session 1 continues its conversation.
	Sessions int
	// NewestFirst sends the last session's message alone and the others once
	// it is answered, so that session meets the providers as the step left
	// them, before the others' failures change them (R7 marks, cooldowns).
	NewestFirst bool
}

// Target names the chain members a fault applies to; it is resolved against the
// configured chain, so one scenario fits every configuration.
type Target string

// Targets.
const (
	OnPrimary         Target = "primary"          // the configured primary model
	OnFallbacks       Target = "fallbacks"        // every configured fallback model
	OnEvery           Target = "every"            // every model of the chain
	OnPrimaryProvider Target = "primary-provider" // every model and key of the primary's provider
)

// OnChain targets the chain's i-th model (0 = the primary); past the chain's
// end it targets nothing.
func OnChain(i int) Target { return Target(fmt.Sprintf("chain[%d]", i)) }

// Fault is one fake-provider rule in chain terms.
type Fault struct {
	On Target
	// Mode is the failure; with Modes set, the i-th matched model gets
	// Modes[i%len(Modes)] instead ("every model fails differently").
	Mode  fakeprovider.Mode
	Modes []fakeprovider.Mode
	// Times > 0: the fault answers that many calls of each matched model, then
	// the model heals.
	Times      int
	RetryAfter time.Duration // rate_limit: announced wait; quota_reset_text: distance of the reset
	Delay      time.Duration
}

// Check is one named condition on a report. Eval must be a pure function of
// the report and the budgets.
type Check struct {
	Name string
	Eval func(r *Report, b Budgets) (ok bool, detail string)
}

// rules resolves faults against the chain (refs are "provider/model").
func rules(faults []Fault, primary string, fallbacks []string) []fakeprovider.Rule {
	var out []fakeprovider.Rule
	for _, f := range faults {
		var refs []string
		switch f.On {
		case OnPrimary:
			refs = []string{primary}
		case OnFallbacks:
			refs = fallbacks
		case OnEvery:
			refs = append([]string{primary}, fallbacks...)
		case OnPrimaryProvider:
			p, _ := splitRef(primary)
			out = append(out, fakeprovider.Rule{Provider: p, Mode: f.mode(0), Times: f.Times, RetryAfter: f.RetryAfter, Delay: f.Delay})
			continue
		default:
			var i int
			if _, err := fmt.Sscanf(string(f.On), "chain[%d]", &i); err == nil {
				if chain := dedupe(append([]string{primary}, fallbacks...)); i >= 0 && i < len(chain) {
					refs = chain[i : i+1]
				}
			}
		}
		for i, ref := range dedupe(refs) {
			p, m := splitRef(ref)
			out = append(out, fakeprovider.Rule{Provider: p, Model: m, Mode: f.mode(i), Times: f.Times, RetryAfter: f.RetryAfter, Delay: f.Delay})
		}
	}
	return out
}

func (f Fault) mode(i int) fakeprovider.Mode {
	if len(f.Modes) > 0 {
		return f.Modes[i%len(f.Modes)]
	}
	return f.Mode
}

func dedupe(refs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// splitRef splits "provider/model" on the first "/".
func splitRef(ref string) (provider, model string) {
	for i := 0; i < len(ref); i++ {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return ref, ""
}
