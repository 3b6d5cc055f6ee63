package drills

import (
	"fmt"
	"strings"
	"time"
)

// Judge evaluates a report against the budgets: the scenario's own checks (found
// by r.Scenario) and the budget checks every drill must pass. It is a pure
// function of its arguments and the scenario table.
func Judge(r *Report, b Budgets) Verdict {
	var checks []Check
	if sc, ok := Lookup(r.Scenario); ok {
		checks = append(checks, sc.Checks...)
	}
	checks = append(checks, budgetChecks...)
	return judge(checks, r, b)
}

func judge(checks []Check, r *Report, b Budgets) Verdict {
	v := Verdict{Pass: r.Err == ""}
	if r.Err != "" {
		v.Checks = append(v.Checks, CheckResult{Name: "the drill ran", Detail: r.Err})
	}
	for _, c := range checks {
		ok, detail := c.Eval(r, b)
		v.Checks = append(v.Checks, CheckResult{Name: c.Name, Pass: ok, Detail: detail})
		v.Pass = v.Pass && ok
	}
	return v
}

// budgetChecks hold for every scenario: the configuration's own budgets (B1, B2)
// and that nobody is left without an answer or an error.
var budgetChecks = []Check{
	{"every message got a reply or an error", func(r *Report, _ Budgets) (bool, string) {
		for _, t := range r.Turns {
			missing := 0
			for _, a := range t.Answers {
				if a.Kind == "none" {
					missing++
				}
			}
			if missing > 0 || len(t.Answers) < t.Sessions {
				return false, fmt.Sprintf("step %d: %d of %d sessions got nothing", t.Step, missing+t.Sessions-len(t.Answers), t.Sessions)
			}
		}
		return true, fmt.Sprintf("%d step(s)", len(r.Turns))
	}},
	{"paid calls per turn within max_paid_attempts_per_turn (B1)", func(r *Report, b Budgets) (bool, string) {
		if b.MaxPaidPerTurn <= 0 {
			return true, "no per-turn cap configured"
		}
		worst, multi := 0, ""
		for _, t := range r.Turns {
			if t.Calls > max(t.Sessions, 1)*b.MaxPaidPerTurn {
				return false, fmt.Sprintf("step %d: %d paid calls for %d session(s), cap %d each", t.Step, t.Calls, t.Sessions, b.MaxPaidPerTurn)
			}
			if t.Sessions <= 1 {
				worst = max(worst, t.Calls)
			} else {
				multi = fmt.Sprintf("; step %d: %d for %d sessions", t.Step, t.Calls, t.Sessions)
			}
		}
		return true, fmt.Sprintf("at most %d per turn, cap %d%s", worst, b.MaxPaidPerTurn, multi)
	}},
	{"paid calls per minute within max_paid_attempts_per_minute (B2)", func(r *Report, b Budgets) (bool, string) {
		m := r.MaxPerMinute()
		if b.MaxPaidPerMinute <= 0 {
			return true, fmt.Sprintf("%d in the busiest minute; no cap configured", m)
		}
		return m <= b.MaxPaidPerMinute, fmt.Sprintf("%d in the busiest minute, cap %d", m, b.MaxPaidPerMinute)
	}},
	{"turn cost within max_turn_cost_usd (B1)", func(r *Report, b Budgets) (bool, string) {
		if b.MaxTurnCostUSD <= 0 || !r.Priced {
			return true, "no cost cap or no prices configured"
		}
		for _, t := range r.Turns {
			if per := t.CostUSD / float64(max(t.Sessions, 1)); per > b.MaxTurnCostUSD {
				return false, fmt.Sprintf("step %d: estimated $%.4f per turn, cap $%.4f", t.Step, per, b.MaxTurnCostUSD)
			}
		}
		return true, fmt.Sprintf("cap $%.4f", b.MaxTurnCostUSD)
	}},
}

// Who answered, for answeredBy.
type who int

const (
	anyModel      who = iota
	primaryModel      // the configured primary
	fallbackModel     // any model but the primary
)

func (w who) String() string {
	switch w {
	case primaryModel:
		return "the primary"
	case fallbackModel:
		return "a fallback"
	}
	return "a model"
}

func stepOrFail(r *Report, step int) (*Turn, string) {
	t := r.Step(step)
	if t == nil {
		return nil, fmt.Sprintf("step %d did not run", step)
	}
	return t, ""
}

