// Package notices holds every user- and admin-facing status text of detour: the
// fallback and fallback-cleared notices (N1, N2), the once-per-state-change decision
// (N3), the audience filter (B4), the user message when every model failed (V3) and
// the admin all-models-unavailable report (V4). Everything here is pure.
package notices

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/redact"
	"github.com/detourbot/detour/when"
)

// Prefix starts every notice line; the console and tests recognise notices by it.
const Prefix = "↪️ "

// Fallback is the N1 notice: the session moved to an automatic fallback. The
// reason is said in plain words (classify.Describe): "server error (HTTP 503)",
// "out of credits".
func Fallback(fallback, primary string, reason classify.Reason, status int) string {
	return fmt.Sprintf("%smodel fallback: %s (selected %s; %s)", Prefix, fallback, primary, classify.Describe(reason, status))
}

// Cleared is the N2 notice: the session is back on its selected model.
func Cleared(primary, fallback string) string {
	return fmt.Sprintf("%smodel fallback cleared: %s (was %s)", Prefix, primary, fallback)
}

// State is the persisted notice state of one session: which model was selected,
// which one actually answered last, and why they differ.
type State struct {
	Selected string // "provider/model" the session selected (the fallback's origin)
	Active   string // "provider/model" that answered the last turn
	Reason   classify.Reason
	Status   int // HTTP status of the failure behind Reason (0 = none), for its plain words
	// Words, when set, say the failure in plain words instead of Reason's: what
	// detour refused (A2), known only in the turn that fell back; never stored.
	Words string
}

// OnFallback reports whether the state says the session is answered by a fallback.
func (s State) OnFallback() bool { return s.Active != "" && s.Selected != "" && s.Active != s.Selected }

// ForChange returns the notice to post when the notice state moves from prev to next,
// or "" when nothing changed worth announcing (N3). It is a pure function: a turn
// that stays on the same fallback announces nothing; a move to a different fallback
// announces the new one; a return to the selected model announces the clear.
func ForChange(prev, next State) string {
	switch {
	case next.OnFallback():
		if prev.OnFallback() && prev.Selected == next.Selected && prev.Active == next.Active {
			return ""
		}
		if next.Words != "" {
			return fmt.Sprintf("%smodel fallback: %s (selected %s; %s)", Prefix, next.Active, next.Selected, next.Words)
		}
		return Fallback(next.Active, next.Selected, next.Reason, next.Status)
	case prev.OnFallback():
		// Back on a selected model. The clear names the model that answers now.
		now := next.Active
		if now == "" {
			now = next.Selected
		}
		if now == "" || now == prev.Active {
			return ""
		}
		return Cleared(now, prev.Active)
	}
	return ""
}

// Audience values (B4, notices.users).
const (
	AudienceAll        = "all"
	AudienceDirectOnly = "direct_only"
	AudienceOff        = "off"
)

// Deliver reports whether a fallback / cleared notice goes to the user's conversation
// under the configured audience (B4); direct is whether the conversation is a DM.
// An unknown or empty audience means "all".
func Deliver(audience string, direct bool) bool {
	switch audience {
	case AudienceOff:
		return false
	case AudienceDirectOnly:
		return direct
	}
	return true
}

// FormatTime renders a recovery or retry time for people as /status and every
// other text writes it (when.At): "14:00:30 UTC (in 30 s)", "2026-08-25 01:37
// UTC (in 11 h)".
func FormatTime(t, now time.Time) string { return when.At(t, now) }

// lastFailures returns the last failure of every model attempted, in first-attempt order.
func lastFailures(attempts []failover.AttemptRecord) (order []string, last map[string]failover.AttemptRecord) {
	last = map[string]failover.AttemptRecord{}
	for _, a := range attempts {
		ref := a.Candidate.Ref()
		if a.Failure == nil && a.Skipped == "" {
			continue
		}
		if _, ok := last[ref]; !ok {
			order = append(order, ref)
		}
		prev, seen := last[ref]
		// A real failure is more telling than a later skip of the same model.
		if seen && prev.Failure != nil && a.Failure == nil {
			continue
		}
		last[ref] = a
	}
	return order, last
}

// recordWords says in plain words why a model gave no answer: its failure, or
// the reason it was skipped (whose status is not kept).
func recordWords(a failover.AttemptRecord) string {
	if a.Failure != nil {
		return a.Failure.Describe()
	}
	return classify.Describe(a.Skipped, classify.StatusUnknown)
}

