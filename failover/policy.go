package failover

import "time"

// Policy holds every number of the engine; each is a config setting (docs/behaviour.md).
type Policy struct {
	// Cooldowns and disables (D1-D5, A3, B8).
	CooldownLadder           []time.Duration // 30s, 1m, 5m (cap): the D1 ladder, climbed by auth failures (an invalid key)
	FailureWindow            time.Duration   // 24h: errorCount resets after this without failures (D1; D3/D4 doubling)
	TransientLadder          []time.Duration // 5s, 15s, 60s (cap): transient failures (A3) and R7's marks
	TransientWindow          time.Duration   // 10m: the A3 ladder starts again after this without failures
	BillingBackoff           time.Duration   // 5h, doubling
	BillingMax               time.Duration   // 24h
	AuthPermanentBackoff     time.Duration   // 10m, doubling
	AuthPermanentMax         time.Duration   // 60m
	Jitter                   float64         // 0.10 = ±10%
	MinParsedWait            time.Duration   // 30s: shorter parsed waits use the ladder (C11)
	MaxParsedWait            time.Duration   // 7 days cap (C11)
	BillingBackoffByProvider map[string]time.Duration

	// Run loop (R3-R13).
	RateLimitedProfileRotations int           // 1
	OverloadedProfileRotations  int           // 1
	OverloadedBackoff           time.Duration // 0
	TimeoutProfileRotations     int           // 1: same-provider rotations after a timeout before falling back
	RetryAfterMaxWait           time.Duration // 60s (R6, B6)
	IdleRetries                 int           // 1 (R5)
	TimeoutSwitchThreshold      int           // 3 (R7)
	BreakerTrip                 int           // 5 (R8)
	AttemptTimeout              time.Duration // 300s (R10)
	RunTimeout                  time.Duration // 1800s (R10)
	ProbeWindow                 time.Duration // 2m: probe the primary when its cooldown ends within this (R11)
	ProbeInterval               time.Duration // 30s per provider: probes of a cooling candidate while others may answer (R11)
	SharedProbeInterval         time.Duration // 5s per provider: the shared probe when no candidate can be tried (A1)
	SharedProbeWait             time.Duration // 10s: how long a turn waits for a shared probe's result (A1)
	BillingProbeInterval        time.Duration // throttled probe of a billing-disabled primary (R11)
	FallbackSkipTTL             time.Duration // 0 = off; clamped to 1s..10m (R12)
	EmptyOutputRetries          int           // 1 (R13)
	TimeoutCompactRatio         float64       // 0.65 (R15)

	// Budgets (B1, B2).
	MaxPaidAttemptsPerTurn int     // 8
	MaxTurnCostUSD         float64 // 0 = no cap
}

// DefaultPolicy returns the defaults of docs/behaviour.md.
func DefaultPolicy() Policy {
	return Policy{
		CooldownLadder:              []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute},
		FailureWindow:               24 * time.Hour,
		TransientLadder:             []time.Duration{5 * time.Second, 15 * time.Second, time.Minute},
		TransientWindow:             10 * time.Minute,
		BillingBackoff:              5 * time.Hour,
		BillingMax:                  24 * time.Hour,
		AuthPermanentBackoff:        10 * time.Minute,
		AuthPermanentMax:            60 * time.Minute,
		Jitter:                      0.10,
		MinParsedWait:               30 * time.Second,
		MaxParsedWait:               7 * 24 * time.Hour,
		RateLimitedProfileRotations: 1,
		OverloadedProfileRotations:  1,
		TimeoutProfileRotations:     1,
		RetryAfterMaxWait:           60 * time.Second,
		IdleRetries:                 1,
		TimeoutSwitchThreshold:      3,
		BreakerTrip:                 5,
		AttemptTimeout:              300 * time.Second,
		RunTimeout:                  1800 * time.Second,
		ProbeWindow:                 2 * time.Minute,
		ProbeInterval:               30 * time.Second,
		SharedProbeInterval:         5 * time.Second,
		SharedProbeWait:             10 * time.Second,
		BillingProbeInterval:        30 * time.Minute,
		EmptyOutputRetries:          1,
		TimeoutCompactRatio:         0.65,
		MaxPaidAttemptsPerTurn:      8,
	}
}