// answeredBy: every session of step got a reply from w.
func answeredBy(step int, w who) Check {
	return Check{fmt.Sprintf("step %d answered by %s", step, w), func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		for _, a := range t.Answers {
			if a.Kind != "reply" {
				return false, fmt.Sprintf("%s got %s: %s", a.Session, a.Kind, clip(a.Text, 120))
			}
			if (w == primaryModel && a.Model != r.Primary) || (w == fallbackModel && a.Model == r.Primary) {
				return false, fmt.Sprintf("%s answered by %s", a.Session, a.Model)
			}
		}
		return true, answerModels(t)
	}}
}

// answeredOffProvider: answered by a model of another provider than the
// primary's when the chain has one; else the user is told why.
func answeredOffProvider(step int) Check {
	return Check{fmt.Sprintf("step %d answered by another provider (or told why when the chain has none)", step), func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		pp, _ := splitRef(r.Primary)
		other := false
		for _, f := range r.Fallbacks {
			if p, _ := splitRef(f); p != pp {
				other = true
			}
		}
		for _, a := range t.Answers {
			if !other {
				if a.Kind != "error" || strings.TrimSpace(a.Text) == "" {
					return false, fmt.Sprintf("no fallback on another provider, and %s got %s", a.Session, a.Kind)
				}
				continue
			}
			if a.Kind != "reply" {
				return false, fmt.Sprintf("%s got %s: %s", a.Session, a.Kind, clip(a.Text, 120))
			}
			if p, _ := splitRef(a.Model); p == pp {
				return false, fmt.Sprintf("%s answered by %s", a.Session, a.Model)
			}
		}
		return true, answerModels(t)
	}}
}

// answeredWithin: every answer of step came within limit(b).
func answeredWithin(step int, what string, limit func(Budgets) time.Duration) Check {
	return Check{fmt.Sprintf("step %d answered within %s", step, what), func(r *Report, b Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		l := limit(b)
		for _, a := range t.Answers {
			if a.After > l {
				return false, fmt.Sprintf("%s took %s, limit %s", a.Session, round(a.After), round(l))
			}
		}
		return true, fmt.Sprintf("%s, limit %s", round(t.Elapsed), round(l))
	}}
}

// toldWhy: every session of step got an error whose text has one of words.
func toldWhy(step int, words ...string) Check {
	name := fmt.Sprintf("step %d: the user is told why", step)
	if len(words) > 0 {
		name += fmt.Sprintf(" (%s)", strings.Join(words, " | "))
	}
	return Check{name, func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		for _, a := range t.Answers {
			if a.Kind != "error" || strings.TrimSpace(a.Text) == "" {
				return false, fmt.Sprintf("%s got %s: %s", a.Session, a.Kind, clip(a.Text, 120))
			}
			if len(words) > 0 && !containsAny(a.Text, words) {
				return false, fmt.Sprintf("%s was told %q", a.Session, clip(a.Text, 160))
			}
		}
		if len(t.Answers) == 0 {
			return false, "no answer"
		}
		return true, clip(t.Answers[0].Text, 160)
	}}
}

// answeredOrTold: a reply, or an error with one of words.
func answeredOrTold(step int, words ...string) Check {
	return Check{fmt.Sprintf("step %d answered, or the user told why (%s)", step, strings.Join(words, " | ")), func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		for _, a := range t.Answers {
			switch {
			case a.Kind == "reply":
			case a.Kind == "error" && containsAny(a.Text, words):
			default:
				return false, fmt.Sprintf("%s got %s: %s", a.Session, a.Kind, clip(a.Text, 160))
			}
		}
		if len(t.Answers) == 0 {
			return false, "no answer"
		}
		a := t.Answers[0]
		if a.Kind == "reply" {
			return true, "answered by " + a.Model
		}
		return true, clip(a.Text, 160)
	}}
}

// count is a bound on a number taken from the budgets or the report.
type count func(r *Report, b Budgets) int

func n(v int) count { return func(*Report, Budgets) int { return v } }

var (
	breakerTrip     count = func(_ *Report, b Budgets) int { return b.BreakerTrip }
	switchThreshold count = func(_ *Report, b Budgets) int { return b.TimeoutSwitchThreshold }
	// primaryKeys is the number of profiles of the primary's provider (at least 1).
	primaryKeys count = func(r *Report, _ Budgets) int {
		p, _ := splitRef(r.Primary)
		return max(r.Profiles[p], 1)
	}
	// twicePrimaryKeys allows one retry per key (R5, R6).
	twicePrimaryKeys count = func(r *Report, b Budgets) int { return 2 * primaryKeys(r, b) }
)

