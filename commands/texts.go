package commands

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/detourbot/detour/when"
)

// The answers below are read by people in a chat: they say why in plain words
// ("the configured default", "your choice", "falling back from X because ...")
// and never use the spec's vocabulary (selection sources, rule ids).

// whySelected says in plain words why a conversation uses its selected model;
// source is the selection source (default, agent, user, legacy, auto, cron).
func whySelected(source, agent string) string {
	switch source {
	case "user", "legacy":
		return "your choice: if it fails you see the failure, no other model answers instead; /model default goes back"
	case "agent":
		if agent != "" {
			return "the model of agent " + agent
		}
		return "the model configured for this channel"
	case "cron":
		return "the model of a scheduled job"
	}
	return "the configured default"
}

// ModelChoice is what /model without argument shows.
type ModelChoice struct {
	Selected string // model the session selected
	Source   string // default | agent | auto | user | legacy
	Agent    string // the agent's id when Source is agent
	Active   string // model answering when it differs (a fallback)
	// Reason is why the fallback answers (plain words, e.g. "rate limit").
	Reason  string
	Profile string // pinned / chosen profile id, if any
	// Configured lists the models people can choose, Aliases their aliases.
	Configured []string
	Aliases    map[string][]string
}

// withAliases renders a model and its aliases: "p/m (alias fast)".
func withAliases(ref string, aliases []string) string {
	switch len(aliases) {
	case 0:
		return ref
	case 1:
		return ref + " (alias " + aliases[0] + ")"
	}
	return ref + " (aliases " + strings.Join(aliases, ", ") + ")"
}

// fallbackLine is the N5 line for a conversation a fallback answers.
func fallbackLine(active, selected, reason string) string {
	s := fmt.Sprintf("active fallback: %s answers now, falling back from %s", active, selected)
	if reason != "" {
		s += " because it failed: " + reason
	}
	return s
}

// ModelText renders /model without argument.
func ModelText(m ModelChoice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: %s (%s)", m.Selected, whySelected(m.Source, m.Agent))
	if m.Profile != "" {
		fmt.Fprintf(&b, ", key %s", m.Profile)
	}
	if m.Active != "" && m.Active != m.Selected {
		b.WriteString("\n" + fallbackLine(m.Active, m.Selected, m.Reason))
	}
	if len(m.Configured) > 0 {
		names := make([]string, len(m.Configured))
		for i, c := range m.Configured {
			names[i] = withAliases(c, m.Aliases[c])
		}
		fmt.Fprintf(&b, "\nchoose with /model <model or alias>: %s", strings.Join(names, ", "))
	}
	b.WriteString("\n/model default goes back to the configured model")
	return b.String()
}

// ModelEntry is one model people can choose.
type ModelEntry struct {
	Ref     string
	Aliases []string
}

// ModelList is what /models (and /model list) shows.
type ModelList struct {
	Models []ModelEntry
	// Allow holds the patterns of further models people may choose (openai/*).
	Allow    []string
	Default  string // the configured model of this conversation
	Selected string // the model this conversation selected
}

// ModelsText renders /models.
func ModelsText(l ModelList) string {
	var b strings.Builder
	b.WriteString("models you can choose with /model <model or alias>:")
	if len(l.Models) == 0 {
		b.WriteString("\n  (none listed)")
	}
	for _, m := range l.Models {
		b.WriteString("\n  " + withAliases(m.Ref, m.Aliases))
		var tags []string
		if m.Ref == l.Default {
			tags = append(tags, "the configured default")
		}
		if m.Ref == l.Selected && l.Selected != l.Default {
			tags = append(tags, "selected here")
		}
		if len(tags) > 0 {
			b.WriteString(" — " + strings.Join(tags, ", "))
		}
	}
	if len(l.Allow) > 0 {
		fmt.Fprintf(&b, "\nalso any model matching %s", strings.Join(l.Allow, ", "))
	}
	b.WriteString("\n/model default goes back to the configured model")
	return b.String()
}

