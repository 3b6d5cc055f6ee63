package adapters

import "context"

// Prober is an optional capability of a channel that talks to a platform: check,
// with the smallest requests the platform offers and without posting anything,
// that its credentials work and that target (an id of its own, such as the
// admin channel's; "" = none) can be reached. `bot check --probe` calls it.
type Prober interface {
	Probe(ctx context.Context, target string) []ProbeResult
}

// ProbeResult is one check: what was tried, whether it works, and a short
// detail (who the bot is, or why it failed). It never holds a secret.
type ProbeResult struct {
	What   string
	OK     bool
	Detail string
}

// Checked is one check's result: failed with err's text, or OK with detail
// (asked only then).
func Checked(what string, err error, detail func() string) ProbeResult {
	if err != nil {
		return ProbeResult{What: what, Detail: err.Error()}
	}
	return ProbeResult{What: what, OK: true, Detail: detail()}
}
