package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
)

// SummaryError ends a run in which no candidate answered (V3). It holds every
// attempt and skip, and the model-aware earliest moment a candidate is usable again.
type SummaryError struct {
	Attempts      []AttemptRecord
	EarliestRetry time.Time // model-aware earliest expiry; zero = unknown
	// Until is when each visited candidate is usable again, as the engine will
	// use it (zero = now or unknown); EarliestRetry is the earliest of them.
	Until map[ModelRef]time.Time
	Stop  error // why the run stopped early, if it did (ErrBreakerTripped, ErrTurnBudget, ...)
	// Checks are the visited providers that are down, by provider: how their
	// checks went and when the next is due (E1, E2, E6).
	Checks map[string]ProviderCheck

	At           time.Time // when the run ended (engine clock)
	Stalls       int       // idle-timeout breaker count at the end (R8)
	PaidCalls    int       // paid calls made by the run (B1)
	MaxPaidCalls int       // the turn's paid-call budget (B1)
	CostUSD      float64   // estimated cost of the run (B1)
	MaxCostUSD   float64   // the turn's cost budget; 0 = none (B1)
}

// ProviderCheck is what the checks of a provider that is down came to (E2, E6).
type ProviderCheck struct {
	Failed int       // checks that failed in a row since it last answered
	Next   time.Time // when the next check may start
}

// Error lists every attempt as "provider/model[profile]: outcome (HTTP n)",
// the outcome as the metrics count it (classify.Outcome). It contains profile
// ids only, never a secret.
func (e *SummaryError) Error() string {
	var b strings.Builder
	if e.Stop != nil {
		fmt.Fprintf(&b, "failover: run stopped (%s) after %d paid calls", strings.TrimPrefix(e.Stop.Error(), "failover: "), e.PaidCalls)
	} else {
		fmt.Fprintf(&b, "failover: all candidates failed (%d attempts)", len(e.Attempts))
	}
	for i, a := range e.Attempts {
		if i == 10 {
			fmt.Fprintf(&b, " | … %d more", len(e.Attempts)-i)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(" | ")
		}
		b.WriteString(a.Candidate.Ref())
		if a.Candidate.Profile != "" {
			b.WriteString("[" + a.Candidate.Profile + "]")
		}
		switch {
		case a.Skipped != "":
			b.WriteString(": skipped (" + string(a.Skipped) + ")")
		case a.Failure != nil:
			b.WriteString(": " + classify.Outcome(a.Failure.Reason, a.Failure.Status)) // as the metrics count it
			if a.Failure.Status != 0 {
				fmt.Fprintf(&b, " (HTTP %d)", a.Failure.Status)
			}
		}
	}
	return b.String()
}

// Unwrap exposes Stop for errors.Is.
func (e *SummaryError) Unwrap() error { return e.Stop }

// Last returns the last attempt failure, or nil.
func (e *SummaryError) Last() *Failure {
	for i := len(e.Attempts) - 1; i >= 0; i-- {
		if e.Attempts[i].Failure != nil {
			return e.Attempts[i].Failure
		}
	}
	return nil
}

// UserMessage returns one clear sentence for the user, times shown in loc (nil = UTC).
func (e *SummaryError) UserMessage(loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case errors.Is(e.Stop, ErrBreakerTripped):
		return fmt.Sprintf("the run was stopped: %d stalled responses in a row (idle-timeout breaker)", e.Stalls)
	case errors.Is(e.Stop, ErrTurnBudget):
		if e.MaxCostUSD > 0 && e.CostUSD >= e.MaxCostUSD {
			return fmt.Sprintf("turn cost budget of $%.2f reached ($%.2f spent); no further call was made", e.MaxCostUSD, e.CostUSD)
		}
		return fmt.Sprintf("turn budget of %d paid calls reached; no further call was made", e.MaxPaidCalls)
	case errors.Is(e.Stop, ErrPaidCallGuard):
		return "the bot reached its limit of paid calls per minute; try again in a minute"
	case errors.Is(e.Stop, ErrIterationCap):
		return "the request failed after repeated internal retries; try again, or use /new to start a fresh session"
	case errors.Is(e.Stop, ErrRunTimeout):
		return "the run timed out before any model answered; try again"
	}
	var reasons []classify.Reason
	var refs []string
	for _, a := range e.Attempts {
		r := a.Skipped
		if a.Failure != nil {
			r = a.Failure.Reason
		}
		if r != "" && !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
		if ref := a.Candidate.Ref(); !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	var s string
	switch {
	case len(refs) == 1 && len(reasons) == 1:
		s = refs[0] + " is " + phrase(reasons[0])
	case len(refs) == 1:
		s = refs[0] + " failed (" + joinReasons(reasons) + ")"
	case len(reasons) == 1:
		s = "all models are " + phrase(reasons[0])
	case len(reasons) == 0:
		s = "no model could be tried"
	default:
		s = "all models failed (" + joinReasons(reasons) + ")"
	}
	if !e.EarliestRetry.IsZero() {
		// The moment itself, as detour's other texts write it (package
		// when): seconds when it is not on the minute, never a minute
		// earlier than it is.
		t := e.EarliestRetry.In(loc)
		if f := t.Truncate(time.Second); f.Before(t) {
			t = f.Add(time.Second)
		}
		layout := "15:04"
		if at := e.At.In(loc); e.At.IsZero() || at.YearDay() != t.YearDay() || at.Year() != t.Year() {
			layout = "Jan 2 15:04"
		}
		if t.Second() != 0 {
			layout += ":05"
		}
		layout += " MST"
		s += "; earliest retry " + t.Format(layout)
	} else {
		s += "; try again later"
	}
	return s
}

