package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/detourbot/detour/classify"
)

// Reasons a run stops before the chain is exhausted.
var (
	ErrBreakerTripped = errors.New("idle-timeout breaker tripped")         // R8
	ErrTurnBudget     = errors.New("turn budget reached")                  // B1
	ErrPaidCallGuard  = errors.New("process-wide paid-call limit reached") // B2
	ErrIterationCap   = errors.New("iteration cap reached")                // R9
	ErrRunTimeout     = errors.New("run timeout")                          // R10
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

func (e *Engine) store() StateStore {
	if e.Store != nil {
		return e.Store
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mem == nil {
		e.mem = NewMemStore()
	}
	return e.mem
}

// getStates reads keys, in one GetMany when the store has it (BatchGetter), else
// one Get per key. A key that could not be read gets the zero state with Key set
// and its error in errs (errs is nil when every read succeeded; a failed GetMany
// fails every key with the same error).
func (e *Engine) getStates(ctx context.Context, keys []string) (out []ProfileState, errs []error) {
	st := e.store()
	if bg, ok := st.(BatchGetter); ok {
		got, err := bg.GetMany(ctx, keys)
		if err == nil && len(got) == len(keys) {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("failover: GetMany returned %d states for %d keys", len(got), len(keys))
		}
		out, errs = make([]ProfileState, len(keys)), make([]error, len(keys))
		for i, k := range keys {
			out[i], errs[i] = ProfileState{Key: k}, err
		}
		return out, errs
	}
	out = make([]ProfileState, len(keys))
	for i, k := range keys {
		ps, err := st.Get(ctx, k)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(keys))
			}
			ps, errs[i] = ProfileState{Key: k}, err
		}
		out[i] = ps
	}
	return out, errs
}

// updateStates applies fn(i, st) to keys[i]: in one UpdateMany (one transaction)
// when the store has it (BatchUpdater) and there are several keys, else one
// Update per key (every key is tried; the errors are joined). out[i] is the
// stored state of keys[i], the zero state with Key set when its update failed.
func (e *Engine) updateStates(ctx context.Context, keys []string, fn func(i int, st *ProfileState)) (out []ProfileState, err error) {
	st := e.store()
	if bu, ok := st.(BatchUpdater); ok && len(keys) > 1 {
		got, err := bu.UpdateMany(ctx, keys, fn)
		if err == nil && len(got) == len(keys) {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("failover: UpdateMany returned %d states for %d keys", len(got), len(keys))
		}
		out = make([]ProfileState, len(keys))
		for i, k := range keys {
			out[i] = ProfileState{Key: k}
		}
		return out, err
	}
	out = make([]ProfileState, len(keys))
	var errs []error
	for i, k := range keys {
		ps, uerr := st.Update(ctx, k, func(s *ProfileState) { fn(i, s) })
		if uerr != nil {
			ps = ProfileState{Key: k}
			errs = append(errs, uerr)
		}
		out[i] = ps
	}
	return out, errors.Join(errs...)
}

// probeKey is the state key of a provider's probe throttle (R11).
func probeKey(key string) string { return "probe:" + key }

// claimProbe claims the right to probe key (a provider, or provider+"#billing")
// now: at most one probe per interval, counted from the later of the last probe
// and since (the billing failure, R11). Only probes count, never the failures
// that started a cooldown. The claim is stored, so new sessions, restarts and
// replicas share it; when the store fails, this process's own memory decides.
func (e *Engine) claimProbe(ctx context.Context, key string, interval time.Duration, since, now time.Time) bool {
	won := false
	_, err := e.store().Update(ctx, probeKey(key), func(s *ProfileState) {
		won = false // Update may run fn more than once
		last := s.LastProbe
		if since.After(last) {
			last = since
		}
		if !last.IsZero() && now.Sub(last) < interval {
			return
		}
		s.LastProbe = now
		won = true
	})
	if err != nil {
		return e.throttle(key, interval, since, now)
	}
	return won
}

// throttle is claimProbe's process-local fallback for a store that fails.
func (e *Engine) throttle(key string, interval time.Duration, since, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.probeAt == nil {
		e.probeAt = make(map[string]time.Time)
	}
	last := e.probeAt[key]
	if since.After(last) {
		last = since
	}
	if !last.IsZero() && now.Sub(last) < interval {
		return false
	}
	e.probeAt[key] = now
	return true
}

