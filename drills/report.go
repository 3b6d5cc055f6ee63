package drills

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what one scenario did, measured from the outside: the fake
// provider's call log and the messages the bot sent.
type Report struct {
	Scenario  string         `json:"scenario"`
	Doc       string         `json:"doc"`
	Config    string         `json:"config"`
	Fast      bool           `json:"fast"`
	Primary   string         `json:"primary"`
	Fallbacks []string       `json:"fallbacks"`
	Profiles  map[string]int `json:"profiles"` // profiles per provider
	Notices   string         `json:"notices"`  // notices.users of the configuration
	Priced    bool           `json:"priced"`   // some model of the chain has a price
	Turns     []Turn         `json:"turns"`
	Calls     []Call         `json:"calls"`
	// Elapsed is the wall time of the whole scenario.
	Elapsed time.Duration `json:"elapsed_ns"`
	CostUSD float64       `json:"cost_usd"` // estimated; 0 without prices
	Verdict Verdict       `json:"verdict"`
	// Err is set when the drill itself could not run (not a verdict).
	Err string `json:"error,omitempty"`
}

// Turn is one step of a scenario.
type Turn struct {
	Step     int           `json:"step"` // 1-based
	Sessions int           `json:"sessions"`
	Advanced time.Duration `json:"advanced_ns"` // clock moved forward before the step
	Calls    int           `json:"paid_calls"`
	Answers  []Answer      `json:"answers"` // one per session
	Notices  []string      `json:"notices"`
	Reports  []string      `json:"reports"`
	// Elapsed is the wall time until the last session's answer or error.
	Elapsed time.Duration `json:"elapsed_ns"`
	CostUSD float64       `json:"cost_usd"`
}

// Answer is a session's final message of a step: its reply or its error.
type Answer struct {
	Session string        `json:"session"`
	Kind    string        `json:"kind"` // "reply", "error" or "none"
	Model   string        `json:"model,omitempty"`
	Text    string        `json:"text"`
	After   time.Duration `json:"after_ns"` // since the step began
}

// Call is one paid call the fake provider received.
type Call struct {
	Step     int           `json:"step"`
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Profile  string        `json:"profile"` // from the dummy key's id; "" = no key
	Mode     string        `json:"mode"`
	Status   int           `json:"status"`
	Stream   bool          `json:"stream"` // false for probes (llm.Probe)
	At       time.Duration `json:"at_ns"`  // drill-clock time since the scenario began
	CostUSD  float64       `json:"cost_usd"`
}

// Ref returns "provider/model".
func (c Call) Ref() string { return c.Provider + "/" + c.Model }

// Verdict is the outcome of every check.
type Verdict struct {
	Pass   bool          `json:"pass"`
	Checks []CheckResult `json:"checks"`
}

// CheckResult is one check's outcome.
type CheckResult struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Budgets are the configuration's own limits the verdict measures against,
// with the timeouts in effect for the run (scaled with --fast).
type Budgets struct {
	MaxPaidPerTurn         int           `json:"max_paid_attempts_per_turn"`
	MaxTurnCostUSD         float64       `json:"max_turn_cost_usd"`
	MaxPaidPerMinute       int           `json:"max_paid_attempts_per_minute"`
	BreakerTrip            int           `json:"breaker_trip"`
	TimeoutSwitchThreshold int           `json:"timeout_switch_threshold"`
	IdleTimeout            time.Duration `json:"idle_timeout_ns"`
	CooldownProbeInterval  time.Duration `json:"cooldown_probe_interval_ns"`
	ProbeInterval          time.Duration `json:"probe_interval_ns"`         // A1's shared probe, per provider
	ProbeIntervalMax       time.Duration `json:"probe_interval_max_ns"`     // E2: the interval doubles up to this while checks fail
	ProbeWait              time.Duration `json:"probe_wait_ns"`             // A1
	PrimaryProbeInterval   time.Duration `json:"primary_probe_interval_ns"` // S3
}

// Step returns turn i (1-based), or nil.
func (r *Report) Step(i int) *Turn {
	if i < 1 || i > len(r.Turns) {
		return nil
	}
	return &r.Turns[i-1]
}

// PaidCalls is the number of calls the fake received.
func (r *Report) PaidCalls() int { return len(r.Calls) }

// CallsTo counts the calls of step (0 = every step) whose model ref matches
// ref, or every call when ref is "".
func (r *Report) CallsTo(step int, ref string) int {
	n := 0
	for _, c := range r.Calls {
		if (step == 0 || c.Step == step) && (ref == "" || c.Ref() == ref) {
			n++
		}
	}
	return n
}

// CallsToProvider counts the calls of step (0 = every step) to provider.
func (r *Report) CallsToProvider(step int, provider string) int {
	n := 0
	for _, c := range r.Calls {
		if (step == 0 || c.Step == step) && c.Provider == provider {
			n++
		}
	}
	return n
}

// Group is the number of calls to one model with one profile.
type Group struct {
	Model   string `json:"model"`
	Profile string `json:"profile"`
	Calls   int    `json:"calls"`
}

// ByModelProfile groups the calls by model and profile, in order of first call.
func (r *Report) ByModelProfile() []Group {
	idx := map[[2]string]int{}
	var out []Group
	for _, c := range r.Calls {
		k := [2]string{c.Ref(), c.Profile}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Group{Model: c.Ref(), Profile: c.Profile})
		}
		out[i].Calls++
	}
	return out
}

// MaxPerMinute is the largest number of calls inside any sliding minute of the
// drill clock.
func (r *Report) MaxPerMinute() int {
	at := make([]time.Duration, len(r.Calls))
	for i, c := range r.Calls {
		at[i] = c.At
	}
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	best, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= time.Minute {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// FirstAnswer describes the first step's outcome for summary tables: the time to
// the answer (or error) and what it was.
func (r *Report) FirstAnswer() (time.Duration, string) {
	t := r.Step(1)
	if t == nil || len(t.Answers) == 0 {
		return 0, "none"
	}
	var worst time.Duration
	kinds := map[string]int{}
	for _, a := range t.Answers {
		worst = max(worst, a.After)
		kinds[a.Kind]++
	}
	if len(t.Answers) == 1 {
		a := t.Answers[0]
		if a.Kind == "reply" {
			return a.After, "answer by " + a.Model
		}
		return a.After, a.Kind
	}
	var parts []string
	for _, k := range []string{"reply", "error", "none"} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], plural(k, kinds[k])))
		}
	}
	return worst, strings.Join(parts, ", ")
}

func plural(k string, n int) string {
	if n == 1 {
		return k
	}
	switch k {
	case "reply":
		return "replies"
	case "none":
		return "unanswered"
	}
	return k + "s"
}
