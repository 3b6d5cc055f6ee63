package failover

import (
	"slices"
	"strings"
)

// Source is why a session uses its model (docs/behaviour.md section 0, S1-S5).
type Source string

// Selection sources.
const (
	SourceDefault Source = "default"
	SourceAgent   Source = "agent"
	SourceAuto    Source = "auto"
	SourceUser    Source = "user"
	SourceLegacy  Source = "legacy"
	SourceCron    Source = "cron"
)

// ChainInput is what BuildChain needs (S1-S5, K1-K5).
type ChainInput struct {
	Requested  ModelRef   // the model the session will use first
	Source     Source     // why
	Primary    ModelRef   // agents.defaults.model.primary (or the agent's model)
	Configured []ModelRef // the configured fallbacks of the default/agent
	// Override is an explicit fallbacks list (agent fallbacks or a request override);
	// nil = none, non-nil empty = fallback disabled (K5, S2).
	Override []ModelRef
}

// Split returns the provider and model of a ref, split on the first "/".
func (m ModelRef) Split() (provider, model string) {
	if p, rest, ok := strings.Cut(string(m), "/"); ok {
		return p, rest
	}
	return "", string(m)
}

// BuildChain returns the candidate models a run may walk (S1-S5, K1-K5).
//
//   - K1: the requested model is always first.
//   - S4/S5: a user (or legacy, source-less) override is strict: the chain is the
//     requested model only.
//   - S2: an agent primary is strict unless the agent lists its own fallbacks
//     (Override non-nil); `fallbacks: []` keeps it strict.
//   - K5: with an explicit Override the chain is the requested model plus that list
//     (de-duplicated, K2); an empty list disables fallback and appends nothing.
//   - S1/S3/K3: otherwise the configured fallbacks follow; when the requested model
//     is itself a configured fallback, the rest of the configured chain after it
//     stays available.
//   - K4: without an explicit override the configured primary is appended last.
func BuildChain(in ChainInput) []ModelRef {
	out := make([]ModelRef, 0, 2+len(in.Configured)+len(in.Override))
	add := func(m ModelRef) {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	req := in.Requested
	if req == "" {
		req = in.Primary
	}
	add(req)
	switch in.Source {
	case SourceUser, SourceLegacy, "":
		// S4, S5: strict. An empty source on a non-primary request is legacy;
		// on the primary itself it is the configured default.
		if in.Source != "" || (req != in.Primary && in.Primary != "") {
			return out
		}
	case SourceAgent:
		if in.Override == nil {
			return out // S2: strict
		}
	}
	if in.Override != nil {
		for _, m := range in.Override { // K5, K2
			add(m)
		}
		return out
	}
	rest := in.Configured
	for i, m := range in.Configured {
		if m == req && req != in.Primary {
			rest = in.Configured[i+1:] // K3
			break
		}
	}
	for _, m := range rest {
		add(m)
	}
	add(in.Primary) // K4
	return out
}
