package failover

import (
	"math/rand/v2"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/redact"
)

// ModelKey is the StateStore key of a model's own state (R7): "model:<provider/model>".
func ModelKey(ref ModelRef) string { return "model:" + string(ref) }

// noAuthKey is the state key of a model of a provider without profiles (local
// models): such models have no shared credential, so their state is per model.
func noAuthKey(ref string) string { return "noauth:" + ref }

var defaultPolicy = DefaultPolicy()

// policy returns the engine's policy; a zero Policy means DefaultPolicy.
func (e *Engine) policy() *Policy {
	p := &e.Policy
	if p.CooldownLadder == nil && p.BreakerTrip == 0 && p.MaxPaidAttemptsPerTurn == 0 && p.FailureWindow == 0 {
		return &defaultPolicy
	}
	return p
}

func (e *Engine) now() time.Time { return e.clock().Now() }

func (e *Engine) rand() float64 {
	if e.Rand != nil {
		return e.Rand()
	}
	return rand.Float64()
}

// jitter spreads d by up to ±p.Jitter (B8).
func jitter(d time.Duration, frac, r float64) time.Duration {
	if frac <= 0 || d <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + frac*(2*r-1)))
}

// ladder returns the cooldown after the n-th failure in a row on ladder l
// (the last step is the cap); an empty l uses def.
func ladder(l, def []time.Duration, n int) time.Duration {
	if len(l) == 0 {
		l = def
	}
	if n < 1 {
		n = 1
	}
	if n > len(l) {
		n = len(l)
	}
	return l[n-1]
}

// transientReason reports whether r climbs the short transient ladder (A3):
// rate limits, overloads, the timeout family, refused responses and failures
// without a known cause. Auth failures climb the D1 ladder.
func transientReason(r classify.Reason) bool {
	switch r {
	case classify.ReasonRateLimit, classify.ReasonOverloaded, classify.ReasonTimeout, classify.ReasonRefusedResponse,
		classify.ReasonUnclassified, classify.ReasonNoErrorDetails:
		return true
	}
	return false
}

// cooldownFor is the cooldown after the n-th failure in a row of reason r: the
// transient ladder (A3) or the D1 ladder.
func cooldownFor(p *Policy, r classify.Reason, n int) time.Duration {
	if transientReason(r) || r == classify.ReasonConsecutiveTimeout {
		return ladder(p.TransientLadder, defaultPolicy.TransientLadder, n)
	}
	return ladder(p.CooldownLadder, defaultPolicy.CooldownLadder, n)
}

