// Package classify turns one failed LLM provider response into a reason, a class
// and a recovery time (docs/behaviour.md section 1, rules C1-C12), and judges
// whether an invalid request's words point at the request (RequestFault, C13).
// It is a pure function of the response and a clock reading and imports nothing
// but the standard library, so every decision is tested on recorded provider
// bodies in microseconds.
//
// Classify reads structure first and words second. Each step is a small table:
//
//  1. transport: the error the client saw when there was no response (our own
//     timeouts, the caller's cancel, a dropped connection);
//  2. fields: the provider's machine-readable fields (error.type, error.code,
//     Google status strings and ErrorInfo reasons, AWS exception names and the
//     x-amzn-errortype header, Azure and Tencent codes, stop reasons), and the
//     numeric codes of providers that have their own (Zhipu, MiniMax, Qianfan:
//     providercodes.go), read only for that provider;
//  3. status: the HTTP status, reconciled with a status number inside the body or
//     stated in the text (a body "code":429 never turns an HTTP 400 or 401 into a
//     rate limit; a gateway's 5xx wrapping an upstream 429 is a rate limit);
//  4. text: the message, matched by families of meaning that are anchored so
//     ordinary prose does not match.
//
// Where steps disagree, decide applies C1 and C2 in one ladder: a field that
// names its failure exactly decides unless the text names a failure that C1 ranks
// higher (deterministic signatures before transient ones); a specific text family
// beats the status (C2); the status beats generic server wording; generic field
// types and the status's default come last. Every Verdict carries the step, the
// rule and the evidence that decided it (Verdict.Why).
package classify

import (
	"errors"
	"time"
)

// Reason is why one attempt failed (docs/behaviour.md section 1).
type Reason string

// Reasons produced by Classify.
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
	// ReasonLocal is a failure on detour's own side, not the provider's: out of
	// file descriptors or memory (A4). Classify returns it for such transport
	// errors; the LLM client and the engine use it for their own cancellations.
	ReasonLocal Reason = "local"
)

// ReasonRefusedResponse is a response detour refused although the provider sent
// it: a redirect, a compressed body it did not ask for, a body, stream line or
// answer over its cap (A2, T1, T2). The LLM client records it; Classify never
// returns it.
const ReasonRefusedResponse Reason = "refused_response"

// Reasons the failover engine records for its own stops and skips; Classify never
// returns them. They live here so that every reason, and its plain words
// (Describe), is in one list.
const (
	ReasonConsecutiveTimeout Reason = "consecutive_timeout" // R7: a model kept failing transiently
	ReasonContextWindow      Reason = "context_window"      // B7: skipped, its window cannot hold the prompt
	ReasonImageInput         Reason = "image_input"         // I5: skipped, it does not take the images of the prompt
	ReasonIdleTimeout        Reason = "idle_timeout"        // detail of a timeout from an idle stream (R5, R8)
)

// Class says whether waiting can help (docs/behaviour.md section 1).
type Class string

// Failure classes.
const (
	ClassTransient     Class = "transient"
	ClassDeterministic Class = "deterministic"
	ClassUnknown       Class = "unknown"
)

// ReasonClass maps a reason to its class (docs/behaviour.md section 1).
func ReasonClass(r Reason) Class {
	switch r {
	case ReasonRateLimit, ReasonOverloaded, ReasonTimeout, ReasonConsecutiveTimeout, ReasonIdleTimeout,
		ReasonRefusedResponse, ReasonLocal:
		return ClassTransient
	case ReasonBilling, ReasonAuth, ReasonAuthPermanent, ReasonModelNotFound, ReasonFormat,
		ReasonContextOverflow, ReasonContentFilter, ReasonAborted, ReasonContextWindow, ReasonImageInput:
		return ClassDeterministic
	}
	return ClassUnknown
}

// Response is everything Classify may look at (C12).
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
	ErrIdleTimeout = errors.New("classify: stream idle timeout")
	// ErrAttemptTimeout: the per-attempt deadline passed (R10).
	ErrAttemptTimeout = errors.New("classify: attempt timeout")
	// ErrEmptyOutput: the call succeeded but produced no usable text (R13).
	ErrEmptyOutput = errors.New("classify: empty response")
)

// MaxMessageRunes bounds Verdict.Message. Callers that show the message cut it
// shorter after redacting, so a secret at the edge is seen whole by the redactor.
const MaxMessageRunes = 400

