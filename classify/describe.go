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
	switch r {
	case ReasonRateLimit:
		return "rate limit"
	case ReasonOverloaded:
		return "overloaded"
	case ReasonBilling:
		return "out of credits"
	case ReasonAuth:
		if status == 403 {
			return "access denied"
		}
		return "invalid API key"
	case ReasonAuthPermanent:
		return "revoked key"
	case ReasonTimeout:
		return describeTimeout(status)
	case ReasonIdleTimeout:
		return "stalled (no output)"
	case ReasonConsecutiveTimeout:
		return "kept failing"
	case ReasonModelNotFound:
		return "model not found"
	case ReasonFormat:
		return "invalid request"
	case ReasonContextOverflow:
		return "context too long"
	case ReasonContextWindow:
		return "context window too small"
	case ReasonImageInput:
		return "does not take images"
	case ReasonContentFilter:
		return "blocked by content filter"
	case ReasonAborted:
		return "cancelled"
	case ReasonEmptyResponse:
		return "empty response"
	case ReasonNoErrorDetails:
		return "error without details"
	case ReasonRefusedResponse:
		return "response refused by detour"
	case ReasonLocal:
		return "detour's own failure, not the provider's"
	case ReasonUnclassified, "":
		if status >= 400 && status <= 599 {
			return "unknown error (HTTP " + strconv.Itoa(status) + ")"
		}
		return "unknown error"
	}
	return strings.ReplaceAll(string(r), "_", " ")
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
