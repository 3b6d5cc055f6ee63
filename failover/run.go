package failover

import (
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
	ErrUserBudget     = errors.New("failover: daily budget reached")                 // T6: what Hooks.BeforeCall errors wrap
)

// Run walks req.Chain, calling attempt for each paid call the policy allows, and
// returns the first success or a *SummaryError (or a terminal *Failure such as
// format or context_overflow, which is not a chain failure). When the caller's
// ctx is cancelled, Run returns an error wrapping context.Cause(ctx).
//
// Attempt-level errors never escape while a later candidate can still answer (B5).
// Every attempt and skip is recorded (V1) and passed to Hooks.OnAttempt.
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
	r := &runner{e: e, p: p, req: &req, attempt: attempt, ctx: runCtx, parent: ctx, log: e.Log}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.maxIter = iterationCap(&req)
	defer r.releaseClaims() // A1: a probe claim never outlives its run
	return r.run()
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
	ctx       context.Context // run context (R10)
	parent    context.Context // the caller's context
	log       *slog.Logger

	records []AttemptRecord
	paid    int
	cost    float64
	breaker int // R8: whole run
	iter    int
	maxIter int
	probed  map[string]bool   // R11: one transient-cooldown probe per provider per run
	claims  map[string]*claim // A1: the providers' probe rows this run claimed
	netUsed bool              // C13: the format safety net moved this run once

	origin    Candidate // Chain[0] as tried (or skipped)
	cause     *Failure  // what moved the run off Chain[0]
	lastCand  Candidate
	lastFail  *Failure
	hookStart bool // BeforeFallback ran for the current candidate
}

func (r *runner) now() time.Time { return r.e.now() }

func (r *runner) run() (Result, error) {
	chain := r.req.Chain
	var cooling []plan // candidates skipped for a transient cooldown
	for i := 0; i < len(chain); i++ {
		pl := r.evaluate(i)
		if pl.skip != "" {
			if transientCooldown(pl.skip) && pl.skip != classify.ReasonContextWindow && !pl.until.IsZero() {
				pl.index = i
				cooling = append(cooling, pl)
			}
			c := Candidate{Provider: pl.prov, Model: pl.model}
			if len(pl.slots) > 0 {
				c.Profile = pl.slots[0].prof.ID
			}
			r.record(AttemptRecord{Candidate: c, Skipped: pl.skip, Started: r.now()})
			skipped := &Failure{Reason: pl.skip, Class: classify.ClassTransient, Provider: pl.prov, Model: pl.model,
				Profile: c.Profile, Message: "skipped: unavailable", Status: classify.StatusUnknown}
			if i == 0 {
				r.origin, r.cause = c, skipped
			}
			if i+1 < len(chain) {
				r.logStep(c, skipped, string(chain[i+1]), "next_candidate") // V2: a skip is a step too
			}
			r.iter++
			continue
		}
		res, err, done := r.walk(i, &pl)
		if done {
			return res, err
		}
		if r.jump > i { // O6: straight to the candidate a live switch named
			i, r.jump = r.jump-1, 0
		}
	}
	if res, err, done := r.sharedProbe(cooling); done { // A1: no refusal while a candidate may answer
		return res, err
	}
	return r.summary(nil)
}