// Verdict is one classified failure: what Classify decided and why.
type Verdict struct {
	Reason Reason
	Class  Class
	Status int    // HTTP status as given in Response (0 = no response)
	Code   string // the provider's most specific error code or type, when given
	// Message is the provider's message: one line, valid UTF-8, at most
	// MaxMessageRunes runes. It is NOT redacted: Classify knows no secrets, so
	// every caller that logs, shows or stores it redacts it first.
	Message string
	// Param is the request parameter the provider named as the culprit, when it
	// did (OpenAI's error.param, a validation error's loc); see RequestFault.
	Param      string
	RetryAfter time.Duration // what the provider asked us to wait (0 = not stated)
	RecoveryAt time.Time     // when the provider said it recovers (zero = not stated), as stated
	Idle       bool          // the failure was an idle stream (R5, R8)
	Why        Explanation   // which step and rule decided, and on what evidence
}

// Step names the stage of Classify that decided.
type Step string

// The steps, in the order Classify reads them.
const (
	StepTransport Step = "transport" // the client's error, no response
	StepField     Step = "field"     // a machine-readable field of the body or headers
	StepStatus    Step = "status"    // the HTTP status (or a status number in body or text)
	StepText      Step = "text"      // a family of meaning in the message text
	StepDefault   Step = "default"   // nothing matched: empty_response or unclassified
)

// Explanation says why Classify answered what it did. Evidence quotes the input
// unredacted; callers that show it redact it.
type Explanation struct {
	Step     Step
	Rule     string // rule id: "billing/insufficient-funds", "field/overloaded_error", "status/429", ...
	Evidence string // what matched: a phrase of the text, "error.type=overloaded_error", "HTTP 429"
	// Family is the family of meaning that decided ("context-overflow",
	// "model-not-found", ...), "transport" for the client's error, "status" for
	// the HTTP status; "" when nothing matched.
	Family string
	// Field says where the deciding evidence was: a path of the body
	// ("error.code", "base_resp.status_code", "header x-amzn-errortype", for a
	// text family the string it matched in: "error.message", "body",
	// "error.metadata.raw:error.message" inside OpenRouter's raw upstream body),
	// "http status"/"body status"/"text status", "error" or "transport error"
	// for the client's error; "" when nothing matched.
	Field  string
	Status int // the effective status the decision saw (HTTP, body code or stated in text)
	// StatusFrom says where Status came from: "http", "body" or "text" ("" when none).
	StatusFrom string
	Recovery   string // where RetryAfter/RecoveryAt came from: "header retry-after", "text", ...
}

// Classify turns one failed response into a Verdict (C1-C12). It is pure and
// never panics; now is used only to resolve recovery times (C11).
//
// RetryAfter and RecoveryAt describe one recovery signal, the first found of:
// Retry-After / retry-after-ms headers, a wait stated in the text ("try again in
// 18.6s"), a moment stated in the text ("reset at 08-25 01:37:00 UTC"),
// header-like fields in the body, reset fields of the body ("resets_at" epoch
// seconds, "resets_in_seconds", "reset_after"), and, for rate limits only, the
// x-ratelimit-reset-* headers. A wait sets RecoveryAt to now+wait; a moment sets
// RetryAfter to the time left (zero when already passed). Nothing is capped here:
// the engine caps cooldowns.
func Classify(r Response, now time.Time) (res Verdict) {
	defer func() {
		if p := recover(); p != nil { // belt and braces: C12 says never panic
			res = Verdict{Reason: ReasonUnclassified, Class: ClassUnknown, Status: r.Status,
				Why: Explanation{Step: StepDefault, Rule: "internal/recovered"}}
		}
	}()
	return classify(r, now)
}

func classify(r Response, now time.Time) Verdict {
	ev := gather(r)
	d := decide(r, ev)
	if d.step == StepText {
		if f := ev.fieldOf(d.evidence); f != "" {
			d.field = f // the JSON path of the part the family matched in
		}
	}
	res := Verdict{
		Reason:  d.reason,
		Class:   ReasonClass(d.reason),
		Status:  r.Status,
		Code:    ev.code,
		Message: boundMessage(ev.message),
		Param:   ev.param,
		Idle:    d.idle,
		Why: Explanation{Step: d.step, Rule: d.rule, Evidence: boundEvidence(d.evidence),
			Family: d.family, Field: d.field, Status: ev.status.code, StatusFrom: ev.status.from},
	}
	res.RetryAfter, res.RecoveryAt, res.Why.Recovery = recovery(r, ev, d.reason, now)
	return res
}
