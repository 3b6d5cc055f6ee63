package failover

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/detourbot/detour/classify"
)

// Reasons a run stops before the chain is exhausted.
var (
	ErrBreakerTripped = errors.New("failover: idle-timeout breaker tripped")         // R8
	ErrTurnBudget     = errors.New("failover: turn budget reached")                  // B1
	ErrPaidCallGuard  = errors.New("failover: process-wide paid-call limit reached") // B2
	ErrIterationCap   = errors.New("failover: iteration cap reached")                // R9
	ErrRunTimeout     = errors.New("failover: run timeout")                          // R10
	ErrUserBudget     = errors.New("failover: daily budget reached")                 // T6: what Controller.BeforeCall errors wrap
)

// Run walks req.Chain, calling attempt for each paid call the policy allows, and
// returns the first success or a *SummaryError (or a terminal *Failure such as
// format or context_overflow, which is not a chain failure). When the caller's
// ctx is cancelled, Run returns an error wrapping context.Cause(ctx).
//
// Attempt-level errors never escape while a later candidate can still answer (B5).
// Every attempt and skip is recorded (V1) and passed to req.Trace.OnAttempt;
// req.Control may stop the run, redirect it, persist a fallback or shrink the
// prompt (T6, O6, O2, O3, R15).
func (e *Engine) Run(ctx context.Context, req Request, attempt AttemptFunc) (Result, error) {
	if attempt == nil {
		return Result{}, errors.New("failover: run: nil attempt function")
	}
	if len(req.Chain) == 0 {
		return Result{}, errors.New("failover: run: empty chain")
	}
	p := e.policy()
	runCtx := ctx
	if p.RunTimeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, p.RunTimeout, ErrRunTimeout) // R10
		defer cancel()
	}
	r := &runner{e: e, p: p, req: &req, attempt: attempt, ctl: req.Control, ctx: runCtx, parent: ctx, log: e.Log,
		spent: req.Spent, maxIter: iterationCap(&req)}
	if r.ctl == nil {
		r.ctl = NoControl{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	defer r.releaseClaims() // A1: a probe claim never outlives its run
	r.run()
	return r.res, r.err
}

// iterationCap is 24 + 8 × profiles, clamped to 32..160 (R9).
func iterationCap(req *Request) int {
	n := 0
	seen := map[string]bool{}
	for _, ref := range req.Chain {
		prov, _ := ref.Split()
		if seen[prov] {
			continue
		}
		seen[prov] = true
		k := len(req.Profiles[prov])
		if o := len(req.Order[prov]); o > k {
			k = o
		}
		n += max(1, k)
	}
	return min(160, max(32, 24+8*n))
}

type runner struct {
	jump      int // O6, C13: index of the candidate to go to next; 0 = none
	compacted int // R15: compactions after timeouts in this run
	e         *Engine
	p         *Policy
	req       *Request
	attempt   AttemptFunc
	ctl       Controller
	ctx       context.Context // run context (R10)
	parent    context.Context // the caller's context
	log       *slog.Logger

	records  []AttemptRecord
	paid     int
	cost     float64
	spent    Spend // B1: what the turn paid outside this run's calls (before it, and its compactions' summaries)
	breaker  int   // R8: whole run
	iter     int
	maxIter  int
	probed   map[string]bool   // R11: one transient-cooldown probe per provider per run
	claims   map[string]*claim // A1: the providers' probe rows this run claimed
	netUsed  bool              // C13: the format safety net moved this run once
	overflow bool              // R15: the prompt was compacted after a context_overflow

	origin   Candidate // Chain[0] as tried (or skipped)
	cause    *Failure  // what moved the run off Chain[0]
	lastCand Candidate
	lastFail *Failure

	res Result // the run's result, once a step finished it
	err error
}

// flow is where a step of a run leaves it.
type flow uint8

const (
	proceed  flow = iota // go on: make the call, or call the candidate again
	leave                // leave the candidate for the next one (or for r.jump)
	finished             // the run is over: r.res and r.err hold its result
)

// finish ends the run with res and err.
func (r *runner) finish(res Result, err error) flow {
	r.res, r.err = res, err
	return finished
}

// end ends the run with err, which is not a chain failure.
func (r *runner) end(err error) flow {
	return r.finish(Result{Attempts: r.records, CostUSD: r.cost}, err)
}

func (r *runner) now() time.Time { return r.e.now() }

func (r *runner) run() {
	var cooling []plan // candidates skipped for a transient cooldown
	for i := 0; i < len(r.req.Chain); i++ {
		pl := r.evaluate(i)
		if pl.skip != "" {
			if r.skip(i, &pl) {
				cooling = append(cooling, pl)
			}
			continue
		}
		if r.walk(i, &pl) == finished {
			return
		}
		if r.jump > i { // O6, C13: straight to the candidate named
			i, r.jump = r.jump-1, 0
		}
	}
	if r.sharedProbe(cooling) == finished { // A1: no refusal while a candidate may answer
		return
	}
	r.finish(r.summary(nil))
}

// skip records candidate i as skipped without a call (V1, V2) and reports
// whether it waits out a transient cooldown, so A1's shared probe may try it.
func (r *runner) skip(i int, pl *plan) (cooling bool) {
	c := Candidate{Provider: pl.prov, Model: pl.model}
	if len(pl.slots) > 0 {
		c.Profile = pl.slots[0].prof.ID
	}
	r.record(AttemptRecord{Candidate: c, Skipped: pl.skip, Started: r.now()})
	f := c.failed(pl.skip, "skipped: unavailable")
	f.Class, f.Status = classify.ClassTransient, classify.StatusUnknown
	if i == 0 {
		r.origin, r.cause = c, f
	}
	if i+1 < len(r.req.Chain) {
		r.logStep(c, f, string(r.req.Chain[i+1]), "next_candidate") // V2: a skip is a step too
	}
	r.iter++
	return transientCooldown(pl.skip) && pl.skip != classify.ReasonContextWindow && !pl.until.IsZero()
}

// visit is the run's stay on one candidate: the profile in use, the kind of
// the next call, and the counters Decide reads (R4).
type visit struct {
	i    int
	pl   *plan
	slot int // pl.slots[slot] is the profile in use
	cand Candidate
	kind AttemptKind
	rs   RunState
	// started: BeforeFallback ran for this candidate (O2); owes: what it wrote
	// is rolled back unless the candidate answers (O3).
	started, owes bool
}

// walk makes the calls on candidate i until it answers, the run leaves it or
// the run ends: the gate before each call, the call, then what follows it.
func (r *runner) walk(i int, pl *plan) flow {
	v := &visit{i: i, pl: pl, kind: pl.kind, cand: Candidate{Provider: pl.prov, Model: pl.model, Profile: pl.slots[0].prof.ID}}
	v.rs = RunState{Policy: r.p, UserStrict: pl.strict, MoreCandidates: i < len(r.req.Chain)-1,
		LargerContextLater: r.largerLater(i), OtherProviderLater: nextOtherProvider(r.req.Chain, i) >= 0, SafetyNetUsed: r.netUsed}
	if i == 0 {
		r.origin = v.cand
	}
	defer r.rollback(v)
	if v.kind == AttemptProbe && r.req.Probe != nil {
		if f := r.check(v); f != proceed {
			return f
		}
	}
	for {
		if f := r.gate(v); f != proceed {
			return f
		}
		if f := r.after(v, r.call(v)); f != proceed {
			return f
		}
	}
}

// check sends the small request of E1 to v's candidate before the
// conversation goes to a provider that is cooling down or down: it answers,
// and the cooldown clears for everyone (D1) and the conversation follows at
// once; it fails, and the provider's next check waits longer (E2) while the
// run leaves the candidate. A check is a call (B2, R9, R10) but carries no
// conversation, so the turn's budget (B1) does not count it. An answer that
// refuses the request itself (format, content filter, context) still says the
// provider is up.
func (r *runner) check(v *visit) flow {
	if f := r.bounded(false); f != proceed {
		return f
	}
	v.pl.slots[v.slot].tried = true
	c := r.timed(v.pl.ref, func(ctx context.Context) (Output, error) { return r.req.Probe(ctx, v.cand) })
	if c.err != nil && r.ctx.Err() != nil {
		r.record(v.record(c, v.cand.failed(classify.ReasonAborted, "run cancelled")))
		return r.checkCtx()
	}
	var f *Failure
	if c.err != nil {
		f = failureOf(&c, v.cand)
	}
	r.record(v.record(c, f))
	v.kind = AttemptNormal
	if f == nil || terminalReason(f.Reason) && f.Reason != classify.ReasonAborted {
		if c := r.claims[v.cand.Provider]; c != nil && !c.settled {
			v.pl.down = false // settleProbe marks the provider up, with its verdict
		}
		r.onSuccess(v.pl, v.cand, c.end)
		r.settleProbe(v.cand.Provider, nil, c.end)
		return proceed
	}
	r.lastCand, r.lastFail = v.cand, f
	r.onFailure(v.pl, v.cand, f, c.end)
	r.settleProbe(v.cand.Provider, f, c.end)
	if v.i == 0 && r.cause == nil {
		r.cause = f
	}
	next := ""
	if v.i+1 < len(r.req.Chain) {
		next = string(r.req.Chain[v.i+1])
	}
	r.logStep(v.cand, f, next, "next_candidate")
	return leave
}

// rollback undoes, exactly once, what BeforeFallback wrote for v's candidate
// when its visit ends without an answer: a failure, a stop, a budget or a
// cancellation (O3).
func (r *runner) rollback(v *visit) {
	if !v.owes {
		return
	}
	f := v.cand.failed(classify.ReasonAborted, "")
	if r.lastFail != nil && r.lastCand.Ref() == v.cand.Ref() {
		f = r.lastFail
	}
	r.ctl.AfterFailedFallback(context.WithoutCancel(r.ctx), v.cand, *f)
}

// gate runs before every paid call: the run's own bounds (R10, R9) and
// budgets (B1, B2), then the caller's say (T6, O6), then the persistence of a
// fallback before its first call (O2).
func (r *runner) gate(v *visit) flow {
	if f := r.bounded(true); f != proceed {
		return f
	}
	if err := r.ctl.BeforeCall(r.ctx, Attempt{Candidate: v.cand, Kind: v.kind, Number: r.paid + 1}); err != nil {
		if ls := (*LiveSwitchError)(nil); errors.As(err, &ls) {
			return r.liveSwitch(v, ls) // O6
		}
		return r.finish(r.summary(err)) // T6
	}
	if v.i > 0 && !v.started {
		v.started = true
		cause := Failure{}
		if r.cause != nil {
			cause = *r.cause
		}
		if err := r.ctl.BeforeFallback(r.ctx, r.origin, v.cand, cause); err != nil { // O2
			return r.end(fmt.Errorf("failover: before fallback to %s: %w", v.cand.Ref(), err))
		}
		v.owes = true
	}
	return proceed
}

// bounded applies the run's own bounds before a call: its end (R10), the
// iteration cap (R9), the turn's budget (B1, for a call that carries the
// conversation) and the process-wide guard (B2).
func (r *runner) bounded(turnBudget bool) flow {
	if f := r.checkCtx(); f != proceed {
		return f
	}
	r.iter++
	switch {
	case r.iter > r.maxIter:
		return r.finish(r.summary(ErrIterationCap)) // R9
	case turnBudget && r.overBudget():
		return r.finish(r.summary(ErrTurnBudget)) // B1
	case !r.e.Guard.Allow():
		return r.finish(r.summary(ErrPaidCallGuard)) // B2
	}
	return proceed
}

// overBudget reports whether the turn's budget is used up (B1): the run's
// paid calls and cost, and what the turn paid outside them.
func (r *runner) overBudget() bool {
	calls, usd := r.paid+r.spent.Calls, r.cost+r.spent.USD
	return r.p.MaxPaidAttemptsPerTurn > 0 && calls >= r.p.MaxPaidAttemptsPerTurn ||
		r.p.MaxTurnCostUSD > 0 && usd >= r.p.MaxTurnCostUSD
}

// called is what one paid call came to.
type called struct {
	out          Output
	err          error
	timedOut     bool // the engine's own attempt timeout cut it (R10)
	started, end time.Time
	cost         float64 // from the model's prices (B1)
}

// call makes one paid call on v's candidate within the attempt timeout (R10)
// and prices it (B1).
func (r *runner) call(v *visit) called {
	v.pl.slots[v.slot].tried = true
	r.paid++
	a := Attempt{Candidate: v.cand, Kind: v.kind, Number: r.paid}
	return r.timed(v.pl.ref, func(ctx context.Context) (Output, error) { return r.attempt(ctx, a) })
}

// timed makes one call of model ref with fn within the attempt timeout (R10)
// and prices it (B1).
func (r *runner) timed(ref ModelRef, fn func(ctx context.Context) (Output, error)) called {
	c := called{started: r.now()}
	ctx, cancel := r.ctx, context.CancelFunc(func() {})
	if r.p.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeoutCause(r.ctx, r.p.AttemptTimeout, classify.ErrAttemptTimeout)
	}
	c.out, c.err = fn(ctx)
	c.timedOut = errors.Is(context.Cause(ctx), classify.ErrAttemptTimeout)
	cancel()
	c.end = r.now()
	if pr, ok := r.req.Prices[ref]; ok {
		c.cost = (float64(c.out.InputTokens)*pr.InPerMTok + float64(c.out.OutputTokens)*pr.OutPerMTok) / 1e6
		r.cost += c.cost
	}
	return c
}