// walk makes the attempts on candidate i. done reports that the run is over.
func (r *runner) walk(i int, pl *plan) (Result, error, bool) {
	cur := 0
	cand := Candidate{Provider: pl.prov, Model: pl.model, Profile: pl.slots[cur].prof.ID}
	kind := pl.kind
	rs := RunState{Policy: r.p, UserStrict: pl.strict, MoreCandidates: i < len(r.req.Chain)-1,
		LargerContextLater: r.largerLater(i), OtherProviderLater: nextOtherProvider(r.req.Chain, i) >= 0, SafetyNetUsed: r.netUsed}
	r.hookStart = false
	if i == 0 {
		r.origin = cand
	}
	// O3: whatever ends this candidate without an answer after BeforeFallback ran
	// (a failure, a stop, a budget, a cancellation) rolls back exactly once.
	pending := false
	defer func() {
		if !pending {
			return
		}
		if h := r.req.Hooks.AfterFailedFallback; h != nil {
			f := Failure{Reason: classify.ReasonAborted, Provider: cand.Provider, Model: cand.Model, Profile: cand.Profile}
			if r.lastFail != nil && r.lastCand.Ref() == cand.Ref() {
				f = *r.lastFail
			}
			h(context.WithoutCancel(r.ctx), cand, f)
		}
	}()
	for {
		if res, err, done := r.checkCtx(); done {
			return res, err, true
		}
		r.iter++
		if r.iter > r.maxIter {
			res, err := r.summary(ErrIterationCap) // R9
			return res, err, true
		}
		// B1 then B2, before every paid call.
		if r.p.MaxPaidAttemptsPerTurn > 0 && r.paid+r.req.Spent.Calls >= r.p.MaxPaidAttemptsPerTurn {
			res, err := r.summary(ErrTurnBudget)
			return res, err, true
		}
		if r.p.MaxTurnCostUSD > 0 && r.cost+r.req.Spent.USD >= r.p.MaxTurnCostUSD {
			res, err := r.summary(ErrTurnBudget)
			return res, err, true
		}
		if !r.e.Guard.Allow() {
			res, err := r.summary(ErrPaidCallGuard)
			return res, err, true
		}
		if h := r.req.Hooks.BeforeCall; h != nil {
			if err := h(r.ctx, cand); err != nil { // T6: the user's daily budget
				res, err := r.summary(err)
				return res, err, true
			}
		}
		if i > 0 && !r.hookStart {
			r.hookStart = true
			if h := r.req.Hooks.BeforeFallback; h != nil {
				cause := Failure{}
				if r.cause != nil {
					cause = *r.cause
				}
				if err := h(r.ctx, r.origin, cand, cause); err != nil { // O2
					return Result{Attempts: r.records, CostUSD: r.cost}, fmt.Errorf("failover: before fallback to %s: %w", cand.Ref(), err), true
				}
				pending = true
			}
		}
		pl.slots[cur].tried = true
		r.paid++
		started := r.now()
		actx, cancel := r.ctx, context.CancelFunc(func() {})
		if r.p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeoutCause(r.ctx, r.p.AttemptTimeout, classify.ErrAttemptTimeout) // R10
		}
		out, err := r.attempt(actx, Attempt{Candidate: cand, Kind: kind, Number: r.paid})
		attemptTimedOut := errors.Is(context.Cause(actx), classify.ErrAttemptTimeout)
		cancel()
		end := r.now()
		cost := 0.0
		if pr, ok := r.req.Prices[pl.ref]; ok {
			cost = (float64(out.InputTokens)*pr.InPerMTok + float64(out.OutputTokens)*pr.OutPerMTok) / 1e6
			r.cost += cost
		}
		if ls := (*LiveSwitchError)(nil); errors.As(err, &ls) {
			// O6: the user switched models while the attempt ran. A later candidate
			// is jumped to at once; any other model ends the run so the caller
			// restarts the turn on the user's choice. No cooldown: nothing failed.
			r.record(AttemptRecord{Candidate: cand, Kind: kind, Started: started, Duration: end.Sub(started),
				Failure: &Failure{Reason: classify.ReasonAborted, Class: classify.ClassDeterministic, Provider: cand.Provider, Model: cand.Model,
					Profile: cand.Profile, Message: "live model switch to " + string(ls.To)}})
			for j := i + 1; j < len(r.req.Chain); j++ {
				if r.req.Chain[j] == ls.To {
					r.jump = j
					return Result{}, nil, false
				}
			}
			return Result{Attempts: r.records, CostUSD: r.cost}, ls, true
		}
		if err != nil && r.ctx.Err() != nil {
			// the caller cancelled (abort) or the run timed out (R10): no decision
			fr := &Failure{Reason: classify.ReasonAborted, Provider: cand.Provider, Model: cand.Model, Profile: cand.Profile, Message: "run cancelled"}
			if r.parent.Err() == nil {
				fr.Reason, fr.Class, fr.Message = classify.ReasonTimeout, classify.ClassTransient, "run timeout"
			}
			r.record(AttemptRecord{Candidate: cand, Kind: kind, Started: started, Duration: end.Sub(started), Failure: fr})
			res, err, _ := r.checkCtx()
			return res, err, true
		}
		f := r.failureOf(&out, err, attemptTimedOut, cand, end)
		if out.Progress {
			r.breaker = 0 // R8: completed progress resets
		}
		rec := AttemptRecord{Candidate: cand, Kind: kind, Failure: f, Started: started, Duration: end.Sub(started), CostUSD: cost,
			InputTokens: out.InputTokens, OutputTokens: out.OutputTokens, UsageEstimated: out.UsageEstimated}
		r.record(rec)
		if f == nil {
			pending = false
			r.onSuccess(pl, cand, end)
			r.settled(kind, cand, nil, end) // A1: after the state, so the turns waiting on this probe find it cleared
			// V2: the step that led here was logged when it was taken; one line
			// per step, so a success writes none of its own.
			return Result{Output: out, Candidate: cand, Attempts: r.records, FellBack: i > 0, Cause: r.cause, CostUSD: r.cost}, nil, true
		}
		if f.Idle && !out.Progress {
			r.breaker++ // R8: survives profile and model changes
		}
		r.lastCand, r.lastFail = cand, f
		rs.ModelUnavailable = r.onFailure(pl, cand, f, end)
		r.settled(kind, cand, f, end)
		if r.compactAfterTimeout(pl, f) {
			kind = AttemptRetry // R15: the same candidate with the smaller prompt
			continue
		}

		rs.Now = end
		rs.Breaker = r.breaker
		if kind == AttemptProbe {
			rs.IdleRetries = r.p.IdleRetries // R5 at most once: a probe's stall is its verdict (A1)
		}
		rs.MoreProfiles = kind != AttemptProbe && r.nextSlot(pl) >= 0
		rs.UsableLater = false
		if f.Reason == classify.ReasonRateLimit && rs.MoreCandidates && statedWait(f, end) > 0 {
			rs.UsableLater = r.usableAfter(i) // R6: only worth a read when a wait is on the table
		}
		d := Decide(rs, *f)
		switch d.Action {
		case RetrySame:
			switch {
			case f.Reason == classify.ReasonEmptyResponse:
				rs.EmptyRetries++
				kind = AttemptNudged
			case f.Idle:
				rs.IdleRetries++
				kind = AttemptRetry
			default:
				rs.ShortWaitRetries++
				kind = AttemptRetry
			}
			if d.Delay > 0 {
				r.waiting(cand, d.Delay, f)
			}
			if res, err, done := r.sleep(d.Delay); done {
				return res, err, true
			}
			continue
		case RotateProfile:
			switch f.Reason {
			case classify.ReasonRateLimit:
				rs.RateLimitRotations++
			case classify.ReasonOverloaded:
				rs.OverloadRotations++
			case classify.ReasonTimeout:
				rs.TimeoutRotations++
			case classify.ReasonRefusedResponse:
				rs.RefusedRotations++
			}
			rs.IdleRetries, rs.ShortWaitRetries, rs.EmptyRetries = 0, 0, 0
			cur = r.nextSlot(pl)
			cand.Profile = pl.slots[cur].prof.ID
			kind = AttemptNormal
			if res, err, done := r.sleep(d.Delay); done {
				return res, err, true
			}
			continue
		}
		// The run leaves this candidate.
		if i == 0 && r.cause == nil {
			r.cause = f
		}
		switch d.Action {
		case FallbackModel:
			n := i + 1
			if d.OtherProvider { // C13: past this provider's siblings, once per run
				n = nextOtherProvider(r.req.Chain, i)
				r.jump, r.netUsed = n, true
			}
			next := ""
			if n < len(r.req.Chain) {
				next = string(r.req.Chain[n])
			}
			r.logStep(cand, f, next, "next_candidate")
			return Result{}, nil, false
		case Stop:
			res, err := r.summary(ErrBreakerTripped)
			return res, err, true
		}
		// SurfaceError
		if terminalReason(f.Reason) {
			r.logStep(cand, f, "", "surfaced")
			return Result{Attempts: r.records, CostUSD: r.cost}, f, true
		}
		return Result{}, nil, false // chain exhausted: the summary follows
	}
}

