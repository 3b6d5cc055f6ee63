package classify

// Outcome tokens that split the timeout family (C6) by what its HTTP status says.
const (
	OutcomeServerError   = "server_error"   // a 5xx
	OutcomeRequestFailed = "request_failed" // a 4xx other than 408
	OutcomeStreamBroke   = "stream_broke"   // the failure came after a 2xx, mid-stream
)

// Outcome is a failure as metrics and `bot history` count it: its reason,
// except that the timeout family is split by its HTTP status, so that a 500 is
// counted as a server_error and never as a timeout; a timeout is one that had
// no status at all (or a 408). The set of tokens is the set of reasons plus the
// three above, so it stays small enough for a metric label.
func Outcome(r Reason, status int) string {
	if r != ReasonTimeout {
		return string(r)
	}
	switch {
	case status >= 500 && status <= 599:
		return OutcomeServerError
	case status >= 400 && status <= 499 && status != 408:
		return OutcomeRequestFailed
	case status >= 200 && status <= 299:
		return OutcomeStreamBroke
	}
	return string(ReasonTimeout)
}