// doubling returns base doubled (n-1) times, capped at max.
func doubling(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// statedWait is how long the provider asked to wait (C11): the later of
// RetryAfter and RecoveryAt; zero when nothing was stated.
func statedWait(f *Failure, now time.Time) time.Duration {
	w := f.RetryAfter
	if !f.RecoveryAt.IsZero() {
		if d := f.RecoveryAt.Sub(now); d > w {
			w = d
		}
	}
	if w < 0 {
		w = 0
	}
	return w
}

// cooldownReason reports whether r puts a profile into a cooldown: an auth
// failure on the D1 ladder, a transient one on the A3 ladder (a refused
// response cools down like a server error, A2). A local failure (A4) never does.
func cooldownReason(r classify.Reason) bool {
	return r == classify.ReasonAuth || transientReason(r)
}

// transientFailure reports whether f counts toward R7 stealth failures. A
// local failure is ours, not the model's (A4).
func transientFailure(f *Failure) bool {
	switch f.Reason {
	case classify.ReasonLocal:
		return false
	case classify.ReasonTimeout, classify.ReasonOverloaded, classify.ReasonRateLimit:
		return f.Class != classify.ClassDeterministic
	}
	return f.Class == classify.ClassTransient
}

// clip returns a short, redacted preview of a provider message for state rows
// and logs (P4): key-like words are masked even if the caller forgot to redact.
func clip(s string) string { return redact.Preview(s, 200) }

// applyFailure updates a profile's state for failure f of model ref (D1-D5, B6, B8).
func applyFailure(st *ProfileState, f *Failure, ref string, now time.Time, p *Policy, r float64) {
	disable := f.Reason == classify.ReasonBilling || f.Reason == classify.ReasonAuthPermanent
	if !disable && !cooldownReason(f.Reason) {
		return
	}
	switch {
	case transientReason(f.Reason):
		if p.TransientWindow > 0 && !st.LastFailure.IsZero() && now.Sub(st.LastFailure) > p.TransientWindow {
			st.ErrorCount = 0 // A3: the ladder starts again; D3/D4 doubling keeps its own window
		}
	case p.FailureWindow > 0 && !st.LastFailure.IsZero() && now.Sub(st.LastFailure) > p.FailureWindow:
		st.ErrorCount, st.DisableCount = 0, 0 // D1 window reset
	}
	st.ErrorCount++
	st.LastFailure = now
	st.LastUsed = now
	st.LastError = clip(f.Message)
	wait := statedWait(f, now)
	stated := wait >= p.MinParsedWait && wait > 0
	if stated && p.MaxParsedWait > 0 && wait > p.MaxParsedWait {
		wait = p.MaxParsedWait // C11 cap; RecoveryAt keeps the stated time
	}
	if disable {
		if st.DisabledUntil.After(now) {
			return // D1: an active window is never extended
		}
		st.DisableCount++
		base, ceil := p.AuthPermanentBackoff, p.AuthPermanentMax // D4
		if f.Reason == classify.ReasonBilling {
			base, ceil = p.BillingBackoff, p.BillingMax // D3
			if b, ok := p.BillingBackoffByProvider[providerOf(ref, f)]; ok && b > 0 {
				base = b
			}
		}
		d := jitter(doubling(base, ceil, st.DisableCount), p.Jitter, r)
		if ceil > 0 && d > ceil {
			d = ceil
		}
		if stated && wait > d {
			d = wait // D5
		}
		st.DisabledUntil = now.Add(d)
		st.DisabledReason = f.Reason
		st.RecoveryAt = recoveryAt(f, now)
		return
	}
	model := ""
	if f.Reason == classify.ReasonRateLimit && ref != "" {
		model = ref // D2: model-scoped
	}
	if st.CooldownUntil.After(now) {
		// D1: never extend an active window; a failure of another scope widens it.
		if st.CooldownModel != model {
			st.CooldownModel = ""
		}
		return
	}
	d := jitter(cooldownFor(p, f.Reason, st.ErrorCount), p.Jitter, r)
	if stated && wait > d {
		d = wait // D5, B6: park until the stated reset
	}
	st.CooldownUntil = now.Add(d)
	st.CooldownReason = f.Reason
	st.CooldownModel = model
	st.RecoveryAt = recoveryAt(f, now)
}

func recoveryAt(f *Failure, now time.Time) time.Time {
	if !f.RecoveryAt.IsZero() {
		return f.RecoveryAt
	}
	if f.RetryAfter > 0 {
		return now.Add(f.RetryAfter)
	}
	return time.Time{}
}

func providerOf(ref string, f *Failure) string {
	if f.Provider != "" {
		return f.Provider
	}
	prov, _ := ModelRef(ref).Split()
	return prov
}

// applySuccess clears a profile's failure state after a success on model ref (D1).
// A model-scoped cooldown of another model stays (D2).
func applySuccess(st *ProfileState, ref string, now time.Time) {
	st.LastUsed = now
	st.ErrorCount = 0
	st.Consecutive = 0
	st.DisabledUntil, st.DisabledReason, st.DisableCount = time.Time{}, "", 0
	if st.CooldownModel != "" && st.CooldownModel != ref && st.CooldownUntil.After(now) {
		return
	}
	st.CooldownUntil, st.CooldownReason, st.CooldownModel = time.Time{}, "", ""
	st.RecoveryAt = time.Time{}
}

// lastUsedPersist bounds how stale the STORED LastUsed of a clean profile may get.
//
// A success on a profile whose stored state is already clean (no cooldown, no
// disable, no error counts) only moves LastUsed. Writing that every time costs a
// durable write transaction per answer (a lock, a WAL append and a commit on
// SQLite; BENCHMARKS.md has the figure). applySuccessLazy skips it while the stored LastUsed is younger than
// lastUsedPersist, which turns such a success into a no-op Update (no lock, no
// write). The engine keeps every success in an in-process map (Engine.used) that
// P1 ordering and CandidateStatus consult together with the stored value, so
// within one process least-recently-used rotation stays exact, even for profiles
// used milliseconds apart.
//
// Trade-off: another replica sharing the store, or this process after a restart,
// sees a clean profile's LastUsed up to lastUsedPersist old, so its P1 order among
// equally usable profiles is only that precise (a load-spreading hint, never a
// correctness rule) and its /status may show an older "last used". Failures,
// cooldowns, disables and the clearing of any of them are always written at once
// (D6): only the timestamp of an uneventful success is deferred.
const lastUsedPersist = time.Minute

// applySuccessLazy is applySuccess that leaves a recent LastUsed as stored when
// nothing else would change (see lastUsedPersist).
func applySuccessLazy(st *ProfileState, ref string, now time.Time) {
	prev := *st
	applySuccess(st, ref, now)
	if prev.LastUsed.IsZero() {
		return
	}
	if d := now.Sub(prev.LastUsed); d < 0 || d >= lastUsedPersist {
		return
	}
	st.LastUsed = prev.LastUsed
	if *st != prev {
		st.LastUsed = now // something else changed: a real write, LastUsed included
	}
}

// maxUsed bounds Engine.used; past it, entries older than lastUsedPersist (whose
// stored value is then at most that much older) are dropped.
const maxUsed = 4096

// noteUsed records a success on state key in this process (P1).
func (e *Engine) noteUsed(key string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used == nil {
		e.used = make(map[string]time.Time)
	}
	if _, ok := e.used[key]; !ok && len(e.used) >= maxUsed {
		for k, t := range e.used {
			if now.Sub(t) >= lastUsedPersist {
				delete(e.used, k)
			}
		}
		if len(e.used) >= maxUsed {
			clear(e.used)
		}
	}
	if now.After(e.used[key]) {
		e.used[key] = now
	}
}

// freshenLastUsed raises states[i].LastUsed to this process's last success on
// keys[i] when that is later than the stored value (see lastUsedPersist).
func (e *Engine) freshenLastUsed(keys []string, states []ProfileState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.used) == 0 {
		return
	}
	for i, k := range keys {
		if u, ok := e.used[k]; ok && u.After(states[i].LastUsed) {
			states[i].LastUsed = u
		}
	}
}

