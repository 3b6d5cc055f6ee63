package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/detourbot/detour/classify"
)

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

// candidateKeys are the state keys of model ref, read together: the model's
// own (R7) first, then each profile's.
func candidateKeys(ref ModelRef, profs []Profile) []string {
	keys := make([]string, 1+len(profs))
	keys[0] = ModelKey(ref)
	for j, p := range profs {
		keys[1+j] = stateKey(p.ID, ref)
	}
	return keys
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
	if c.Provider != "" && r.clearsDown(pl) {
		if _, err := r.e.store().Update(r.ctx, probeKey(c.Provider), func(s *ProfileState) { markUp(s, now) }); err != nil {
			r.warnStore(err)
		}
		pl.down = false
	}
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
	if f.Reason == classify.ReasonLocal {
		// A4: our own fault (descriptors, memory, our cancellation) touches no
		// provider, profile or model state.
		r.log.LogAttrs(r.ctx, slog.LevelWarn, "local failure: the attempt failed on detour's side; no provider state changed",
			slog.String("sessionKey", r.req.SessionKey), slog.String("model", c.Ref()),
			slog.String("profile", c.Profile), slog.String("detail", clip(f.Message)))
		return false
	}
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

// recordFailure records failure f of candidate c (model ref) durably: the
// profile's cooldown or disable (D1-D5) and the model's consecutive transient
// count (R7), in one store call (one transaction with a BatchUpdater). It returns
// the model's stored state (the zero state when the model key was not touched).
// The jitter draws happen before any store call, profile first, since fn may run
// more than once.
func (e *Engine) recordFailure(ctx context.Context, c Candidate, ref ModelRef, f *Failure, now time.Time, p *Policy) (ProfileState, error) {
	cref := c.Ref()
	const profileKey, modelKey, rowKey = 0, 1, 2
	var keys [3]string
	var jr [3]float64
	var kind [3]int
	n := 0
	if cooldownReason(f.Reason) || f.Reason == classify.ReasonBilling || f.Reason == classify.ReasonAuthPermanent {
		keys[n], jr[n], kind[n] = slotKey(c), e.rand(), profileKey
		n++
	}
	model := -1
	if transientFailure(f) {
		keys[n], jr[n], kind[n], model = ModelKey(ref), e.rand(), modelKey, n
		n++
	}
	if downFailure(f) && c.Provider != "" {
		keys[n], kind[n] = probeKey(c.Provider), rowKey
		n++
	}
	if n == 0 {
		return ProfileState{}, nil
	}
	out, err := e.updateStates(ctx, keys[:n], func(i int, s *ProfileState) {
		switch kind[i] {
		case modelKey:
			applyModelFailure(s, f, now, p, jr[i])
		case rowKey:
			markDown(s, f, now)
		default:
			applyFailure(s, f, cref, now, p, jr[i])
		}
	})
	if model >= 0 {
		return out[model], err
	}
	return ProfileState{}, err
}

// downFailure reports whether f is how a provider that is down fails (E1):
// the timeout family, overloads, responses detour refuses and failures without
// a known cause. A rate limit or an auth failure is one key's; a local failure
// is ours (A4).
func downFailure(f *Failure) bool {
	switch f.Reason {
	case classify.ReasonTimeout, classify.ReasonOverloaded, classify.ReasonRefusedResponse,
		classify.ReasonUnclassified, classify.ReasonNoErrorDetails:
		return f.Class != classify.ClassDeterministic
	}
	return false
}

// markDown records on a provider's probe row that a call failed as a provider
// that is down fails: until a check or a call answers, the conversation goes
// to it only after a check (E1). R11's throttle counts checks, not the failures
// that started a cooldown, so the claim (LastProbe) stays as it is.
func markDown(s *ProfileState, f *Failure, now time.Time) {
	if now.After(s.LastFailure) {
		s.LastFailure = now
	}
	s.CooldownReason, s.LastError = f.Reason, clip(f.Message)
}

// markUp records on a provider's probe row that a call answered (E1, E2).
func markUp(s *ProfileState, now time.Time) {
	if now.After(s.LastUsed) {
		s.LastUsed = now
	}
	s.Consecutive = 0
}

// clearsDown reports whether a success on prov must clear its down mark: the
// run planned it down, or failed on it as a provider that is down fails.
func (r *runner) clearsDown(pl *plan) bool {
	if pl.down {
		return true
	}
	for _, a := range r.records {
		if a.Failure != nil && a.Candidate.Provider == pl.prov && downFailure(a.Failure) {
			return true
		}
	}
	return false
}