// record is the attempt record of call c (V1), f nil on success.
func (v *visit) record(c called, f *Failure) AttemptRecord {
	return AttemptRecord{Candidate: v.cand, Kind: v.kind, Failure: f, Started: c.started, Duration: c.end.Sub(c.started),
		CostUSD: c.cost, InputTokens: c.out.InputTokens, OutputTokens: c.out.OutputTokens, UsageEstimated: c.out.UsageEstimated}
}

// after reads what a call came to. An answer ends the run; a failure is
// recorded (V1, D1-D5, R7, R8, A1), then compacted away (R15) or decided on
// (R4).
func (r *runner) after(v *visit, c called) flow {
	if ls := (*LiveSwitchError)(nil); errors.As(c.err, &ls) {
		r.record(v.record(c, v.cand.failed(classify.ReasonAborted, "live model switch to "+string(ls.To))))
		return r.liveSwitch(v, ls)
	}
	if c.err != nil && r.ctx.Err() != nil {
		// the caller cancelled (abort) or the run timed out (R10): no decision
		f := v.cand.failed(classify.ReasonAborted, "run cancelled")
		if r.parent.Err() == nil {
			f = v.cand.failed(classify.ReasonTimeout, "run timeout")
		}
		r.record(v.record(c, f))
		return r.checkCtx()
	}
	f := failureOf(&c, v.cand)
	if c.out.Progress {
		r.breaker = 0 // R8: completed progress resets
	}
	r.record(v.record(c, f))
	if f == nil {
		v.owes = false
		r.onSuccess(v.pl, v.cand, c.end)
		r.settled(v.kind, v.cand, nil, c.end) // A1: after the state, so the turns waiting on this probe find it cleared
		// V2: the step that led here was logged when it was taken; one line
		// per step, so a success writes none of its own.
		return r.finish(Result{Output: c.out, Candidate: v.cand, Attempts: r.records, FellBack: v.i > 0, Cause: r.cause, CostUSD: r.cost}, nil)
	}
	if f.Idle && !c.out.Progress {
		r.breaker++ // R8: survives profile and model changes
	}
	r.lastCand, r.lastFail = v.cand, f
	v.rs.ModelUnavailable = r.onFailure(v.pl, v.cand, f, c.end)
	r.settled(v.kind, v.cand, f, c.end)
	if r.compact(v, f) {
		v.kind = AttemptRetry // R15: the same candidate with the smaller prompt
		return proceed
	}
	return r.decide(v, f, c.end)
}

