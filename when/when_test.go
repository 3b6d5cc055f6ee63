package when

import (
	"testing"
	"time"
)

var now = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// covers V3, V4, N5: one way to write a moment, never earlier than it is.
func TestAt(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(28 * time.Second), "14:00:28 UTC (in 28 s)"},
		{now.Add(97 * time.Second), "14:01:37 UTC (in 2 min)"},
		{now.Add(5 * time.Minute), "14:05 UTC (in 5 min)"},
		{now.Add(1500 * time.Millisecond), "14:00:02 UTC (in 2 s)"}, // a fraction of a second counts as the next one
		{now.Add(5 * time.Hour), "19:00 UTC (in 5 h)"},
		{now.Add(2*time.Hour + 4*time.Minute + 30*time.Second), "16:04:30 UTC (in 2 h 5 min)"},
		{now.Add(10 * time.Hour), "2026-03-02 00:00 UTC (in 10 h)"},
		{now.Add(10*time.Hour + 5*time.Second), "2026-03-02 00:00:05 UTC (in 10 h 1 min)"},
		{now.Add(72 * time.Hour), "2026-03-04 14:00 UTC (in 3 days)"},
		{now.Add(-time.Minute), "13:59 UTC"},
		{now, "14:00 UTC"},
		{now.In(time.FixedZone("CET", 3600)).Add(30 * time.Second), "14:00:30 UTC (in 30 s)"},
	} {
		if got := At(tc.at, now); got != tc.want {
			t.Errorf("At(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
}

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{-time.Second, "now"},
		{time.Nanosecond, "in 1 s"},
		{59 * time.Second, "in 59 s"},
		{time.Minute, "in 1 min"},
		{59*time.Minute + time.Second, "in 1 h"},
		{61 * time.Minute, "in 1 h 1 min"},
		{47*time.Hour + 59*time.Minute, "in 47 h 59 min"},
		{48 * time.Hour, "in 2 days"},
		{49 * time.Hour, "in 3 days"},
	} {
		if got := In(tc.d); got != tc.want {
			t.Errorf("In(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
