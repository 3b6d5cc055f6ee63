package sessions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// Observer is told what turns do, for the operations metrics (M5). Its methods
// run on the turn's goroutine, so they must be quick and safe for concurrent
// use. Options.Observer nil = none.
type Observer interface {
	// Attempt is one finished attempt record (V1): a paid call (Skipped empty;
	// Failure nil on success) or a candidate skipped without a call.
	Attempt(a failover.AttemptRecord)
	// Fallback is the run moving from one model to the next ("provider/model"),
	// and the reason it left the first: its failure, or why it was skipped, with
	// the failure's HTTP status (classify.StatusUnknown for a skip).
	Fallback(from, to string, reason classify.Reason, status int)
	// GuardRejected is a turn refused a paid call by a limit: GuardPerMinute
	// (B2), GuardTurnBudget (B1) or GuardUserBudget (T6).
	GuardRejected(guard string)
	// TurnDone is one finished turn (commands and refusals are not turns).
	TurnDone(t TurnReport)
}

// Guards named by Observer.GuardRejected.
const (
	GuardPerMinute  = "paid_calls_per_minute" // limits.max_paid_attempts_per_minute (B2)
	GuardTurnBudget = "turn_budget"           // agents.defaults.budget (B1)
	GuardUserBudget = "user_daily_budget"     // limits.per_user_daily_* (T6)
)

// Turn outcomes in TurnReport.Outcome, besides a terminal failure's reason
// (format, content_filter, context_overflow, ...).
const (
	OutcomeOK       = "ok"            // answered by the model the run asked first
	OutcomeFallback = "fallback"      // answered by a later candidate
	OutcomeStorage  = "storage_error" // the database stopped the turn before any paid call (T7)
	OutcomeCancel   = "cancelled"
	OutcomeError    = "error"
)

// TurnReport is what one finished turn did.
type TurnReport struct {
	Channel   string
	Session   string
	Model     string // the model that answered, else the last one called; "" = none
	PaidCalls int
	Outcome   string // OutcomeOK, OutcomeFallback, a failure's reason, or a stop such as "exhausted"
	Duration  time.Duration
	// LLMTime is the time spent in model calls, as the engine's clock measures
	// attempts (the wall clock in the bot; a drill's fake clock may make it
	// zero or larger than Duration), so Duration-LLMTime is the bot's own share.
	LLMTime time.Duration
}

// tally is one turn's report (its log line and the metrics, M5) across its
// runs; the paid calls are the turn's own count.
type tally struct {
	start   time.Time
	outcome string
	model   string // the model that answered, else the last one called
	llm     time.Duration
	guard   string
	usage   []usageRow // U2: the turn's paid calls, stored when it ends
}

// newTally starts a turn's report. Until the turn reaches its run, only the
// database can stop it, so that is the outcome until one is set.
func newTally() tally { return tally{start: time.Now(), outcome: OutcomeStorage} }

// attempted keeps one attempt record of t (V1) and counts it: what the turn
// paid (B1, T6), its usage (U2) and its report; when the run moved to another
// model, the observer also hears of the fallback step.
func (t *turn) attempted(a failover.AttemptRecord) {
	t.attempts = append(t.attempts, a)
	t.countUsage(t.in, a) // U2
	if a.Skipped == "" {
		t.paid.Calls++
		t.paid.USD += a.CostUSD
		t.tokensIn += int64(a.InputTokens)
		t.tokensOut += int64(a.OutputTokens)
		t.llm += a.Duration
		t.model = a.Candidate.Ref()
	}
	t.r.addSpend(t.in.User, a) // T6
	obs := t.r.obs
	if obs == nil {
		return
	}
	obs.Attempt(a)
	if n := len(t.attempts); n >= 2 {
		prev := t.attempts[n-2]
		if from, to := prev.Candidate.Ref(), a.Candidate.Ref(); from != to {
			reason, status := prev.Skipped, classify.StatusUnknown
			if prev.Failure != nil {
				reason, status = prev.Failure.Reason, prev.Failure.Status
			}
			obs.Fallback(from, to, reason, status)
		}
	}
}

// answered records a turn that got its answer from model.
func (t *tally) answered(model failover.ModelRef, fellBack bool) {
	t.outcome, t.model = OutcomeOK, string(model)
	if fellBack {
		t.outcome = OutcomeFallback
	}
}

// failed records why a turn ended without an answer.
func (t *tally) failed(err error) {
	var s *failover.SummaryError
	var f *failover.Failure
	switch {
	case isOverflow(err):
		t.outcome = string(classify.ReasonContextOverflow)
	case errors.As(err, &s):
		switch {
		case s.Stop == nil:
			t.outcome = "exhausted"
		case errors.Is(s.Stop, failover.ErrPaidCallGuard):
			t.outcome, t.guard = "paid_call_guard", GuardPerMinute
		case errors.Is(s.Stop, failover.ErrTurnBudget):
			t.outcome, t.guard = "turn_budget", GuardTurnBudget
		case errors.Is(s.Stop, failover.ErrUserBudget):
			t.outcome, t.guard = "user_budget", GuardUserBudget
		case errors.Is(s.Stop, failover.ErrBreakerTripped):
			t.outcome = "breaker"
		case errors.Is(s.Stop, failover.ErrIterationCap):
			t.outcome = "iteration_cap"
		case errors.Is(s.Stop, failover.ErrRunTimeout):
			t.outcome = "run_timeout"
		case errors.Is(s.Stop, context.Canceled):
			t.outcome = OutcomeCancel
		default:
			t.outcome = "stopped"
		}
	case errors.As(err, &f) && f.Reason != "":
		t.outcome = string(f.Reason)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		t.outcome = OutcomeCancel
	default:
		t.outcome = OutcomeError
	}
}

// finishTurn stores the turn's usage, writes its one info line and tells the
// observer.
func (t *turn) finish() {
	r := t.r
	in := t.in
	r.storeUsage(in, &t.tally)
	rep := TurnReport{Channel: in.Channel, Session: in.SessionKey, Model: t.model, PaidCalls: t.paid.Calls,
		Outcome: t.outcome, Duration: time.Since(t.start), LLMTime: t.llm}
	r.log.LogAttrs(context.Background(), slog.LevelInfo, "turn",
		slog.String("session", rep.Session),
		slog.String("channel", rep.Channel),
		slog.String("model", rep.Model),
		slog.Int("paid_calls", rep.PaidCalls),
		slog.String("outcome", rep.Outcome),
		slog.Float64("duration_ms", ms(rep.Duration)),
		slog.Float64("llm_ms", ms(rep.LLMTime)),
	)
	t.alertGuard()
	if r.obs == nil {
		return
	}
	if t.guard != "" {
		r.obs.GuardRejected(t.guard)
	}
	r.obs.TurnDone(rep)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