// waiting says that the run sleeps through a provider's stated wait because
// nothing else is usable (R6): a log line, and the caller's progress hook (L1).
func (r *runner) waiting(c Candidate, d time.Duration, f *Failure) {
	r.log.LogAttrs(r.ctx, slog.LevelInfo, "waiting for the provider before retrying",
		slog.String("sessionKey", r.req.SessionKey), slog.String("model", c.Ref()),
		slog.String("profile", c.Profile), slog.String("reason", string(f.Reason)),
		slog.Duration("wait", d))
	if h := r.req.Hooks.OnWait; h != nil {
		h(c, d, *f)
	}
}

func (r *runner) sleep(d time.Duration) (Result, error, bool) {
	if d <= 0 {
		return Result{}, nil, false
	}
	var clock Clock = WallClock{}
	if r.e.Clock != nil {
		clock = r.e.Clock
	}
	if err := clock.Sleep(r.ctx, d); err != nil {
		return r.checkCtx()
	}
	return Result{}, nil, false
}

// checkCtx ends the run when the caller cancelled or the run timed out (R10).
func (r *runner) checkCtx() (Result, error, bool) {
	if r.ctx.Err() == nil {
		return Result{}, nil, false
	}
	if r.parent.Err() != nil {
		return Result{Attempts: r.records, CostUSD: r.cost}, fmt.Errorf("failover: run aborted: %w", context.Cause(r.parent)), true
	}
	res, err := r.summary(ErrRunTimeout)
	return res, err, true
}