// liveSwitch follows the user's switch to another model while the run went on
// (O6): a later candidate is jumped to at once; any other model ends the run
// with ls, so the caller starts the turn again on the user's choice. Nothing
// failed, so nothing cools down.
func (r *runner) liveSwitch(v *visit, ls *LiveSwitchError) flow {
	for j := v.i + 1; j < len(r.req.Chain); j++ {
		if r.req.Chain[j] == ls.To {
			r.jump = j
			return leave
		}
	}
	return r.end(ls)
}

// decide takes the next step after failure f of v's candidate, as Decide
// says (R4).
func (r *runner) decide(v *visit, f *Failure, now time.Time) flow {
	rs := &v.rs
	rs.Now, rs.Breaker = now, r.breaker
	if v.kind == AttemptProbe {
		rs.IdleRetries = r.p.IdleRetries // R5 at most once: a probe's stall is its verdict (A1)
	}
	rs.MoreProfiles = v.kind != AttemptProbe && r.nextSlot(v.pl) >= 0
	// R6: whether a later candidate is usable is only worth a read when a wait is on the table.
	rs.UsableLater = f.Reason == classify.ReasonRateLimit && rs.MoreCandidates && statedWait(f, now) > 0 && r.usableAfter(v.i)
	d := Decide(*rs, *f)
	switch d.Action {
	case RetrySame:
		return r.retry(v, f, d.Delay)
	case RotateProfile:
		return r.rotate(v, f, d.Delay)
	}
	// The run leaves this candidate.
	if v.i == 0 && r.cause == nil {
		r.cause = f
	}
	switch {
	case d.Action == FallbackModel:
		return r.fallback(v, f, d.OtherProvider)
	case d.Action == Stop:
		return r.finish(r.summary(ErrBreakerTripped))
	case terminalReason(f.Reason):
		r.logStep(v.cand, f, "", "surfaced")
		return r.end(f)
	}
	return leave // chain exhausted: the summary follows
}

