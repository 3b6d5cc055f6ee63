package slack

// SetMethodLimits replaces the per-minute limits adapters created afterwards keep
// (a benchmark making more than Slack's twenty streams a minute); the returned
// function restores them.
func SetMethodLimits(m map[string]int) (restore func()) {
	old := methodLimits
	methodLimits = m
	return func() { methodLimits = old }
}
