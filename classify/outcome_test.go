package classify

import "testing"

// covers C6, V1: the timeout family is counted by what its status says; a 500
// is never a "timeout".
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		r      Reason
		status int
		want   string
	}{
		{ReasonTimeout, 500, "server_error"},
		{ReasonTimeout, 502, "server_error"},
		{ReasonTimeout, 408, "timeout"},
		{ReasonTimeout, 0, "timeout"},
		{ReasonTimeout, StatusUnknown, "timeout"},
		{ReasonTimeout, 200, "stream_broke"},
		{ReasonTimeout, 499, "request_failed"},
		{ReasonRateLimit, 429, "rate_limit"},
		{ReasonBilling, 402, "billing"},
		{ReasonUnclassified, 500, "unclassified"},
	} {
		if got := Outcome(tc.r, tc.status); got != tc.want {
			t.Errorf("Outcome(%s, %d) = %s, want %s", tc.r, tc.status, got, tc.want)
		}
	}
}