// callsBetween bounds the calls of step (0 = all steps) to what (a model ref
// from pick, "" = every call) within [lo, hi].
func callsBetween(name string, step int, pick func(r *Report) string, byProvider bool, lo, hi count) Check {
	return Check{name, func(r *Report, b Budgets) (bool, string) {
		if step > 0 && r.Step(step) == nil {
			return false, fmt.Sprintf("step %d did not run", step)
		}
		target := pick(r)
		var got int
		if byProvider {
			got = r.CallsToProvider(step, target)
		} else {
			got = r.CallsTo(step, target)
		}
		l, h := lo(r, b), hi(r, b)
		what := target
		if what == "" {
			what = "any model"
		}
		return got >= l && got <= h, fmt.Sprintf("%d call(s) to %s, want %s", got, what, span(l, h))
	}}
}

func primaryRef(r *Report) string { return r.Primary }
func primaryProvider(r *Report) string {
	p, _ := splitRef(r.Primary)
	return p
}
func anyRef(*Report) string { return "" }

func primaryCalls(step int, lo, hi count, why string) Check {
	return callsBetween(fmt.Sprintf("step %d: %s", step, why), step, primaryRef, false, lo, hi)
}

func paidCalls(step int, lo, hi count, why string) Check {
	return callsBetween(fmt.Sprintf("step %d: %s", step, why), step, anyRef, false, lo, hi)
}

// notices bounds the fallback/cleared notices of step; with notices.users off
// it expects none. want, when set, must appear in each.
func notices(step, lo, hi int, want string, why string) Check {
	return Check{fmt.Sprintf("step %d: %s", step, why), func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		got := len(t.Notices)
		if r.Notices == "off" {
			return got == 0, fmt.Sprintf("%d notice(s); notices.users is off", got)
		}
		for _, s := range t.Notices {
			if want != "" && !strings.Contains(s, want) {
				return false, fmt.Sprintf("notice %q lacks %q", clip(s, 120), want)
			}
		}
		detail := fmt.Sprintf("%d notice(s), want %s", got, span(lo, hi))
		if got > 0 {
			detail += ": " + clip(t.Notices[0], 120)
		}
		return got >= lo && got <= hi, detail
	}}
}

// reports bounds the admin reports of step; every chain model must be named.
func reports(step, lo, hi int, why string) Check {
	return Check{fmt.Sprintf("step %d: %s", step, why), func(r *Report, _ Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		got := len(t.Reports)
		if got < lo || got > hi {
			return false, fmt.Sprintf("%d report(s), want %s", got, span(lo, hi))
		}
		for _, rep := range t.Reports {
			for _, m := range append([]string{r.Primary}, r.Fallbacks...) {
				if !strings.Contains(rep, m) {
					return false, fmt.Sprintf("the report does not name %s", m)
				}
			}
		}
		return true, fmt.Sprintf("%d report(s), want %s", got, span(lo, hi))
	}}
}

// guardHolds: the calls of step stay within the per-minute guard (B2).
func guardHolds(step int) Check {
	return Check{fmt.Sprintf("step %d: total paid calls within max_paid_attempts_per_minute (B2)", step), func(r *Report, b Budgets) (bool, string) {
		t, miss := stepOrFail(r, step)
		if t == nil {
			return false, miss
		}
		if b.MaxPaidPerMinute <= 0 {
			return false, fmt.Sprintf("%d calls; no per-minute cap is configured", t.Calls)
		}
		m := r.MaxPerMinute()
		return t.Calls <= b.MaxPaidPerMinute && m <= b.MaxPaidPerMinute,
			fmt.Sprintf("%d calls for %d sessions (busiest minute %d), cap %d", t.Calls, t.Sessions, m, b.MaxPaidPerMinute)
	}}
}

func answerModels(t *Turn) string {
	seen := map[string]int{}
	var order []string
	for _, a := range t.Answers {
		if seen[a.Model] == 0 {
			order = append(order, a.Model)
		}
		seen[a.Model]++
	}
	if len(order) == 1 {
		return "by " + order[0]
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", m, seen[m]))
	}
	return "by " + strings.Join(parts, ", ")
}

func span(lo, hi int) string {
	switch {
	case lo == hi:
		return fmt.Sprint(lo)
	case lo == 0:
		return fmt.Sprintf("at most %d", hi)
	}
	return fmt.Sprintf("%d..%d", lo, hi)
}

func containsAny(s string, words []string) bool {
	ls := strings.ToLower(s)
	for _, w := range words {
		if strings.Contains(ls, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
