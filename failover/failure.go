// Package failover is detour's failover engine: it rotates auth profiles, keeps
// durable cooldowns, walks candidate chains and bounds every run. Failures come
// classified by package classify; failover imports nothing else of the project
// and no chat, HTTP or database library, so its decisions are tested in
// microseconds with a fake clock.
package failover

import (
	"fmt"
	"time"

	"github.com/detourbot/detour/classify"
)

// Failure is one classified attempt failure: classify's result plus who failed.
// It is also an error, so the LLM client returns it from an attempt and the
// engine finds it with errors.As.
type Failure struct {
	Reason     classify.Reason
	Class      classify.Class
	Status     int           // HTTP status; 0 when there was no response, classify.StatusUnknown for a skip
	Code       string        // provider error code or type, when given
	Message    string        // short preview of the provider's message; whoever fills it redacts it (the LLM client does)
	RetryAfter time.Duration // what the provider asked us to wait (0 = not stated)
	RecoveryAt time.Time     // when the provider said it recovers (zero = not stated), as stated
	Idle       bool          // the failure was an idle stream (no chunk for idle_seconds), R5/R8
	// NotRequestFault: the failure's words do not point at the request itself
	// (classify.RequestFault is false), so a format failure may try another
	// provider once (C13). The zero value keeps C9: surface.
	NotRequestFault bool
	Provider        string
	Model           string
	Profile         string // profile id, never a secret
}

// FailureFrom builds a Failure from classify's verdict, for the LLM client,
// which fills in who failed (Provider, Model, Profile) and redacts Message.
func FailureFrom(r classify.Verdict) Failure {
	return Failure{Reason: r.Reason, Class: r.Class, Status: r.Status, Code: r.Code, Message: r.Message,
		RetryAfter: r.RetryAfter, RecoveryAt: r.RecoveryAt, Idle: r.Idle, NotRequestFault: !classify.RequestFault(r)}
}

// Error renders the failure without any secret. It names the failure as the
// metrics and `bot history` count it (classify.Outcome: a 500 is a
// server_error, never a timeout), with its HTTP status.
func (f *Failure) Error() string {
	s := classify.Outcome(f.Reason, f.Status)
	if f.Status > 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	if f.Message != "" {
		s += ": " + f.Message
	}
	return s
}

// Describe names the failure in plain words for people (classify.Describe,
// "stalled (no output)" for an idle stream, and what was refused for a refused
// response: "response refused by detour: HTTP 307 redirect to https://host/…").
func (f *Failure) Describe() string {
	switch {
	case f.Idle && f.Reason == classify.ReasonTimeout:
		return classify.Describe(classify.ReasonIdleTimeout, f.Status)
	case f.Reason == classify.ReasonRefusedResponse && f.Message != "":
		return classify.Describe(f.Reason, f.Status) + ": " + f.Message // A2: the LLM client's words, without secrets
	}
	return classify.Describe(f.Reason, f.Status)
}

// LiveSwitchError says the user switched the session's model while the run
// went on (O4): Controller.BeforeCall returns it before a paid call, or an
// attempt returns it. The engine jumps straight to To when it is a later
// candidate of the chain (O6); otherwise the run ends with this error and the
// caller starts the turn again on the user's choice.
type LiveSwitchError struct{ To ModelRef }

func (e *LiveSwitchError) Error() string { return "live model switch to " + string(e.To) }