func phrase(r classify.Reason) string {
	switch r {
	case classify.ReasonRateLimit:
		return "rate-limited"
	case classify.ReasonOverloaded:
		return "overloaded"
	case classify.ReasonBilling:
		return "out of credits or over a billing limit"
	case classify.ReasonTimeout:
		return "timing out"
	case classify.ReasonConsecutiveTimeout:
		return "unavailable after repeated timeouts"
	case classify.ReasonAuth, classify.ReasonAuthPermanent:
		return "failing authentication"
	case classify.ReasonModelNotFound:
		return "not found by the provider"
	case classify.ReasonContextWindow:
		return "too small for this conversation"
	case classify.ReasonRefusedResponse:
		return "sending responses detour refuses (redirects, compressed or oversized bodies)"
	case classify.ReasonLocal:
		return "unreachable because of a failure on detour's side, not the providers'"
	case classify.ReasonImageInput:
		return "unable to take images"
	}
	return "failing (" + string(r) + ")"
}

func joinReasons(rs []classify.Reason) string {
	ss := make([]string, len(rs))
	for i, r := range rs {
		ss[i] = string(r)
	}
	return strings.Join(ss, ", ")
}

func (r *runner) summary(stop error) (Result, error) {
	now := r.now()
	se := &SummaryError{
		Attempts: r.records, Stop: stop, At: now, Stalls: r.breaker,
		PaidCalls: r.paid, MaxPaidCalls: r.p.MaxPaidAttemptsPerTurn,
		CostUSD: r.cost, MaxCostUSD: r.p.MaxTurnCostUSD,
	}
	se.Checks = r.checks()
	se.Until, se.EarliestRetry = r.earliest(now, se.Checks)
	outcome := "exhausted"
	if stop != nil {
		outcome = "stopped"
	}
	from, f := r.origin, r.cause
	if f == nil {
		from, f = r.lastCand, r.lastFail
	}
	if f == nil {
		f = &Failure{}
	}
	r.logStep(from, f, "", outcome)
	return Result{Attempts: r.records, CostUSD: r.cost}, se
}

// earliest returns when each candidate the run visited is usable again (zero =
// usable now) and the model-aware earliest of those moments (V3): model-scoped
// cooldowns of other models are ignored; for each profile the latest matching
// expiry counts; a candidate is usable when one of its profiles is; the model's
// own state (R7) blocks too. Both the user's message and the admin report read
// these times, so they agree, and none is in the past.
func (r *runner) earliest(now time.Time, checks map[string]ProviderCheck) (map[ModelRef]time.Time, time.Time) {
	var best time.Time
	until := map[ModelRef]time.Time{}
	for _, a := range r.records {
		ref := ModelRef(a.Candidate.Ref())
		if _, seen := until[ref]; seen {
			continue
		}
		prov, _ := ref.Split()
		profs, _, _ := profilesFor(r.req, prov, now)
		cs, _ := r.e.CandidateStatus(r.ctx, ref, profs) // a state that cannot be read: unknown, zero
		c, down := checks[prov]
		u := readyAt(cs.Until, c, down, now)
		until[ref] = u
		if !u.IsZero() && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	return until, best
}

// readyAt is when a candidate whose cooldowns end at until (zero = none) is
// usable again; a provider that is down (E1) keeps it waiting for the
// provider's next check. It is pure; the summary error and ReadyAt (/status)
// both decide with it, so they name the same moment.
func readyAt(until time.Time, c ProviderCheck, down bool, now time.Time) time.Time {
	if down && c.Next.After(now) && c.Next.After(until) {
		return c.Next // E1: the conversation waits for the provider's next check
	}
	return until
}

// ReadyAt is when ref is usable again, as a run would find it and as its
// summary error would say (V3): the model-aware end of its cooldowns and, when
// its provider is down, the provider's next check (E1). Zero: usable now.
// /status reads it so that it names the moment the error and the report name.
func (e *Engine) ReadyAt(ctx context.Context, ref ModelRef, profiles []Profile) (time.Time, error) {
	now := e.now()
	cs, err := e.CandidateStatus(ctx, ref, profiles)
	if err != nil {
		return time.Time{}, err
	}
	prov, _ := ref.Split()
	rows, errs := e.getStates(ctx, []string{probeKey(prov)})
	if len(errs) > 0 && errs[0] != nil { // errs is nil when the read succeeded
		return time.Time{}, fmt.Errorf("failover: checks of %s: %w", prov, errs[0])
	}
	var c ProviderCheck
	down := providerDown(rows[0])
	if down {
		c = ProviderCheck{Failed: rows[0].Consecutive, Next: nextCheckAt(e.policy(), rows[0])}
	}
	return readyAt(cs.Until, c, down, now), nil
}

// checks reads the probe rows of the providers the run visited and returns
// those that are down (E6).
func (r *runner) checks() map[string]ProviderCheck {
	var provs []string
	for _, a := range r.records {
		if p := a.Candidate.Provider; p != "" {
			provs = append(provs, p)
		}
	}
	if len(provs) == 0 {
		return nil
	}
	var out map[string]ProviderCheck
	for prov, row := range r.rowsOf(provs) {
		if !providerDown(row) {
			continue
		}
		if out == nil {
			out = make(map[string]ProviderCheck)
		}
		out[prov] = ProviderCheck{Failed: row.Consecutive, Next: nextCheckAt(r.p, row)}
	}
	return out
}