func skipTTL(p *Policy) time.Duration {
	if p.FallbackSkipTTL <= 0 {
		return 0
	}
	return min(10*time.Minute, max(time.Second, p.FallbackSkipTTL))
}

func (e *Engine) skipCached(session string, ref ModelRef, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	until, ok := e.skips[session+"\x00"+string(ref)]
	return ok && now.Before(until)
}

func (e *Engine) addSkip(session string, ref ModelRef, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.skips == nil {
		e.skips = make(map[string]time.Time)
	}
	if len(e.skips) > 4096 {
		for k, t := range e.skips {
			if !t.After(until.Add(-11 * time.Minute)) {
				delete(e.skips, k)
			}
		}
	}
	e.skips[session+"\x00"+string(ref)] = until
}

type runner struct {
	jump      int // O6: index of the candidate a live switch named; 0 = none
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
	probed  map[string]bool // R11: one transient-cooldown probe per provider per run

	origin    Candidate // Chain[0] as tried (or skipped)
	cause     *Failure  // what moved the run off Chain[0]
	lastCand  Candidate
	lastFail  *Failure
	hookStart bool // BeforeFallback ran for the current candidate
}

// slot is one profile of a candidate with its state.
type slot struct {
	prof   Profile
	key    string
	st     ProfileState // as read, LastUsed raised to this process's last success (P1)
	stored ProfileState // as read from the store
	until  time.Time
	why    classify.Reason
	scoped bool // the blocking cooldown is model-scoped (D2)
	tried  bool
}