// failureOf turns an attempt's outcome into a Failure, or nil for a usable answer
// (R13, R14, C6).
func (r *runner) failureOf(out *Output, err error, attemptTimedOut bool, c Candidate, now time.Time) *Failure {
	var f Failure
	if err == nil {
		fr, ff := NormalizeFinish(out.FinishReason)
		out.FinishReason = fr
		switch {
		case ff != nil:
			f = *ff
		case out.Text == "" && fr != "tool_calls" && fr != "function_call" && !out.Progress:
			f = Failure{Reason: classify.ReasonEmptyResponse, Class: classify.ClassUnknown, Message: "empty output"} // R13
		default:
			return nil
		}
	} else {
		var fp *Failure
		switch {
		case errors.As(err, &fp) && fp != nil:
			f = *fp
		case attemptTimedOut || errors.Is(err, classify.ErrAttemptTimeout):
			f = Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Message: "attempt timeout"}
		case errors.Is(err, classify.ErrIdleTimeout):
			f = Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true, Message: string(classify.ReasonIdleTimeout)}
		case errors.Is(err, classify.ErrEmptyOutput):
			f = Failure{Reason: classify.ReasonEmptyResponse, Class: classify.ClassUnknown, Message: "empty output"}
		case errors.Is(err, context.Canceled):
			// The run's context is alive (checked before), so nobody asked for
			// this cancellation: it is ours, not the provider's (A4).
			f = Failure{Reason: classify.ReasonLocal, Class: classify.ClassTransient, Message: clip(err.Error())}
		default:
			// An error that is not a Failure comes from the attempt function
			// itself, not from a provider's body: its text holds no provider secret.
			f = FailureFrom(classify.Classify(classify.Response{Provider: c.Provider, Err: err}, now))
		}
		if errors.Is(err, classify.ErrIdleTimeout) {
			f.Idle = true
		}
	}
	if f.Reason == "" {
		f.Reason, f.Class = classify.ReasonUnclassified, classify.ClassUnknown
	}
	if f.Provider == "" {
		f.Provider = c.Provider
	}
	if f.Model == "" {
		f.Model = c.Model
	}
	if f.Profile == "" {
		f.Profile = c.Profile
	}
	return &f
}