// applyModelFailure counts a transient failure of a model across turns and marks
// the model unavailable at the threshold (R7).
func applyModelFailure(st *ProfileState, f *Failure, now time.Time, p *Policy, r float64) {
	if !transientFailure(f) {
		return // only a success resets the count
	}
	if p.TransientWindow > 0 && !st.LastFailure.IsZero() && now.Sub(st.LastFailure) > p.TransientWindow {
		st.ErrorCount = 0 // A3: the ladder of the model's marks starts again
	}
	st.Consecutive++
	st.LastFailure = now
	st.LastError = clip(f.Message)
	if p.TimeoutSwitchThreshold <= 0 || st.Consecutive < p.TimeoutSwitchThreshold {
		return
	}
	if st.CooldownUntil.After(now) {
		return
	}
	st.ErrorCount++
	st.CooldownUntil = now.Add(jitter(cooldownFor(p, classify.ReasonConsecutiveTimeout, st.ErrorCount), p.Jitter, r))
	st.CooldownReason = classify.ReasonConsecutiveTimeout
}

// clearState clears cooldown, disable and counters (B3, V5). LastUsed stays.
func clearState(st *ProfileState) {
	st.ErrorCount, st.Consecutive, st.DisableCount = 0, 0, 0
	st.CooldownUntil, st.CooldownReason, st.CooldownModel = time.Time{}, "", ""
	st.DisabledUntil, st.DisabledReason = time.Time{}, ""
	st.RecoveryAt = time.Time{}
}

// blockedUntil reports until when st blocks model ref, and why (D2: a cooldown
// scoped to another model does not block).
func blockedUntil(st *ProfileState, ref string, now time.Time) (time.Time, classify.Reason) {
	var until time.Time
	var why classify.Reason
	if st.DisabledUntil.After(now) {
		until, why = st.DisabledUntil, st.DisabledReason
	}
	if st.CooldownUntil.After(now) && (st.CooldownModel == "" || st.CooldownModel == ref) {
		if st.CooldownUntil.After(until) {
			if why == "" {
				why = st.CooldownReason
			}
			until = st.CooldownUntil
		}
	}
	return until, why
}

func isModelKey(key string) bool { return strings.HasPrefix(key, "model:") }