// retry calls the same profile again (R5, R6, R13), after the provider's
// stated wait when Decide chose to sleep through it.
func (r *runner) retry(v *visit, f *Failure, wait time.Duration) flow {
	switch {
	case f.Reason == classify.ReasonEmptyResponse:
		v.rs.EmptyRetries++
		v.kind = AttemptNudged
	case f.Idle:
		v.rs.IdleRetries++
		v.kind = AttemptRetry
	default:
		v.rs.ShortWaitRetries++
		v.kind = AttemptRetry
	}
	if wait > 0 {
		r.waiting(v.cand, wait, f)
	}
	return r.sleep(wait)
}

// rotate moves v to the next profile of the provider (R1, R3), each failure
// type counting against its own cap (R4).
func (r *runner) rotate(v *visit, f *Failure, pause time.Duration) flow {
	switch f.Reason {
	case classify.ReasonRateLimit:
		v.rs.RateLimitRotations++
	case classify.ReasonOverloaded:
		v.rs.OverloadRotations++
	case classify.ReasonTimeout:
		v.rs.TimeoutRotations++
	case classify.ReasonRefusedResponse:
		v.rs.RefusedRotations++
	}
	v.rs.IdleRetries, v.rs.ShortWaitRetries, v.rs.EmptyRetries = 0, 0, 0
	v.slot = r.nextSlot(v.pl)
	v.cand.Profile = v.pl.slots[v.slot].prof.ID
	v.kind = AttemptNormal
	return r.sleep(pause)
}