// UserFailure is the one clear message a user gets when no candidate answered (V3),
// built from the engine's summary: which models, why, and the earliest retry time.
func UserFailure(s *failover.SummaryError, now time.Time) string {
	if s == nil {
		return "no model could answer; please try again later"
	}
	var stop string
	switch {
	case errors.Is(s.Stop, failover.ErrBreakerTripped):
		stop = "stopped: the model kept stalling without answering, so no further paid call was made"
	case errors.Is(s.Stop, failover.ErrTurnBudget):
		stop = "stopped: this message reached its budget of paid attempts"
	case errors.Is(s.Stop, failover.ErrPaidCallGuard):
		stop = "stopped: too many paid calls this minute across the bot"
	case errors.Is(s.Stop, failover.ErrRunTimeout):
		stop = "stopped: the answer took too long"
	case errors.Is(s.Stop, failover.ErrIterationCap):
		stop = "stopped: too many attempts"
	case errors.Is(s.Stop, failover.ErrUserBudget):
		return redact.Preview(s.Stop.Error(), 300) // says when the allowance comes back
	case s.Stop != nil:
		stop = "stopped: " + redact.Preview(s.Stop.Error(), 200)
	}
	order, last := lastFailures(s.Attempts)
	words := map[string]bool{}
	var parts []string
	for _, ref := range order {
		w := recordWords(last[ref])
		words[w] = true
		parts = append(parts, fmt.Sprintf("%s (%s)", ref, w))
	}
	var b strings.Builder
	switch {
	case stop != "":
		b.WriteString(stop)
		if len(parts) > 0 {
			b.WriteString("; tried " + strings.Join(parts, ", "))
		}
	case len(parts) == 0:
		b.WriteString("no model could answer")
	case len(words) == 1 && len(parts) > 1:
		for w := range words {
			fmt.Fprintf(&b, "all models failed with %s: %s", w, strings.Join(order, ", "))
		}
	case len(parts) == 1:
		w := recordWords(last[order[0]])
		b.WriteString(order[0] + " failed: " + w)
		if f := last[order[0]].Failure; f != nil && f.Message != "" && !strings.Contains(w, f.Message) {
			b.WriteString(" — " + redact.Preview(f.Message, 200))
		}
	default:
		b.WriteString("all models failed: " + strings.Join(parts, ", "))
	}
	if !s.EarliestRetry.IsZero() {
		b.WriteString("; earliest retry " + FormatTime(s.EarliestRetry, now))
	} else if stop == "" {
		b.WriteString("; please try again later")
	}
	return b.String()
}

// FailureText is what a user sees for a terminal failure that is not a chain
// failure (C9 format, content filter, abort, context overflow after compaction).
func FailureText(f *failover.Failure) string {
	if f == nil {
		return "the request failed"
	}
	model := f.Provider + "/" + f.Model
	if f.Provider == "" {
		model = f.Model
	}
	switch f.Reason {
	case classify.ReasonContextOverflow:
		return "this conversation no longer fits the model's context window; use /reset to start over or /model to pick a model with a larger window"
	case classify.ReasonContentFilter:
		return fmt.Sprintf("%s refused to answer (content filter)", model)
	case classify.ReasonAborted:
		return "the request was cancelled"
	}
	w := f.Describe()
	s := fmt.Sprintf("%s failed: %s", model, w)
	if f.Message != "" && !strings.Contains(w, f.Message) {
		s += " — " + redact.Preview(f.Message, 200)
	}
	return s
}

// ReportLine is one model's line in the admin report (V4).
type ReportLine struct {
	Model    string // "provider/model"
	Provider string
	Profile  string // profile id, never a secret
	Reason   classify.Reason
	Status   int       // HTTP status of the failure (classify.StatusUnknown for a skip)
	Error    string    // raw provider message (redacted again when rendered)
	Recovery time.Time // estimated recovery; zero = unknown
	// Down: the provider is down and is checked with the smallest request
	// (E1); Checks failed in a row so far, the next due at NextCheck (E2, E6).
	Down      bool
	Checks    int
	NextCheck time.Time
}

