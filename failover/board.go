package failover

import "time"

// What a health board reads of the shared state (issue 38): the same pure
// decisions the engine makes, over states read beforehand from the store, so a
// board computed on any replica says what the engine there would do.

// ProbeKey is the state key of provider's probe row (A1, E1).
func ProbeKey(provider string) string { return probeKey(provider) }

// StateKeys are the state keys CandidateStatusOf reads for ref and profiles,
// in its order: the model's own (R7), then one per profile of ref's provider
// (one per-model key for a provider without credentials).
func StateKeys(ref ModelRef, profiles []Profile) []string {
	return candidateKeys(ref, ownProfiles(ref, profiles))
}

// CandidateStatusOf is CandidateStatus from states read beforehand, in
// StateKeys' order (a missing state is the zero state). It is pure.
func CandidateStatusOf(ref ModelRef, profiles []Profile, states []ProfileState, now time.Time) CandidateState {
	own := ownProfiles(ref, profiles)
	if len(states) < 1+len(own) {
		states = append(states, make([]ProfileState, 1+len(own)-len(states))...)
	}
	return candidateStatusOf(ref, own, states, now)
}

// ProviderDown reports whether a provider's probe row says it is down: its
// latest verdict was a failed check, or a call that failed as a provider that
// is down fails (E1). Only a check sends to it again.
func ProviderDown(row ProfileState) bool { return providerDown(row) }

// NextCheckAt is when the next check of a provider may start after the check
// its probe row records (E2); zero when it was never checked.
func NextCheckAt(p *Policy, row ProfileState) time.Time {
	if p == nil {
		dp := DefaultPolicy()
		p = &dp
	}
	return nextCheckAt(p, row)
}