// fallback leaves v's candidate for the next one (R2), or for the next one of
// another provider (C13, once a run), and logs the step (V2).
func (r *runner) fallback(v *visit, f *Failure, otherProvider bool) flow {
	n := v.i + 1
	if otherProvider {
		n = nextOtherProvider(r.req.Chain, v.i)
		r.jump, r.netUsed = n, true
	}
	next := ""
	if n < len(r.req.Chain) {
		next = string(r.req.Chain[n])
	}
	r.logStep(v.cand, f, next, "next_candidate")
	return leave
}

// waiting says that the run sleeps through a provider's stated wait because
// nothing else is usable (R6): a log line, and the caller's progress hook (L1).
func (r *runner) waiting(c Candidate, d time.Duration, f *Failure) {
	r.log.LogAttrs(r.ctx, slog.LevelInfo, "waiting for the provider before retrying",
		slog.String("sessionKey", r.req.SessionKey), slog.String("model", c.Ref()),
		slog.String("profile", c.Profile), slog.String("reason", classify.Outcome(f.Reason, f.Status)),
		slog.Duration("wait", d))
	if h := r.req.Trace.OnWait; h != nil {
		h(c, d, *f)
	}
}

// sleep waits d on the engine's clock; the run ends if it is cut short.
func (r *runner) sleep(d time.Duration) flow {
	if d > 0 && r.e.clock().Sleep(r.ctx, d) != nil {
		return r.checkCtx()
	}
	return proceed
}

// checkCtx ends the run when the caller cancelled or the run timed out (R10).
func (r *runner) checkCtx() flow {
	if r.ctx.Err() == nil {
		return proceed
	}
	if r.parent.Err() != nil {
		return r.end(fmt.Errorf("failover: run aborted: %w", context.Cause(r.parent)))
	}
	return r.finish(r.summary(ErrRunTimeout))
}

// failed is a failure of c that the engine itself names: reason, its class,
// and message.
func (c Candidate) failed(reason classify.Reason, message string) *Failure {
	return &Failure{Reason: reason, Class: classify.ReasonClass(reason), Message: message, Provider: c.Provider, Model: c.Model, Profile: c.Profile}
}