type plan struct {
	ref      ModelRef
	prov     string
	model    string
	primary  bool
	strict   bool
	slots    []slot // usable first (P1), then blocked, soonest expiry first
	usable   int    // number of usable slots at the head
	kind     AttemptKind
	skip     classify.Reason
	until    time.Time // when a skipped candidate is usable again
	index    int       // the candidate's place in the chain
	mstate   ProfileState
	mblocked bool
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
			if i == 0 {
				r.origin = c
				r.cause = &Failure{Reason: pl.skip, Class: classify.ClassTransient, Provider: pl.prov, Model: pl.model,
					Profile: c.Profile, Message: "skipped: unavailable", Status: classify.StatusUnknown}
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
	if res, err, done := r.probeSoonest(cooling); done {
		return res, err
	}
	return r.summary(nil)
}

// probeSoonest applies R11's last step: when the run could try no candidate
// and some are cooling down, the one whose cooldown ends soonest is probed
// before the turn is refused, at most once per provider per ProbeInterval, so a
// recovered provider is found within that interval of its recovery.
func (r *runner) probeSoonest(cooling []plan) (Result, error, bool) {
	if len(cooling) == 0 || r.paid > 0 {
		return Result{}, nil, false
	}
	sort.SliceStable(cooling, func(a, b int) bool { return cooling[a].until.Before(cooling[b].until) })
	now := r.now()
	for _, c := range cooling {
		if r.probed[c.prov] || !r.e.claimProbe(r.ctx, c.prov, r.p.ProbeInterval, time.Time{}, now) {
			continue
		}
		pl := c
		pl.skip, pl.kind = "", AttemptProbe
		if r.probed == nil {
			r.probed = make(map[string]bool)
		}
		r.probed[c.prov] = true
		res, err, done := r.walk(c.index, &pl)
		if done {
			return res, err, true
		}
		return Result{}, nil, false // one such probe per run
	}
	return Result{}, nil, false
}

// evaluate decides, before any call, whether candidate i is attempted, probed or
// skipped (R11, R12, B7, R7) and in which profile order (P1-P3).
func (r *runner) evaluate(i int) plan {
	pl := r.inspect(i)
	if pl.skip != "" || (pl.usable > 0 && !pl.mblocked) {
		return pl
	}
	return r.probeOrSkip(pl)
}

// usableNow reports whether candidate i could be tried at once, without a probe
// (R6: then nothing waits for a provider's Retry-After).
func (r *runner) usableNow(i int) bool {
	pl := r.inspect(i)
	return pl.skip == "" && pl.usable > 0 && !pl.mblocked
}

// inspect reads candidate i's state and orders its profiles (P1-P3); skip is set
// when the candidate cannot be tried at all (R12, B7, no usable profile id).
func (r *runner) inspect(i int) plan {
	ref := r.req.Chain[i]
	prov, model := ref.Split()
	now := r.now()
	pl := plan{ref: ref, prov: prov, model: model, kind: AttemptNormal,
		primary: i == 0 || (r.req.Primary != "" && ref == r.req.Primary)}
	if !pl.primary && r.e.skipCached(r.req.SessionKey, ref, now) {
		pl.skip = classify.ReasonAuth // R12
		return pl
	}
	if r.req.PromptTokens > 0 {
		if w := r.req.ContextWindow[ref]; w > 0 && r.req.PromptTokens > w {
			pl.skip = classify.ReasonContextWindow // B7
			return pl
		}
	}
	profs, strict, configured := profilesFor(r.req, prov, now)
	pl.strict = strict
	if configured && len(profs) == 0 {
		pl.skip = classify.ReasonAuth // every profile expired or the user-pinned one is unknown
		return pl
	}
	// The model's own key (R7) and every profile's key, read together.
	keys := make([]string, 1+len(profs))
	keys[0] = ModelKey(ref)
	for j, pr := range profs {
		keys[1+j] = stateKey(pr.ID, ref)
	}
	states, errs := r.e.getStates(r.ctx, keys)
	r.warnStoreErrs(errs)
	storedUsed := make([]time.Time, len(profs))
	for j := range profs {
		storedUsed[j] = states[1+j].LastUsed
	}
	r.e.freshenLastUsed(keys[1:], states[1:]) // P1 sees this process's own successes
	ms := states[0]
	pl.mstate = ms
	pl.mblocked = ms.CooldownUntil.After(now)
	pl.slots = make([]slot, len(profs))
	for j, pr := range profs {
		ps := states[1+j]
		until, why := blockedUntil(&ps, string(ref), now)
		stored := ps
		stored.LastUsed = storedUsed[j]
		pl.slots[j] = slot{prof: pr, key: keys[1+j], st: ps, stored: stored, until: until, why: why,
			scoped: !until.IsZero() && ps.CooldownModel != "" && !ps.DisabledUntil.After(now)}
	}
	pl.usable = orderSlots(pl.slots, len(r.req.Order[prov]) > 0, r.req.PinnedProfile)
	return pl
}

// probeOrSkip decides for a candidate with nothing usable whether it is skipped
// or probed (R11).
func (r *runner) probeOrSkip(pl plan) plan {
	now, prov, ms := r.now(), pl.prov, pl.mstate
	until, why := time.Time{}, classify.Reason("")
	if pl.usable == 0 {
		until, why = pl.slots[0].until, pl.slots[0].why
	}
	if pl.mblocked && (why == "" || transientCooldown(why)) {
		// R7: the model itself is marked; report that, wait for the later expiry
		if ms.CooldownUntil.After(until) {
			until = ms.CooldownUntil
		}
		why = ms.CooldownReason
		if why == "" {
			why = classify.ReasonConsecutiveTimeout
		}
	}
	pl.skip, pl.until = why, until
	switch why {
	case classify.ReasonAuth, classify.ReasonAuthPermanent:
		return pl // a persistent auth failure skips the provider
	case classify.ReasonBilling:
		if pl.primary && r.e.claimProbe(r.ctx, prov+"#billing", r.p.BillingProbeInterval, billingSince(pl.slots), now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
		return pl
	}
	if r.probed[prov] {
		return pl // at most one transient-cooldown probe per provider per run
	}
	switch {
	case pl.primary:
		if until.Sub(now) <= r.p.ProbeWindow && r.e.claimProbe(r.ctx, prov, r.p.ProbeInterval, time.Time{}, now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
	case !pl.mblocked && pl.usable == 0 && !pl.slots[0].scoped && siblingReason(why):
		// a profile-wide transient cooldown: a same-provider sibling is still
		// tried, within the provider's probe throttle like every probe
		if r.e.claimProbe(r.ctx, prov, r.p.ProbeInterval, time.Time{}, now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
	}
	if pl.kind == AttemptProbe {
		if r.probed == nil {
			r.probed = make(map[string]bool)
		}
		r.probed[prov] = true
	}
	return pl
}

// billingSince is when the latest billing failure among slots happened: the
// billing probe throttle counts from there (R11).
func billingSince(slots []slot) time.Time {
	var t time.Time
	for _, sl := range slots {
		if sl.why == classify.ReasonBilling && sl.st.LastFailure.After(t) {
			t = sl.st.LastFailure
		}
	}
	return t
}

func transientCooldown(r classify.Reason) bool {
	return r != classify.ReasonBilling && r != classify.ReasonAuth && r != classify.ReasonAuthPermanent
}

func siblingReason(r classify.Reason) bool {
	switch r {
	case classify.ReasonRateLimit, classify.ReasonOverloaded, classify.ReasonUnclassified, classify.ReasonNoErrorDetails:
		return true
	}
	return false
}

// profilesFor returns the profiles a candidate of prov may use (P1-P3), without
// expired ones. configured is false for providers without credentials, which get a
// single profile with an empty id.
func profilesFor(req *Request, prov string, now time.Time) (out []Profile, strict, configured bool) {
	all := req.Profiles[prov]
	order := req.Order[prov]
	if len(all) == 0 && len(order) == 0 {
		return []Profile{{Provider: prov}}, false, false
	}
	find := func(id string) (Profile, bool) {
		for _, p := range all {
			if p.ID == id {
				return p, true
			}
		}
		if containsString(order, id) {
			return Profile{ID: id, Provider: prov, Type: ProfileAPIKey}, true
		}
		return Profile{}, false
	}
	usable := func(p Profile) bool { return p.ExpiresAt.IsZero() || p.ExpiresAt.After(now) }
	if up := req.UserProfile; up != "" {
		if p, ok := find(up); ok {
			if usable(p) {
				return []Profile{p}, true, true // P3: strict
			}
			return nil, true, true
		}
		// the user pin belongs to another provider: ignore it here
	}
	if len(order) > 0 {
		for _, id := range order {
			if p, ok := find(id); ok && usable(p) {
				out = append(out, p)
			}
		}
		return out, false, true
	}
	for _, p := range all {
		if usable(p) {
			out = append(out, p)
		}
	}
	return out, false, true
}

func typeRank(t ProfileType) int {
	switch t {
	case ProfileToken:
		return 0
	case ProfileAPIKey:
		return 1
	}
	return 2
}

// orderSlots sorts slots in rotation order (P1): usable first (explicit order, or
// token before api_key then least recently used), the pinned profile first among
// them (P2, a preference); blocked ones last, soonest expiry first. It returns the
// number of usable slots.
func orderSlots(s []slot, explicit bool, pinned string) int {
	sort.SliceStable(s, func(a, b int) bool {
		ua, ub := s[a].until.IsZero(), s[b].until.IsZero()
		if ua != ub {
			return ua
		}
		if !ua {
			return s[a].until.Before(s[b].until)
		}
		if pinned != "" && (s[a].prof.ID == pinned) != (s[b].prof.ID == pinned) {
			return s[a].prof.ID == pinned
		}
		if explicit {
			return false
		}
		if ra, rb := typeRank(s[a].prof.Type), typeRank(s[b].prof.Type); ra != rb {
			return ra < rb
		}
		if !s[a].st.LastUsed.Equal(s[b].st.LastUsed) {
			return s[a].st.LastUsed.Before(s[b].st.LastUsed)
		}
		return s[a].prof.ID < s[b].prof.ID
	})
	n := 0
	for n < len(s) && s[n].until.IsZero() {
		n++
	}
	return n
}

// walk makes the attempts on candidate i. done reports that the run is over.
func (r *runner) walk(i int, pl *plan) (Result, error, bool) {
	cur := 0
	cand := Candidate{Provider: pl.prov, Model: pl.model, Profile: pl.slots[cur].prof.ID}
	kind := pl.kind
	rs := RunState{Policy: r.p, UserStrict: pl.strict, MoreCandidates: i < len(r.req.Chain)-1,
		LargerContextLater: r.largerLater(i)}
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
		if r.p.MaxPaidAttemptsPerTurn > 0 && r.paid >= r.p.MaxPaidAttemptsPerTurn {
			res, err := r.summary(ErrTurnBudget)
			return res, err, true
		}
		if r.p.MaxTurnCostUSD > 0 && r.cost >= r.p.MaxTurnCostUSD {
			res, err := r.summary(ErrTurnBudget)
			return res, err, true
		}
		if !r.e.Guard.Allow() {
			res, err := r.summary(ErrPaidCallGuard)
			return res, err, true
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
		if pr, ok := r.req.Prices[pl.ref]; ok {
			r.cost += (float64(out.InputTokens)*pr.InPerMTok + float64(out.OutputTokens)*pr.OutPerMTok) / 1e6
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
		rec := AttemptRecord{Candidate: cand, Kind: kind, Failure: f, Started: started, Duration: end.Sub(started)}
		r.record(rec)
		if f == nil {
			pending = false
			r.onSuccess(pl, cand, end)
			res := Result{Output: out, Candidate: cand, Attempts: r.records, FellBack: i > 0, Cause: r.cause, CostUSD: r.cost}
			if i > 0 {
				r.logStep(r.origin, r.cause, cand.Ref(), "succeeded")
			}
			return res, nil, true
		}
		if f.Idle && !out.Progress {
			r.breaker++ // R8: survives profile and model changes
		}
		r.lastCand, r.lastFail = cand, f
		rs.ModelUnavailable = r.onFailure(pl, cand, f, end)
		if r.compactAfterTimeout(pl, f) {
			kind = AttemptRetry // R15: the same candidate with the smaller prompt
			continue
		}

		rs.Now = end
		rs.Breaker = r.breaker
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
			next := ""
			if i+1 < len(r.req.Chain) {
				next = string(r.req.Chain[i+1])
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

// usableAfter reports whether a candidate after i can be tried at once (R6).
func (r *runner) usableAfter(i int) bool {
	for j := i + 1; j < len(r.req.Chain); j++ {
		if r.req.Chain[j] != r.req.Chain[i] && r.usableNow(j) {
			return true
		}
	}
	return false
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

// nextSlot returns the index of the next untried usable profile, or -1.
func (r *runner) nextSlot(pl *plan) int {
	if pl.strict {
		return -1
	}
	for j := 0; j < pl.usable; j++ {
		if !pl.slots[j].tried {
			return j
		}
	}
	return -1
}

func (r *runner) largerLater(i int) bool {
	w := r.req.ContextWindow[r.req.Chain[i]]
	if w <= 0 {
		return false
	}
	for _, ref := range r.req.Chain[i+1:] {
		if r.req.ContextWindow[ref] > w {
			return true
		}
	}
	return false
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

func (r *runner) warnStore(err error) {
	r.log.LogAttrs(r.ctx, slog.LevelWarn, "failover state store error", slog.String("error", err.Error()))
}

// warnStoreErrs logs the first read error of getStates (a failed GetMany fails
// every key with the same error; the states of failed keys are zero).
func (r *runner) warnStoreErrs(errs []error) {
	for _, err := range errs {
		if err != nil {
			r.warnStore(err)
			return
		}
	}
}

func slotKey(c Candidate) string {
	if c.Profile == "" {
		return noAuthKey(c.Ref())
	}
	return c.Profile
}

// stateKey is the state key of profile id used for model ref: the id, or the
// per-model key of a provider without credentials.
func stateKey(id string, ref ModelRef) string {
	if id == "" {
		return noAuthKey(string(ref))
	}
	return id
}

// onSuccess clears the failure state of the profile that answered and, when the
// model had any (R7), of the model, in one store call. A success on an already
// clean profile is a no-op for the store (applySuccessLazy, lastUsedPersist).
func (r *runner) onSuccess(pl *plan, c Candidate, now time.Time) {
	ref := c.Ref()
	var keys [2]string
	keys[0] = slotKey(c)
	n := 1
	r.e.noteUsed(keys[0], now)
	if ms := pl.mstate; ms.Consecutive > 0 || ms.ErrorCount > 0 || !ms.CooldownUntil.IsZero() || r.touchedModel(ref) {
		keys[1] = ModelKey(pl.ref)
		n = 2
	}
	if n == 1 {
		if st, ok := pl.planned(keys[0]); ok {
			next := st
			if applySuccessLazy(&next, ref, now); next == st {
				// Clean and recently used when the run planned it: nothing to
				// write. A cooldown another run wrote during this attempt stays;
				// it ends on its own or with the next success that sees it.
				return
			}
		}
		if _, err := r.e.store().Update(r.ctx, keys[0], func(s *ProfileState) { applySuccessLazy(s, ref, now) }); err != nil {
			r.warnStore(err)
		}
		return
	}
	if _, err := r.e.updateStates(r.ctx, keys[:], func(i int, s *ProfileState) {
		if i == 0 {
			applySuccessLazy(s, ref, now)
			return
		}
		applySuccess(s, ref, now)
	}); err != nil {
		r.warnStore(err)
	}
}

// planned returns the state of profile key as read when the candidate was planned.
func (pl *plan) planned(key string) (ProfileState, bool) {
	for i := range pl.slots {
		if pl.slots[i].key == key {
			return pl.slots[i].stored, true
		}
	}
	return ProfileState{}, false
}

// touchedModel reports whether this run recorded a transient failure of ref.
func (r *runner) touchedModel(ref string) bool {
	for _, a := range r.records {
		if a.Failure != nil && a.Candidate.Ref() == ref && transientFailure(a.Failure) {
			return true
		}
	}
	return false
}

// onFailure records f durably and reports whether it made the model unavailable
// (R7: timeout_switch_threshold consecutive transient failures).
func (r *runner) onFailure(pl *plan, c Candidate, f *Failure, now time.Time) (modelDown bool) {
	ms, err := r.e.recordFailure(r.ctx, c, pl.ref, f, now, r.p)
	if err != nil {
		r.warnStore(err)
	}
	if transientFailure(f) {
		modelDown = r.p.TimeoutSwitchThreshold > 0 && ms.Consecutive >= r.p.TimeoutSwitchThreshold
	}
	if (f.Reason == classify.ReasonAuth || f.Reason == classify.ReasonAuthPermanent) && !pl.primary {
		if ttl := skipTTL(r.p); ttl > 0 {
			r.e.addSkip(r.req.SessionKey, pl.ref, now.Add(ttl)) // R12
		}
	}
	return modelDown
}

func (r *runner) summary(stop error) (Result, error) {
	now := r.now()
	se := &SummaryError{
		Attempts: r.records, Stop: stop, At: now, Stalls: r.breaker,
		PaidCalls: r.paid, MaxPaidCalls: r.p.MaxPaidAttemptsPerTurn,
		CostUSD: r.cost, MaxCostUSD: r.p.MaxTurnCostUSD,
	}
	se.Until, se.EarliestRetry = r.earliest(now)
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
func (r *runner) earliest(now time.Time) (map[ModelRef]time.Time, time.Time) {
	var best time.Time
	until := map[ModelRef]time.Time{}
	for _, a := range r.records {
		ref := ModelRef(a.Candidate.Ref())
		if _, seen := until[ref]; seen {
			continue
		}
		u := r.e.candidateUntil(r.ctx, r.req, ref, now)
		until[ref] = u
		if !u.IsZero() && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	return until, best
}

// recordFailure records failure f of candidate c (model ref) durably: the
// profile's cooldown or disable (D1-D5) and the model's consecutive transient
// count (R7), in one store call (one transaction with a BatchUpdater). It returns
// the model's stored state (the zero state when the model key was not touched).
// The jitter draws happen before any store call, profile first, since fn may run
// more than once.
func (e *Engine) recordFailure(ctx context.Context, c Candidate, ref ModelRef, f *Failure, now time.Time, p *Policy) (ProfileState, error) {
	cref := c.Ref()
	var keys [2]string
	var jr [2]float64
	var kind [2]bool // true = the model key
	n := 0
	if cooldownReason(f.Reason) || f.Reason == classify.ReasonBilling || f.Reason == classify.ReasonAuthPermanent {
		keys[n], jr[n] = slotKey(c), e.rand()
		n++
	}
	if transientFailure(f) {
		keys[n], jr[n], kind[n] = ModelKey(ref), e.rand(), true
		n++
	}
	if n == 0 {
		return ProfileState{}, nil
	}
	out, err := e.updateStates(ctx, keys[:n], func(i int, s *ProfileState) {
		if kind[i] {
			applyModelFailure(s, f, now, p, jr[i])
			return
		}
		applyFailure(s, f, cref, now, p, jr[i])
	})
	if kind[n-1] {
		return out[n-1], err
	}
	return ProfileState{}, err
}

// candidateUntil returns when ref is usable again, zero when it is usable now.
func (e *Engine) candidateUntil(ctx context.Context, req *Request, ref ModelRef, now time.Time) time.Time {
	prov, _ := ref.Split()
	profs, _, _ := profilesFor(req, prov, now)
	keys := make([]string, 1+len(profs))
	keys[0] = ModelKey(ref)
	for j, p := range profs {
		keys[1+j] = stateKey(p.ID, ref)
	}
	states, errs := e.getStates(ctx, keys)
	failed := func(i int) bool { return errs != nil && errs[i] != nil }
	var until time.Time
	if ms := states[0]; !failed(0) && ms.CooldownUntil.After(now) {
		until = ms.CooldownUntil
	}
	var pmin time.Time
	for j := range profs {
		if failed(1 + j) {
			continue
		}
		ps := states[1+j]
		u, _ := blockedUntil(&ps, string(ref), now)
		if u.IsZero() {
			pmin = time.Time{}
			break
		}
		if pmin.IsZero() || u.Before(pmin) {
			pmin = u
		}
	}
	if pmin.After(until) {
		until = pmin
	}
	return until
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
