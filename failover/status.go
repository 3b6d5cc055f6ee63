package failover

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
)

// Profile states reported by CandidateStatus.
const (
	StateOK       = "ok"
	StateCooldown = "cooldown"
	StateDisabled = "disabled"
	StateExpired  = "expired"
)

// ProfileStatus is what /status shows of one profile, or of the model's own state
// (R7) when ID is "model:<ref>". It never holds a secret.
type ProfileStatus struct {
	ID         string
	State      string          // StateOK, StateCooldown, StateDisabled or StateExpired
	Until      time.Time       // end of the cooldown or disable (zero when ok)
	Reason     classify.Reason // cooldown or disable reason
	Model      string          // model scope of a cooldown (D2); empty = whole profile
	RecoveryAt time.Time       // recovery time as the provider stated it (C11)
	ErrorCount int
	LastUsed   time.Time
	LastError  string // redacted preview
}

// CandidateState is the availability of one model for /status and /recover.
type CandidateState struct {
	Ref       ModelRef
	Available bool
	Until     time.Time       // when it is usable again (zero when available or unknown)
	Reason    classify.Reason // why it is not available
	Model     ProfileStatus
	Profiles  []ProfileStatus
}

// CandidateStatus reports whether ref is usable now and the state of each of its
// profiles (profiles of other providers are ignored; none = a provider without
// credentials).
func (e *Engine) CandidateStatus(ctx context.Context, ref ModelRef, profiles []Profile) (CandidateState, error) {
	now := e.now()
	own := ownProfiles(ref, profiles)
	keys := candidateKeys(ref, own)
	states, errs := e.getStates(ctx, keys)
	for i, err := range errs {
		if err != nil {
			return CandidateState{Ref: ref}, fmt.Errorf("failover: status of %s: %w", keys[i], err)
		}
	}
	e.freshenLastUsed(keys[1:], states[1:]) // this process's successes (lastUsedPersist)
	return candidateStatusOf(ref, own, states, now), nil
}

// ownProfiles are the profiles of ref's provider among profiles; none = the
// provider without credentials (one profile with no id).
func ownProfiles(ref ModelRef, profiles []Profile) []Profile {
	prov, _ := ref.Split()
	var own []Profile
	for _, p := range profiles {
		if p.Provider == prov || (p.Provider == "" && strings.HasPrefix(p.ID, prov+":")) {
			own = append(own, p)
		}
	}
	if len(own) == 0 {
		own = []Profile{{Provider: prov}}
	}
	return own
}

// candidateStatusOf is CandidateStatus from the states of candidateKeys(ref,
// own), read beforehand. It is pure.
func candidateStatusOf(ref ModelRef, own []Profile, states []ProfileState, now time.Time) CandidateState {
	cs := CandidateState{Ref: ref}
	cs.Model = statusOf(states[0], ModelKey(ref), string(ref), now)
	var soonest time.Time
	var why classify.Reason
	anyOK := false
	for j, p := range own {
		s := statusOf(states[1+j], p.ID, string(ref), now)
		if !p.ExpiresAt.IsZero() && !p.ExpiresAt.After(now) {
			s.State, s.Reason = StateExpired, classify.ReasonAuth
		}
		cs.Profiles = append(cs.Profiles, s)
		switch {
		case s.State == StateOK:
			anyOK = true
		case !s.Until.IsZero() && (soonest.IsZero() || s.Until.Before(soonest)):
			soonest, why = s.Until, s.Reason
		case why == "":
			why = s.Reason
		}
	}
	cs.Available = anyOK && cs.Model.State == StateOK
	if !cs.Available {
		cs.Until, cs.Reason = soonest, why
		if anyOK {
			cs.Until = time.Time{}
		}
		if cs.Model.State != StateOK && cs.Model.Until.After(cs.Until) {
			cs.Until, cs.Reason = cs.Model.Until, cs.Model.Reason
		}
	}
	return cs
}

