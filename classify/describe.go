package classify

import (
	"strconv"
	"strings"
)

// StatusUnknown tells Describe that the HTTP status was not kept (a cooldown
// read back from the state store), as opposed to 0, no response at all.
const StatusUnknown = -1

// Describe names what happened in plain words for people (notices, /status, user
// errors, admin reports): "server error (HTTP 503)", "overloaded", "out of
// credits", "rate limit", "invalid API key", "revoked key", "timed out", "model
// not found", "context too long". A reason of the timeout family that came with
// a 5xx is a server error, never "timed out".
func Describe(r Reason, status int) string {
	switch {
	case r == ReasonAuth && status == 403:
		return "access denied"
	case r == ReasonTimeout:
		return describeTimeout(status)
	case (r == ReasonUnclassified || r == "") && status >= 400 && status <= 599:
		return "unknown error (HTTP " + strconv.Itoa(status) + ")"
	}
	if w, ok := plainWords[r]; ok {
		return w
	}
	return strings.ReplaceAll(string(r), "_", " ")
}

var plainWords = map[Reason]string{
	ReasonRateLimit: "rate limit", ReasonOverloaded: "overloaded", ReasonBilling: "out of credits",
	ReasonAuth: "invalid API key", ReasonAuthPermanent: "revoked key", ReasonIdleTimeout: "stalled (no output)",
	ReasonConsecutiveTimeout: "kept failing", ReasonModelNotFound: "model not found", ReasonFormat: "invalid request",
	ReasonContextOverflow: "context too long", ReasonContextWindow: "context window too small",
	ReasonImageInput: "does not take images", ReasonContentFilter: "blocked by content filter", ReasonAborted: "cancelled",
	ReasonEmptyResponse: "empty response", ReasonNoErrorDetails: "error without details",
	ReasonRefusedResponse: "response refused by detour", ReasonLocal: "detour's own failure, not the provider's",
	ReasonUnclassified: "unknown error", "": "unknown error",
}

// describeTimeout words the timeout family (C6) by what the status says.
func describeTimeout(status int) string {
	switch {
	case status >= 500 && status <= 599:
		return "server error (HTTP " + strconv.Itoa(status) + ")"
	case status == 408:
		return "timed out (HTTP 408)"
	case status >= 400 && status <= 499:
		return "request failed (HTTP " + strconv.Itoa(status) + ")"
	case status > 0:
		return "stream broke off" // the failure came after a 2xx: mid-stream
	case status == 0:
		return "timed out or unreachable"
	}
	return "timed out or server error" // StatusUnknown
}