// StatusLine is one model's line in /status.
type StatusLine struct {
	Model   string
	Profile string // profile id ("" for providers without credentials)
	// State is "ok", "cooldown", "disabled" or "unknown".
	State    string
	Until    time.Time
	Reason   string // short human reason
	Recovery time.Time
}

// StatusInfo is everything /status shows (N5).
type StatusInfo struct {
	Session        string
	Selected       string // selected model
	Source         string // why it is selected: default | agent | user | legacy | cron
	Agent          string // the agent's id when Source is agent
	Active         string // active fallback, when it differs from Selected
	FallbackReason string // plain words, e.g. "rate limit"
	Profile        string // profile in use
	ProfileSource  string // auto | user
	Candidates     []StatusLine
	// Next is the order the next turn tries the models in.
	Next []string
	// Back is when each model of Next that cannot answer now is usable
	// again, as the all-failed error (V3) and the admin report (V4) say it;
	// a model absent from it is usable now.
	Back         map[string]time.Time
	LastProbe    time.Time // last re-try of the selected model (S3)
	NextProbe    time.Time // next re-try, when on a fallback
	PaidCalls    int
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the session's estimated cost, shown when Priced (some model
	// of the configuration has prices).
	CostUSD float64
	Priced  bool
	// ContextTokens estimates the history and system prompt the next turn
	// sends; ContextWindow is the answering model's window (0 = unknown).
	ContextTokens int
	ContextWindow int
	HistoryTurns  int
	Compactions   int
	// Summaries is how many summaries the conversation paid for (R16).
	Summaries int
	// Summarised: the history holds a summary of dropped turns (R16);
	// Earlier: it holds the thread's earlier messages (H2).
	Summarised bool
	Earlier    bool
	// Images says where a message with images goes (I5).
	Images string
	Now    time.Time
}

func ts(t, now time.Time) string {
	t = t.UTC()
	if t.Year() == now.UTC().Year() && t.YearDay() == now.UTC().YearDay() {
		return t.Format("15:04:05 UTC")
	}
	return t.Format("2006-01-02 15:04 UTC")
}

// clock renders a moment people wait for, with how far away it is, as every
// other text of the bot writes it (when.At): "14:04:31 UTC (in 28 s)".
func clock(t, now time.Time) string { return when.At(t, now) }

// In renders a wait in words: "in 28 s", "in 4 min", "in 2 h 5 min", "in 3
// days"; "now" when it is over (when.In).
func In(d time.Duration) string { return when.In(d) }

// Thousands writes n with a comma every three digits: 128,000.
func Thousands(n int64) string { return thousands(n) }