func statusOf(ps ProfileState, id, ref string, now time.Time) ProfileStatus {
	s := ProfileStatus{ID: id, State: StateOK, RecoveryAt: ps.RecoveryAt, ErrorCount: ps.ErrorCount,
		LastUsed: ps.LastUsed, LastError: ps.LastError}
	if ps.CooldownUntil.After(now) {
		s.Model = ps.CooldownModel
	}
	until, why := blockedUntil(&ps, ref, now)
	if until.IsZero() {
		return s
	}
	s.Until, s.Reason = until, why
	s.State = StateCooldown
	if ps.DisabledUntil.After(now) {
		s.State = StateDisabled
	}
	return s
}

// Clear marks a profile id ("provider:name"), a "model:<provider/model>" key or a
// bare "provider/model" available again: cooldown, disable and counters are
// cleared (B3, V5) and the provider's probe throttle is reset. For a model ref,
// use ClearModel to also lift cooldowns scoped to it on the provider's profiles.
func (e *Engine) Clear(ctx context.Context, key string) error {
	if i := strings.IndexByte(key, '/'); i > 0 && !strings.Contains(key[:i], ":") {
		// a bare model ref: its own state (R7) and, for a provider without
		// credentials, its per-model state
		if _, err := e.store().Update(ctx, noAuthKey(key), clearState); err != nil {
			return fmt.Errorf("failover: clear %s: %w", key, err)
		}
		key = ModelKey(ModelRef(key))
	}
	if _, err := e.store().Update(ctx, key, clearState); err != nil {
		return fmt.Errorf("failover: clear %s: %w", key, err)
	}
	prov := key
	if isModelKey(key) {
		prov, _ = ModelRef(strings.TrimPrefix(key, "model:")).Split()
	} else if i := strings.IndexByte(key, ':'); i >= 0 {
		prov = key[:i]
	}
	for _, k := range []string{prov, prov + "#billing"} {
		// The throttle, and the provider's down mark and its checks' backoff
		// (E1, E2): whoever cleared it saw it answer.
		if _, err := e.store().Update(ctx, probeKey(k), func(s *ProfileState) {
			s.LastProbe, s.LastFailure, s.Consecutive = time.Time{}, time.Time{}, 0
		}); err != nil {
			return fmt.Errorf("failover: clear the probe throttle of %s: %w", prov, err)
		}
	}
	e.mu.Lock()
	delete(e.probeAt, prov)
	delete(e.probeAt, prov+"#billing")
	e.mu.Unlock()
	return nil
}

// ClearModel clears the model's own state and every cooldown scoped to ref on
// the given profiles (B3 for "/recover provider/model").
func (e *Engine) ClearModel(ctx context.Context, ref ModelRef, profiles []Profile) error {
	if err := e.Clear(ctx, ModelKey(ref)); err != nil {
		return err
	}
	for _, p := range profiles {
		if p.ID == "" {
			continue
		}
		_, err := e.store().Update(ctx, p.ID, func(s *ProfileState) {
			if s.CooldownModel == string(ref) {
				s.CooldownUntil, s.CooldownReason, s.CooldownModel = time.Time{}, "", ""
			}
		})
		if err != nil {
			return fmt.Errorf("failover: clear %s on %s: %w", ref, p.ID, err)
		}
	}
	return nil
}

// RecordSuccess applies a success of c outside Run (for example a /recover probe):
// the profile's and the model's failure state are cleared (D1, R7).
func (e *Engine) RecordSuccess(ctx context.Context, c Candidate) error {
	now, ref := e.now(), c.Ref()
	e.noteUsed(slotKey(c), now)
	keys := []string{slotKey(c), ModelKey(ModelRef(ref))}
	if _, err := e.updateStates(ctx, keys, func(_ int, s *ProfileState) { applySuccess(s, ref, now) }); err != nil {
		return fmt.Errorf("failover: record success: %w", err)
	}
	return nil
}

// RecordFailure applies failure f of c outside Run: cooldowns and disables (D1-D5)
// and the model's consecutive count (R7).
func (e *Engine) RecordFailure(ctx context.Context, c Candidate, f Failure) error {
	if _, err := e.recordFailure(ctx, c, ModelRef(c.Ref()), &f, e.now(), e.policy()); err != nil {
		return fmt.Errorf("failover: record failure: %w", err)
	}
	return nil
}
