package health

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detourbot/detour/classify"
)

// Words are a state's plain words.
func Words(state string) string {
	switch state {
	case CoolingDown:
		return "cooling down"
	case Down:
		return "down, checking"
	}
	return state
}

// Clock is t as the board shows it: the time of day, with the date when it is
// not on the day of now.
func Clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04 UTC")
	}
	return t.Format("Jan 2 15:04 UTC")
}

// Span is d in short words: "45s", "12m", "3h05m".
func Span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// Reason is a reason code in plain words ("rate limit", "out of credits").
func Reason(r string) string {
	if r == "" {
		return ""
	}
	// The board keeps no HTTP status: a server error and a connection that
	// never answered share the timeout reason (C6), so neither is claimed.
	return classify.Describe(classify.Reason(r), classify.StatusUnknown)
}

// Detail is what follows a state: until when, why, the checks of a provider
// that is down.
func (v ProviderView) Detail(now time.Time) string {
	var parts []string
	if v.State == Down {
		if !v.NextCheckAt.IsZero() {
			parts = append(parts, "next check "+Clock(v.NextCheckAt, now))
		}
		if !v.CheckedAt.IsZero() {
			parts = append(parts, "checked "+Clock(v.CheckedAt, now))
		}
		if v.FailedChecks > 0 {
			parts = append(parts, Count(int64(v.FailedChecks), "failed check"))
		}
	} else if !v.CheckedAt.IsZero() {
		parts = append(parts, "checked "+Clock(v.CheckedAt, now))
	}
	if v.Reason != "" {
		parts = append(parts, Reason(v.Reason))
	}
	return strings.Join(parts, "; ")
}

// Detail is what follows a model's state.
func (m ModelView) Detail(now time.Time) string {
	s := until(m.Until, m.Reason, "", now)
	if !m.CheckedAt.IsZero() {
		s = strings.TrimPrefix(s+"; checked "+Clock(m.CheckedAt, now), "; ")
	}
	return s
}

// Detail is what follows a key's state.
func (k KeyView) Detail(now time.Time) string {
	s := until(k.Until, k.Reason, k.Model, now)
	if k.State == Answering && !k.LastUsed.IsZero() {
		s = "last used " + Clock(k.LastUsed, now)
	}
	return s
}

func until(t time.Time, reason, model string, now time.Time) string {
	var parts []string
	if !t.IsZero() {
		parts = append(parts, "until "+Clock(t, now))
	}
	if reason != "" {
		parts = append(parts, Reason(reason))
	}
	if model != "" {
		parts = append(parts, "for "+model)
	}
	return strings.Join(parts, "; ")
}

// Line is an event in plain words, without its time.
func (e Event) Line() string {
	var s string
	switch e.Kind {
	case FallbackStarted:
		s = fmt.Sprintf("fallback %s → %s", e.From, e.To)
		if e.Reason != "" {
			s += " (" + Reason(e.Reason) + ")"
		}
	case FallbackCleared:
		s = "fallback cleared: back on " + e.To
		if e.From != "" {
			s += " (was " + e.From + ")"
		}
	case AllDown:
		s = "all models unavailable for " + Span(time.Duration(e.Seconds)*time.Second)
		if e.Ongoing {
			s = "all models unavailable, " + Span(time.Duration(e.Seconds)*time.Second) + " so far"
		}
	case KeyDisabled:
		who := "a key of " + e.Provider
		if e.Key != "" {
			who = "key " + e.Key
		}
		s = who + " disabled (" + Reason(e.Reason) + ")"
	default:
		s = e.Kind
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" ×%d", e.Count)
	}
	return s
}

// Text writes the board for a terminal. Every name in it comes from the
// configuration or the database: the caller strips terminal controls
// (termsafe) when the writer is a terminal.
func Text(w io.Writer, b Board) error {
	now := b.At
	view := "everyone's view"
	if b.Admin {
		view = "admin view"
	}
	var out strings.Builder
	fmt.Fprintf(&out, "detour health at %s (%s)\n", b.At.Format("2006-01-02 15:04:05 UTC"), view)
	if b.AllDown != nil {
		s := "ALL MODELS UNAVAILABLE"
		if !b.AllDown.Since.IsZero() {
			s += fmt.Sprintf(" since %s (%s)", Clock(b.AllDown.Since, now), Span(now.Sub(b.AllDown.Since)))
		}
		out.WriteString(s + "\n")
	}
	out.WriteString("\n")
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER / MODEL / KEY\tSTATE\tDETAIL")
	for _, p := range b.Providers {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, Words(p.State), p.Detail(now))
		for _, m := range p.Models {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Ref, Words(m.State), m.Detail(now))
		}
		for _, k := range p.Keys {
			fmt.Fprintf(tw, "  key %s\t%s\t%s\n", k.ID, Words(k.State), k.Detail(now))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	out.WriteString("\nActive fallbacks\n")
	if len(b.Fallbacks) == 0 {
		out.WriteString("  none\n")
	}
	for _, f := range b.Fallbacks {
		fmt.Fprintf(&out, "  %s → %s", f.From, f.To)
		if f.Reason != "" {
			fmt.Fprintf(&out, " (%s)", Reason(f.Reason))
		}
		fmt.Fprintf(&out, ": %s", Count(int64(f.Count), "session"))
		if !f.Since.IsZero() {
			fmt.Fprintf(&out, " since %s", Clock(f.Since, now))
		}
		if len(f.Sessions) > 0 {
			fmt.Fprintf(&out, " [%s]", strings.Join(f.Sessions, ", "))
		}
		out.WriteString("\n")
	}
	out.WriteString("\nLast 24 h\n")
	if len(b.Timeline) == 0 {
		out.WriteString("  nothing happened\n")
	}
	for _, e := range b.Timeline {
		fmt.Fprintf(&out, "  %s  %s\n", Clock(e.At, now), e.Line())
	}
	if b.Omitted > 0 {
		fmt.Fprintf(&out, "  … %d earlier\n", b.Omitted)
	}
	if t := b.Today; t != nil {
		fmt.Fprintf(&out, "\nToday (%s UTC): %s, %d tokens in, %d out, $%.2f\n", t.Day, Count(t.Calls, "call"), t.TokensIn, t.TokensOut, t.USD)
		for _, m := range t.Models {
			fmt.Fprintf(&out, "  %s: %s, $%.2f\n", m.Model, Count(m.Calls, "call"), m.USD)
		}
	}
	lines := strings.SplitAfter(out.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \n") + l[len(strings.TrimRight(l, "\n")):]
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}

// Count is n things, singular for one: "1 call", "2 calls".
func Count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