// failureOf is what call c came to: nil for a usable answer, else its
// Failure. The caller's client names what a provider sent (package llm,
// through classify); the engine adds only what it alone sees: its own
// attempt timeout (R10), a cancellation nobody asked for (A4) and an answer
// with nothing in it (R13).
func failureOf(c *called, cand Candidate) *Failure {
	var fp *Failure
	switch {
	case c.err == nil && c.out.Text == "" && !c.out.Progress && c.out.FinishReason != "tool_calls" && c.out.FinishReason != "function_call":
		return cand.failed(classify.ReasonEmptyResponse, "empty output") // R13
	case c.err == nil:
		return nil
	case errors.As(c.err, &fp) && fp != nil:
		f := *fp
		if f.Reason == "" {
			f.Reason, f.Class = classify.ReasonUnclassified, classify.ClassUnknown
		}
		f.Provider, f.Model, f.Profile = cmp.Or(f.Provider, cand.Provider), cmp.Or(f.Model, cand.Model), cmp.Or(f.Profile, cand.Profile)
		return &f
	case c.timedOut || errors.Is(c.err, classify.ErrAttemptTimeout):
		return cand.failed(classify.ReasonTimeout, "attempt timeout")
	case errors.Is(c.err, context.Canceled):
		// The run's context is alive (checked before), so nobody asked for
		// this cancellation: it is ours, not the provider's (A4).
		return cand.failed(classify.ReasonLocal, clip(c.err.Error()))
	}
	// Not a Failure: the caller's client did not name it. It holds no
	// provider body, and counts as an unknown error (R2).
	return cand.failed(classify.ReasonUnclassified, clip(c.err.Error()))
}

func (r *runner) record(a AttemptRecord) {
	r.records = append(r.records, a)
	if h := r.req.Trace.OnAttempt; h != nil {
		h(a)
	}
}

// logStep writes the V2 event model_fallback_decision with flat fields.
func (r *runner) logStep(from Candidate, f *Failure, to, outcome string) {
	level := slog.LevelInfo
	if outcome == "exhausted" || outcome == "stopped" || outcome == "surfaced" {
		level = slog.LevelWarn
	}
	if !r.log.Enabled(r.ctx, level) {
		return // the detail's scrub is the costly part; nothing would be written
	}
	// The reason as the metrics count it (classify.Outcome: a 500 is a
	// server_error, not a timeout), so a log line and a counter agree.
	reason, detail := "", ""
	if f != nil {
		reason = classify.Outcome(f.Reason, f.Status)
		detail = clip(f.Error())
	}
	r.log.LogAttrs(r.ctx, level, "model_fallback_decision",
		slog.String("event", "model_fallback_decision"),
		slog.String("sessionKey", r.req.SessionKey),
		slog.String("fallbackStepFromModel", from.Ref()),
		slog.String("fallbackStepFromProfile", from.Profile),
		slog.String("fallbackStepToModel", to),
		slog.String("fallbackStepFromFailureReason", reason),
		slog.String("fallbackStepFromFailureDetail", detail),
		slog.String("fallbackStepFinalOutcome", outcome),
		slog.Int("paidCalls", r.paid),
	)
}

// maxTimeoutCompactions bounds R15's compact-and-retry after timeouts per run.
const maxTimeoutCompactions = 2

// compact asks the caller to shrink the prompt after f and reports whether the
// same candidate is tried again with it (R15): after a context_overflow that
// no later candidate's larger window takes (B7 goes first; once a run), or a
// timeout on a prompt above TimeoutCompactRatio of the candidate's window
// (maxTimeoutCompactions a run, and never once R8's breaker tripped).
func (r *runner) compact(v *visit, f *Failure) bool {
	switch f.Reason {
	case classify.ReasonContextOverflow:
		if r.overflow || v.rs.LargerContextLater && v.rs.MoreCandidates {
			return false
		}
	case classify.ReasonTimeout:
		window, ratio := r.req.ContextWindow[v.pl.ref], r.p.TimeoutCompactRatio
		if r.compacted >= maxTimeoutCompactions || window <= 0 || ratio <= 0 || float64(r.req.PromptTokens) <= ratio*float64(window) ||
			f.Idle && r.p.BreakerTrip > 0 && r.breaker >= r.p.BreakerTrip {
			return false
		}
	default:
		return false
	}
	c, ok := r.ctl.Compact(r.ctx, *f)
	r.spent.Calls += c.Spent.Calls // B1: a summary's calls are the turn's (R16)
	r.spent.USD += c.Spent.USD
	switch {
	case !ok:
		return false
	case f.Reason == classify.ReasonContextOverflow:
		r.overflow = true // the provider, not the estimate, says whether it fits now
	case c.PromptTokens >= r.req.PromptTokens:
		return false // nothing gained against the ratio
	default:
		r.compacted++
	}
	r.req.PromptTokens = c.PromptTokens
	return true
}
