package failover

// Source is why a session uses its model (SPEC section 0, S1-S5).
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
	for i := 0; i < len(m); i++ {
		if m[i] == '/' {
			return string(m[:i]), string(m[i+1:])
		}
	}
	return "", string(m)
}
