package opsserver

import (
	"strconv"

	"github.com/detourbot/detour/classify"
)

// failureOutcome is the outcome label of a failure: its reason, with the
// timeout family split by HTTP status (a 500 is server_error, never timeout).
func failureOutcome(r classify.Reason, status int) string {
	if r == "" {
		r = classify.ReasonUnclassified
	}
	return classify.Outcome(r, status)
}

// statusLabels are the HTTP statuses providers answer often enough to name;
// any other status is counted by its class, so the label has at most 24
// values whatever a provider sends.
var statusLabels = map[int]bool{
	400: true, 401: true, 402: true, 403: true, 404: true, 408: true, 409: true, 413: true,
	422: true, 429: true, 500: true, 502: true, 503: true, 504: true, 520: true, 524: true, 529: true,
}

// StatusLabel is the status label of a failed call: a common status as its
// number ("500"), any other by its class ("4xx", "5xx", "2xx" for a stream
// that broke after its headers, "other"), "none" when no HTTP answer came.
func StatusLabel(status int) string {
	switch {
	case status <= 0:
		return "none"
	case statusLabels[status]:
		return strconv.Itoa(status)
	case status >= 200 && status <= 599:
		return strconv.Itoa(status/100) + "xx"
	}
	return "other"
}
