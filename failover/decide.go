package failover

import (
	"time"

	"github.com/detourbot/detour/classify"
)

// Action is the next step of a run after a failed attempt (R4).
type Action uint8

// Actions.
const (
	RetrySame     Action = iota + 1 // same candidate, same profile (R5, R6, R13)
	RotateProfile                   // next profile of the same provider (R1, R3)
	FallbackModel                   // next candidate of the chain (R1, R2)
	SurfaceError                    // no further step: a terminal failure, or the chain is exhausted
	Stop                            // a guard tripped (R8): no further paid call
)

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case RetrySame:
		return "retry_same"
	case RotateProfile:
		return "rotate_profile"
	case FallbackModel:
		return "fallback_model"
	case SurfaceError:
		return "surface_error"
	case Stop:
		return "stop"
	}
	return "unknown"
}

// Decision is what Decide returns: an action, a delay to wait before it, and a
// constant explanation (never built at run time, so Decide does not allocate).
type Decision struct {
	Action Action
	Delay  time.Duration
	Why    string
	// OtherProvider: FallbackModel goes to the next candidate of another
	// provider, past this provider's siblings (C13).
	OtherProvider bool
}

// RunState is what Decide looks at: the run's counters for the current candidate
// (each failure type has its own counter and cap, R4) plus what remains.
type RunState struct {
	Policy *Policy   // nil = DefaultPolicy
	Now    time.Time // for Failure.RecoveryAt (R6)

	RateLimitRotations int // profile rotations after rate limits on this candidate (R3)
	OverloadRotations  int // profile rotations after overloads on this candidate (R3)
	TimeoutRotations   int // profile rotations after timeouts on this candidate
	RefusedRotations   int // profile rotations after refused responses on this candidate (A2)
	IdleRetries        int // same-model retries after idle timeouts on this candidate (R5)
	ShortWaitRetries   int // same-profile retries after short rate-limit waits (R6)
	EmptyRetries       int // nudged retries after empty output on this candidate (R13)

	// Breaker is the run's idle-timeout breaker count, including this failure (R8).
	Breaker int

	MoreProfiles       bool // another usable profile of this provider remains for this candidate
	MoreCandidates     bool // a later candidate exists in the chain
	UsableLater        bool // a later candidate can be tried at once (R6); set for short rate limits
	UserStrict         bool // the profile is user-pinned: never rotate (P3)
	LargerContextLater bool // a later candidate declares a larger context window (B7)
	// ModelUnavailable: this failure took the model to timeout_switch_threshold
	// consecutive transient failures (R7), so no retry or rotation may follow.
	ModelUnavailable bool
	// OtherProviderLater: a later candidate belongs to another provider (C13).
	OtherProviderLater bool
	// SafetyNetUsed: C13 already moved this run once.
	SafetyNetUsed bool
}

// Why texts of Decide.
const (
	WhyAborted          = "aborted: terminal"
	WhyContextFallback  = "context_overflow: a later candidate has a larger context window (B7)"
	WhyContextSurface   = "context_overflow: compaction is the caller's job (C8)"
	WhyTerminal         = "terminal failure: no rotation, no fallback (C9)"
	WhyBreaker          = "idle-timeout breaker tripped (R8)"
	WhyIdleRetry        = "idle timeout: one retry on the same model (R5)"
	WhyStallRotate      = "idle timeout: the one more attempt on the provider goes to its next key (R5, E1)"
	WhyShortWait        = "short rate-limit window and nothing else usable: wait and retry the same profile (R6)"
	WhyUsableLater      = "rate limit: a later candidate is usable now, so nothing waits (R6)"
	WhyRotate           = "rotate to the next profile of the provider (R1, R3)"
	WhyRotateOverloaded = "overloaded: rotate after the overload backoff (R3)"
	WhyFallback         = "fall back to the next model (R2)"
	WhyStrictFallback   = "user-pinned profile failed: next model, never another profile (P3)"
	WhyEmptyRetry       = "empty output: one nudged retry (R13)"
	WhyExhausted        = "no candidate left (R2)"
	WhyUnknownLast      = "unknown error on the last candidate surfaces (R2)"
	WhyConsecutive      = "consecutive transient failures: the model is marked unavailable (R7)"
	WhyRefused          = "refused response: the provider's fault, rotate then fall back (A2)"
	WhyLocal            = "local failure: our own fault, the next candidate is tried and nobody is blamed (A4)"
	WhySafetyNet        = "format failure that names nothing of the request: one try on another provider (C13)"
)