// thousands writes n with a comma every three digits: 128,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// usd renders an estimated cost.
func usd(v float64) string {
	switch {
	case v <= 0:
		return "$0"
	case v < 0.0001:
		return "less than $0.0001"
	case v < 1:
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// StatusText renders /status.
func StatusText(s StatusInfo) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	// Which models are out of use, for the first lines, the order line and
	// the cooldown list: a model none of whose keys is usable, or one the
	// engine would not call before a moment still ahead (Back).
	usable := map[string]bool{}
	for _, c := range s.Candidates {
		if c.State == "ok" {
			usable[c.Model] = true
		}
	}
	blocked := func(m string) bool {
		_, later := s.Back[m]
		return later || (!usable[m] && hasModel(s.Candidates, m))
	}
	// none: no model of the next turn can answer now; first: when the first
	// of them can again (zero: not known).
	none := len(s.Next) > 0
	var first time.Time
	for _, m := range s.Next {
		if !blocked(m) {
			none = false
			break
		}
		if at := s.Back[m]; !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}

	onFallback := s.Active != "" && s.Active != s.Selected
	switch {
	case onFallback:
		line("selected model: %s (%s)", s.Selected, whySelected(s.Source, s.Agent))
		if none || blocked(s.Active) {
			// Not "answers now": it cools down (the order line says who does).
			line("active fallback: %s, falling back from %s because it failed: %s", s.Active, s.Selected, s.FallbackReason)
		} else {
			line("%s", fallbackLine(s.Active, s.Selected, s.FallbackReason))
		}
		switch {
		case !s.NextProbe.IsZero() && s.NextProbe.After(s.Now):
			line("%s gets another try on the first turn after %s", s.Selected, clock(s.NextProbe, s.Now))
		default:
			line("%s gets another try on the next turn", s.Selected)
		}
	case none || blocked(s.Selected):
		// It does not answer now: the order line says who does.
		line("selected model: %s (%s)", s.Selected, whySelected(s.Source, s.Agent))
	default:
		line("selected model: %s (%s), answering now", s.Selected, whySelected(s.Source, s.Agent))
	}
	if none {
		switch {
		case first.IsZero():
			line("no model can answer now: every one is cooling down")
		default:
			line("no model can answer now: every one is cooling down; the first is usable again at %s", clock(first, s.Now))
		}
	}

	if len(s.Next) > 0 {
		parts := make([]string, len(s.Next))
		for i, m := range s.Next {
			parts[i] = m
			if blocked(m) {
				parts[i] += " (cooling down)"
			}
		}
		if len(parts) == 1 {
			line("next turn tries: %s only", parts[0])
		} else {
			line("next turn tries: %s", strings.Join(parts, ", then "))
		}
	}

	var cool []string
	for _, c := range s.Candidates {
		if c.State == "ok" {
			continue
		}
		who := c.Model
		if c.Profile != "" {
			who += " (key " + c.Profile + ")"
		}
		what := c.Reason
		if what == "" {
			what = "failing"
		}
		switch c.State {
		case "disabled":
			what += ", switched off"
		case "unknown":
			what = "state unknown"
		}
		if !c.Until.IsZero() {
			if c.State != "disabled" {
				what += ","
			}
			what += " until " + clock(c.Until, s.Now)
		}
		if !c.Recovery.IsZero() {
			what += "; the provider said it recovers at " + ts(c.Recovery, s.Now)
		}
		cool = append(cool, "  "+who+": "+what)
	}
	if len(cool) == 0 {
		line("cooling down: nothing")
	} else {
		line("cooling down:")
		for _, c := range cool {
			line("%s", c)
		}
	}

	if s.Profile != "" {
		switch s.ProfileSource {
		case "user":
			line("key in use: %s (your choice: only this key is used)", s.Profile)
		default:
			line("key in use: %s (picked automatically; another key of the provider takes over if it fails)", s.Profile)
		}
	}

	use := fmt.Sprintf("this conversation: %d paid call(s); %s tokens in, %s out", s.PaidCalls, thousands(s.InputTokens), thousands(s.OutputTokens))
	if s.Priced {
		use += "; estimated cost " + usd(s.CostUSD)
	}
	use += fmt.Sprintf("; %d turn(s) in history", s.HistoryTurns)
	if s.Compactions > 0 {
		use += fmt.Sprintf(", shortened %d time(s) to fit", s.Compactions)
		if s.Summarised {
			use += " (what was dropped is kept as a summary)"
		}
	}
	if s.Summaries > 0 {
		use += fmt.Sprintf("; %d summary call(s) paid for so far", s.Summaries)
	}
	line("%s", use)
	if s.Earlier {
		line("the thread's earlier messages are part of the context")
	}
	if s.Images != "" {
		line("%s", s.Images)
	}
	if s.ContextWindow > 0 {
		pct := float64(s.ContextTokens) * 100 / float64(s.ContextWindow)
		line("context: about %s of %s tokens (%s)", thousands(int64(s.ContextTokens)), thousands(int64(s.ContextWindow)), percent(pct))
	} else {
		line("context: about %s tokens (the model's window is not configured)", thousands(int64(s.ContextTokens)))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func percent(p float64) string {
	switch {
	case p > 0 && p < 1:
		return "under 1%"
	case p > 100:
		return "more than the window"
	}
	return fmt.Sprintf("%.0f%%", p)
}

func hasModel(lines []StatusLine, m string) bool {
	for _, l := range lines {
		if l.Model == m {
			return true
		}
	}
	return false
}