// LinesFromSummary returns one report line per attempted model, with the recovery
// time the provider stated (or implied with Retry-After). The caller may fill
// Recovery from durable cooldown state where the failure carried none.
func LinesFromSummary(s *failover.SummaryError) []ReportLine {
	if s == nil {
		return nil
	}
	order, last := lastFailures(s.Attempts)
	lines := make([]ReportLine, 0, len(order))
	for _, ref := range order {
		a := last[ref]
		l := ReportLine{Model: ref, Provider: a.Candidate.Provider, Profile: a.Candidate.Profile, Reason: a.Skipped, Status: classify.StatusUnknown}
		if f := a.Failure; f != nil {
			l.Reason, l.Status = f.Reason, f.Status
			l.Error = f.Message
			if f.Status != 0 && !strings.Contains(l.Error, fmt.Sprint(f.Status)) {
				l.Error = strings.TrimSpace(fmt.Sprintf("HTTP %d %s", f.Status, l.Error))
			}
		}
		// The engine's own answer to "when is it tried again": the same times the
		// user's message uses, never in the past.
		if u := s.Until[failover.ModelRef(ref)]; u.After(s.At) {
			l.Recovery = u
		}
		if c, ok := s.Checks[a.Candidate.Provider]; ok {
			l.Down, l.Checks, l.NextCheck = true, c.Failed, c.Next
		}
		lines = append(lines, l)
	}
	return lines
}

// NeedsHuman reports whether a reason does not heal by waiting (billing, keys,
// model ids, request format): reports say "unknown, needs a human" for them.
func NeedsHuman(r classify.Reason) bool {
	switch r {
	case classify.ReasonBilling, classify.ReasonAuth, classify.ReasonAuthPermanent, classify.ReasonModelNotFound, classify.ReasonFormat:
		return true
	}
	return false
}

func todo(l ReportLine) string {
	switch l.Reason {
	case classify.ReasonBilling:
		return "top up or raise the spending limit, then /recover " + l.Model
	case classify.ReasonAuth, classify.ReasonAuthPermanent:
		target := l.Model
		if l.Profile != "" {
			target = l.Profile
		}
		return "check or replace the API key, then /recover " + target
	case classify.ReasonModelNotFound:
		return "fix the model id in the config"
	case classify.ReasonRateLimit, classify.ReasonOverloaded:
		return "wait for the reset, or /recover " + l.Model + " to probe now"
	case classify.ReasonRefusedResponse:
		return "check providers." + l.Provider + ".base_url (a redirect, or a compressed or oversized answer; limits.max_response_bytes, max_answer_bytes), then /recover " + l.Model
	case classify.ReasonLocal:
		return "the bot itself failed (file descriptors, memory), not the provider: check the process (ulimit -n, memory)"
	}
	return "/recover " + l.Model + " probes it now"
}

// checks says how the checks of a provider that is down went and when the next
// is due (E6), as a segment of a report line; "" for a provider that is not down.
func checks(l ReportLine, now time.Time) string {
	if !l.Down {
		return ""
	}
	s := fmt.Sprintf(" — checks: %d failed", l.Checks)
	if !l.NextCheck.IsZero() {
		s += ", next " + FormatTime(l.NextCheck, now)
	}
	return s
}

// AdminReport is the V4 all-models-unavailable report: one line per model with its
// provider, failure type, redacted raw error and estimated recovery (or "unknown,
// needs a human"), and what to do.
func AdminReport(lines []ReportLine, session string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "⚠️ all models unavailable (session %s, %s)\n", session, now.UTC().Format("2006-01-02 15:04:05 UTC"))
	var earliest time.Time
	for _, l := range lines {
		var rec string
		switch {
		case NeedsHuman(l.Reason) && !l.Recovery.IsZero():
			rec = "unknown, needs a human (next automatic try " + FormatTime(l.Recovery, now) + ")"
		case NeedsHuman(l.Reason):
			rec = "unknown, needs a human"
		case !l.Recovery.IsZero():
			rec = "estimated " + FormatTime(l.Recovery, now)
		default:
			rec = "unknown (transient; retried automatically)"
		}
		if !l.Recovery.IsZero() && (earliest.IsZero() || l.Recovery.Before(earliest)) {
			earliest = l.Recovery
		}
		errText := redact.Preview(l.Error, 200)
		if errText == "" {
			errText = "-"
		}
		prof := ""
		if l.Profile != "" {
			prof = " profile " + l.Profile + ","
		}
		fmt.Fprintf(&b, "• %s — provider %s,%s %s: %s — recovery: %s%s — do: %s\n",
			l.Model, l.Provider, prof, classify.Describe(l.Reason, l.Status), errText, rec, checks(l, now), todo(l))
	}
	if !earliest.IsZero() {
		fmt.Fprintf(&b, "earliest expected recovery: %s", FormatTime(earliest, now))
	} else {
		b.WriteString("no recovery time known; a person has to act")
	}
	return b.String()
}