// Decide returns the next step after failure f (R4). It is pure and allocation-free.
func Decide(s RunState, f Failure) Decision {
	p := s.Policy
	if p == nil {
		p = &defaultPolicy
	}
	switch {
	case f.Idle && p.BreakerTrip > 0 && s.Breaker >= p.BreakerTrip:
		return Decision{Action: Stop, Why: WhyBreaker} // R8
	case s.ModelUnavailable && transientFailure(&f):
		return fallbackFor(s, WhyConsecutive) // R7: no retry or rotation
	}
	switch f.Reason {
	case classify.ReasonAborted:
		return Decision{Action: SurfaceError, Why: WhyAborted}
	case classify.ReasonContextOverflow:
		if s.LargerContextLater && s.MoreCandidates {
			return Decision{Action: FallbackModel, Why: WhyContextFallback} // B7
		}
		return Decision{Action: SurfaceError, Why: WhyContextSurface} // C8
	case classify.ReasonFormat:
		if f.NotRequestFault && !s.SafetyNetUsed && s.OtherProviderLater {
			return Decision{Action: FallbackModel, OtherProvider: true, Why: WhySafetyNet} // C13
		}
		return Decision{Action: SurfaceError, Why: WhyTerminal} // C9
	case classify.ReasonContentFilter:
		return Decision{Action: SurfaceError, Why: WhyTerminal} // C9
	case classify.ReasonRateLimit:
		return decideRateLimit(s, f, p)
	case classify.ReasonOverloaded:
		if rotatable(s, s.OverloadRotations, p.OverloadedProfileRotations) {
			return Decision{Action: RotateProfile, Delay: p.OverloadedBackoff, Why: WhyRotateOverloaded} // R3
		}
	case classify.ReasonTimeout:
		if f.Idle {
			// R5 as amended by E1: a stall (mid-stream or before headers)
			// earns at most one more attempt on the provider, on another key
			// when there is one (a stalled model is rarely its key's fault,
			// so never both), then the next model.
			if s.IdleRetries+s.TimeoutRotations >= p.IdleRetries {
				return fallback(s)
			}
			if rotatable(s, s.TimeoutRotations, p.TimeoutProfileRotations) {
				return Decision{Action: RotateProfile, Why: WhyStallRotate}
			}
			return Decision{Action: RetrySame, Why: WhyIdleRetry}
		}
		if rotatable(s, s.TimeoutRotations, p.TimeoutProfileRotations) {
			return Decision{Action: RotateProfile, Why: WhyRotate}
		}
	case classify.ReasonAuth, classify.ReasonAuthPermanent, classify.ReasonBilling:
		if s.MoreProfiles && !s.UserStrict { // bounded by the profile count
			return Decision{Action: RotateProfile, Why: WhyRotate}
		}
	case classify.ReasonRefusedResponse:
		if rotatable(s, s.RefusedRotations, p.TimeoutProfileRotations) {
			return Decision{Action: RotateProfile, Why: WhyRefused} // A2, like a server error
		}
	case classify.ReasonLocal:
		return fallbackFor(s, WhyLocal) // A4: the attempt failed, the run goes on
	case classify.ReasonModelNotFound: // the next model, at once
	case classify.ReasonEmptyResponse:
		if s.EmptyRetries < p.EmptyOutputRetries {
			return Decision{Action: RetrySame, Why: WhyEmptyRetry} // R13
		}
	default:
		// Unknown errors (unclassified, no_error_details, anything new) advance
		// while candidates remain and surface on the last one (R2).
		if s.MoreCandidates {
			return Decision{Action: FallbackModel, Why: WhyFallback}
		}
		return Decision{Action: SurfaceError, Why: WhyUnknownLast}
	}
	return fallback(s) // the failure type's own retries and rotations are used up
}

// decideRateLimit applies R6 and B6: another usable profile or candidate is
// used at once, and the limited profile cools down until the provider's time.
// Only with nothing else usable is a short stated wait slept through, once.
func decideRateLimit(s RunState, f Failure, p *Policy) Decision {
	switch {
	case rotatable(s, s.RateLimitRotations, p.RateLimitedProfileRotations):
		return Decision{Action: RotateProfile, Why: WhyRotate} // R3
	case s.UsableLater && s.MoreCandidates:
		return Decision{Action: FallbackModel, Why: WhyUsableLater}
	}
	if w := statedWait(&f, s.Now); w > 0 && w <= p.RetryAfterMaxWait && s.ShortWaitRetries < 1 {
		return Decision{Action: RetrySame, Delay: w, Why: WhyShortWait}
	}
	return fallback(s)
}

// rotatable reports whether another profile of the provider may be tried
// after n rotations of this failure type, whose cap is limit (R3, R4); a
// user-pinned profile never rotates (P3).
func rotatable(s RunState, n, limit int) bool {
	return s.MoreProfiles && !s.UserStrict && n < limit
}

func fallback(s RunState) Decision {
	if !s.MoreCandidates {
		return Decision{Action: SurfaceError, Why: WhyExhausted}
	}
	if s.UserStrict && s.MoreProfiles {
		return Decision{Action: FallbackModel, Why: WhyStrictFallback}
	}
	return Decision{Action: FallbackModel, Why: WhyFallback}
}

// fallbackFor is fallback with why as the reason of a move to the next model.
func fallbackFor(s RunState, why string) Decision {
	d := fallback(s)
	if d.Action == FallbackModel {
		d.Why = why
	}
	return d
}

// nextOtherProvider returns the index of the first candidate after i whose
// provider differs from candidate i's, or -1 (C13).
func nextOtherProvider(chain []ModelRef, i int) int {
	if i < 0 || i >= len(chain) {
		return -1
	}
	prov, _ := chain[i].Split()
	for j := i + 1; j < len(chain); j++ {
		if p, _ := chain[j].Split(); p != prov {
			return j
		}
	}
	return -1
}

// terminalReason reports whether a failure ends the run as itself, not as a
// chain failure (C8, C9, aborted).
func terminalReason(r classify.Reason) bool {
	switch r {
	case classify.ReasonAborted, classify.ReasonContextOverflow, classify.ReasonFormat, classify.ReasonContentFilter:
		return true
	}
	return false
}
