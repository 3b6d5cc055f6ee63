// Package when writes the moments people wait for, and how far away they are,
// in one way for every text of detour: /status, /usage, the message a user
// gets when no model answered (V3), the admin's report (V4) and the daily
// budget's refusal (T6). One formatter, so no two of them name the same
// moment differently.
package when

import (
	"fmt"
	"time"
)

// At renders the moment t, seen at now, with how far away it is: "14:04:31 UTC
// (in 28 s)", "14:05 UTC (in 5 min)", "2026-03-02 00:00 UTC (in 10 h)". The
// moment is never shown earlier than it is: seconds are shown when t is not on
// the minute, and a fraction of a second counts as the next second. A moment
// that is not ahead has no "in" part.
func At(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if f := t.Truncate(time.Second); f.Before(t) {
		t = f.Add(time.Second)
	}
	layout := "15:04"
	if t.Year() != now.Year() || t.YearDay() != now.YearDay() {
		layout = "2006-01-02 15:04"
	}
	if t.Second() != 0 {
		layout += ":05"
	}
	s := t.Format(layout) + " UTC"
	if d := t.Sub(now); d > 0 {
		s += " (" + In(d) + ")"
	}
	return s
}

// In renders a wait in words, rounded up so it never ends before the moment:
// "in 28 s", "in 4 min", "in 2 h 5 min", "in 3 days"; "now" when it is over.
func In(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	if d < time.Minute {
		return fmt.Sprintf("in %d s", int((d+time.Second-1)/time.Second))
	}
	m := int((d + time.Minute - 1) / time.Minute)
	switch {
	case m < 60:
		return fmt.Sprintf("in %d min", m)
	case m < 48*60 && m%60 == 0:
		return fmt.Sprintf("in %d h", m/60)
	case m < 48*60:
		return fmt.Sprintf("in %d h %d min", m/60, m%60)
	}
	return fmt.Sprintf("in %d days", int((d+24*time.Hour-1)/(24*time.Hour)))
}