// NormalizeFinish maps a provider's stop reason to the known set (R14): "stop",
// "length", "tool_calls", "function_call". Filtered, error and unknown stops come
// back with the failure they are, so no decision is made on them. It is the one
// list of stop reasons: the LLM client uses it too. An empty reason is "stop"
// here; a streaming client that saw no reason at all has a truncated stream and
// must say so before calling this.
func NormalizeFinish(fr string) (string, *Failure) {
	switch fr {
	case "", "stop", "end_turn", "stop_sequence", "eos":
		return "stop", nil
	case "length", "max_tokens":
		return "length", nil
	case "tool_calls", "tool_use":
		return "tool_calls", nil
	case "function_call":
		return "function_call", nil
	case "content_filter", "refusal", "safety":
		return fr, &Failure{Reason: classify.ReasonContentFilter, Class: classify.ClassDeterministic, Message: "stop reason: " + fr}
	case "error", "aborted":
		return fr, &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Message: "stop reason: " + fr} // C6
	}
	return fr, &Failure{Reason: classify.ReasonUnclassified, Class: classify.ClassUnknown, Message: "unknown stop reason: " + clip(fr)}
}

func (r *runner) record(a AttemptRecord) {
	r.records = append(r.records, a)
	if h := r.req.Hooks.OnAttempt; h != nil {
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
	var reason classify.Reason
	detail := ""
	if f != nil {
		reason = f.Reason
		detail = clip(f.Error())
	}
	r.log.LogAttrs(r.ctx, level, "model_fallback_decision",
		slog.String("event", "model_fallback_decision"),
		slog.String("sessionKey", r.req.SessionKey),
		slog.String("fallbackStepFromModel", from.Ref()),
		slog.String("fallbackStepFromProfile", from.Profile),
		slog.String("fallbackStepToModel", to),
		slog.String("fallbackStepFromFailureReason", string(reason)),
		slog.String("fallbackStepFromFailureDetail", detail),
		slog.String("fallbackStepFinalOutcome", outcome),
		slog.Int("paidCalls", r.paid),
	)
}

// maxTimeoutCompactions bounds R15's compact-and-retry after timeouts per run.
const maxTimeoutCompactions = 2

// compactAfterTimeout applies R15: a timeout whose prompt used more than
// TimeoutCompactRatio of the candidate's context window asks the caller to
// compact, and reports whether the same candidate should be tried again.
func (r *runner) compactAfterTimeout(pl *plan, f *Failure) bool {
	h := r.req.Hooks.Compact
	if h == nil || f.Reason != classify.ReasonTimeout || r.compacted >= maxTimeoutCompactions {
		return false
	}
	if f.Idle && r.p.BreakerTrip > 0 && r.breaker >= r.p.BreakerTrip {
		return false // R8 wins: no further paid call
	}
	window := r.req.ContextWindow[pl.ref]
	ratio := r.p.TimeoutCompactRatio
	if window <= 0 || ratio <= 0 || float64(r.req.PromptTokens) <= ratio*float64(window) {
		return false
	}
	tokens, ok := h(r.ctx)
	if !ok || tokens >= r.req.PromptTokens {
		return false
	}
	r.compacted++
	r.req.PromptTokens = tokens
	return true
}
