package failover

import "time"

// Policy holds every number of the engine; each is a config setting, and
// DefaultPolicy holds the defaults of docs/behaviour.md, once.
type Policy struct {
	// Cooldowns and disables (D1-D5, A3, B8).
	CooldownLadder           []time.Duration // the D1 ladder, climbed by auth failures (an invalid key); the last step is the cap
	FailureWindow            time.Duration   // the D1 count and D3/D4 doubling start again after this without failures
	TransientLadder          []time.Duration // transient failures (A3) and R7's marks; the last step is the cap
	TransientWindow          time.Duration   // the A3 ladder starts again after this without failures
	BillingBackoff           time.Duration   // D3, doubling up to BillingMax
	BillingMax               time.Duration   // D3
	AuthPermanentBackoff     time.Duration   // D4, doubling up to AuthPermanentMax
	AuthPermanentMax         time.Duration   // D4
	Jitter                   float64         // B8: the spread of every cooldown and disable, ±Jitter
	MinParsedWait            time.Duration   // C11: shorter stated waits use the ladder
	MaxParsedWait            time.Duration   // C11: longer stated waits are capped
	BillingBackoffByProvider map[string]time.Duration

	// Run loop (R3-R13).
	RateLimitedProfileRotations int           // R3
	OverloadedProfileRotations  int           // R3
	OverloadedBackoff           time.Duration // R3: the pause before an overload's rotation
	TimeoutProfileRotations     int           // same-provider rotations after a timeout (or a refused response, A2) before falling back
	RetryAfterMaxWait           time.Duration // R6, B6: the longest stated wait slept through
	IdleRetries                 int           // R5
	TimeoutSwitchThreshold      int           // R7
	BreakerTrip                 int           // R8
	AttemptTimeout              time.Duration // R10
	RunTimeout                  time.Duration // R10
	ProbeWindow                 time.Duration // R11: probe the primary when its cooldown ends within this
	ProbeInterval               time.Duration // R11: per provider, probes of a cooling candidate while others may answer
	SharedProbeInterval         time.Duration // A1, E2: per provider, the first interval between checks of a provider that is down
	SharedProbeIntervalMax      time.Duration // E2: the interval doubles after each failed check up to this
	SharedProbeWait             time.Duration // A1: how long a turn waits for a shared probe's result
	BillingProbeInterval        time.Duration // R11: the throttled probe of a billing-disabled primary
	FallbackSkipTTL             time.Duration // R12: 0 = off; clamped to 1s..10m
	EmptyOutputRetries          int           // R13
	TimeoutCompactRatio         float64       // R15

	// Budgets (B1; the process guard of B2 is Engine.Guard).
	MaxPaidAttemptsPerTurn int     // paid calls a turn may make
	MaxTurnCostUSD         float64 // 0 = no cap
}

// DefaultPolicy returns the defaults of docs/behaviour.md.
func DefaultPolicy() Policy {
	return Policy{
		// D1, A3: ladders and the windows that reset them.
		CooldownLadder:  []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute},
		FailureWindow:   24 * time.Hour,
		TransientLadder: []time.Duration{5 * time.Second, 15 * time.Second, time.Minute},
		TransientWindow: 10 * time.Minute,
		// D3, D4: disables, doubling.
		BillingBackoff: 5 * time.Hour, BillingMax: 24 * time.Hour,
		AuthPermanentBackoff: 10 * time.Minute, AuthPermanentMax: 60 * time.Minute,
		Jitter: 0.10, // B8
		// C11: stated waits.
		MinParsedWait: 30 * time.Second, MaxParsedWait: 7 * 24 * time.Hour,
		// R3, R5-R8, R13: rotations, retries and the breaker.
		RateLimitedProfileRotations: 1, OverloadedProfileRotations: 1, TimeoutProfileRotations: 1,
		IdleRetries: 1, EmptyOutputRetries: 1, RetryAfterMaxWait: 60 * time.Second,
		TimeoutSwitchThreshold: 3, BreakerTrip: 5,
		// R10: timeouts.
		AttemptTimeout: 300 * time.Second, RunTimeout: 1800 * time.Second,
		// R11, A1: probes.
		ProbeWindow: 2 * time.Minute, ProbeInterval: 30 * time.Second, BillingProbeInterval: 30 * time.Minute,
		SharedProbeInterval: 5 * time.Second, SharedProbeIntervalMax: 30 * time.Second, SharedProbeWait: 10 * time.Second,
		TimeoutCompactRatio:    0.65, // R15
		MaxPaidAttemptsPerTurn: 8,    // B1
	}
}
