// Package failover is detour's failover engine: it classifies provider failures,
// rotates auth profiles, keeps durable cooldowns, walks candidate chains and bounds
// every run. It imports nothing else of the project and no chat or HTTP library, so
// its decisions are tested in microseconds with a fake clock.
package failover

import (
	"errors"
	"fmt"
	"time"
)

// Reason is why one attempt failed (SPEC section 1).
type Reason string

// The closed set of failure reasons.
const (
	ReasonRateLimit       Reason = "rate_limit"
	ReasonOverloaded      Reason = "overloaded"
	ReasonBilling         Reason = "billing"
	ReasonAuth            Reason = "auth"
	ReasonAuthPermanent   Reason = "auth_permanent"
	ReasonTimeout         Reason = "timeout"
	ReasonModelNotFound   Reason = "model_not_found"
	ReasonFormat          Reason = "format"
	ReasonContextOverflow Reason = "context_overflow"
	ReasonContentFilter   Reason = "content_filter"
	ReasonAborted         Reason = "aborted"
	ReasonEmptyResponse   Reason = "empty_response"
	ReasonNoErrorDetails  Reason = "no_error_details"
	ReasonUnclassified    Reason = "unclassified"
)

// Reasons used by the run loop for its own stops and skips, never by Classify.
const (
	ReasonConsecutiveTimeout Reason = "consecutive_timeout" // R7
	ReasonContextWindow      Reason = "context_window"      // B7 skip
	ReasonIdleTimeout        Reason = "idle_timeout"        // detail of a timeout from an idle stream
)

// Class says whether waiting can help (SPEC section 1).
type Class string

// Failure classes.
const (
	ClassTransient     Class = "transient"
	ClassDeterministic Class = "deterministic"
	ClassUnknown       Class = "unknown"
)

// Failure is one classified attempt failure. It is also an error, so the LLM
// client returns it from an attempt and the engine finds it with errors.As.
type Failure struct {
	Reason     Reason
	Class      Class
	Status     int           // HTTP status; 0 when there was no response
	Code       string        // provider error code or type, when given
	Message    string        // short preview of the provider's message, secrets redacted
	RetryAfter time.Duration // what the provider asked us to wait (0 = not stated)
	RecoveryAt time.Time     // when the provider said it recovers (zero = not stated), as stated
	Idle       bool          // the failure was an idle stream (no chunk for idle_seconds), R5/R8
	Provider   string
	Model      string
	Profile    string // profile id, never a secret
}

// Error renders the failure without any secret.
func (f *Failure) Error() string {
	s := string(f.Reason)
	if f.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	if f.Message != "" {
		s += ": " + f.Message
	}
	return s
}

// Response is everything Classify may look at (SPEC C12).
type Response struct {
	Provider string            // provider id from config (openai, openrouter, ...)
	Status   int               // HTTP status; 0 = no HTTP response
	Headers  map[string]string // response headers; keys matched case-insensitively
	Body     string            // raw body, or SSE event text for mid-stream errors
	Stream   bool              // the failure arrived after the stream started
	Err      error             // transport or caller error (may be nil)
}

// Transport conditions the LLM client reports through Response.Err; Classify
// recognises them with errors.Is.
var (
	// ErrIdleTimeout: no stream chunk (or no first byte) for the idle timeout.
	ErrIdleTimeout = errors.New("stream idle timeout")
	// ErrAttemptTimeout: the per-attempt deadline passed (R10).
	ErrAttemptTimeout = errors.New("attempt timeout")
	// ErrEmptyOutput: the call succeeded but produced no usable text (R13).
	ErrEmptyOutput = errors.New("empty response")
)

// LiveSwitchError is returned by an attempt when the user switched the session's
// model while it ran (O4). The engine jumps straight to To when it is a later
// candidate of the chain (O6); otherwise the run ends with this error and the
// caller starts the turn again on the user's choice.
type LiveSwitchError struct{ To ModelRef }

func (e *LiveSwitchError) Error() string { return "live model switch to " + string(e.To) }
