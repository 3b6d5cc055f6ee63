package commands

import (
	"fmt"
	"strings"
	"time"
)

// UsageSum is the usage of one group: one user, place or model, or a total.
type UsageSum struct {
	Key       string
	Calls     int64
	TokensIn  int64
	TokensOut int64
	// Estimated counts the calls whose tokens are estimates: their provider
	// sent no usage (U1).
	Estimated int64
	USD       float64
}

// UsageInfo is everything /usage shows (U3, U4).
type UsageInfo struct {
	User      string
	Day       string // 2006-01-02, UTC
	Month     string // "March 2026"
	Today     UsageSum
	ThisMonth UsageSum
	// DailyCalls and DailyUSD are the user's daily caps (T6; 0 = none), which
	// come back at ResetAt.
	DailyCalls int
	DailyUSD   float64
	ResetAt    time.Time
	Now        time.Time
	// Priced: some model has prices, so costs are estimated.
	Priced bool
	// Summaries is how many summaries this conversation paid for (R16).
	Summaries int
	// All is /usage all: everyone's usage this month, and its largest groups.
	All                      bool
	Everyone, EveryoneToday  UsageSum
	ByUser, ByPlace, ByModel []UsageSum
}

// usageLine renders one sum: "3 paid calls, 1,200 tokens in, 300 out, about
// $0.0012 (2 calls estimated: the provider sent no usage)".
func usageLine(s UsageSum, priced bool) string {
	if s.Calls == 0 {
		return "no paid calls"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s paid call(s), %s tokens in, %s out", thousands(s.Calls), thousands(s.TokensIn), thousands(s.TokensOut))
	if priced {
		b.WriteString(", estimated cost " + usd(s.USD))
	}
	if s.Estimated > 0 {
		fmt.Fprintf(&b, " (tokens of %s call(s) estimated: the provider sent no usage)", thousands(s.Estimated))
	}
	return b.String()
}

// UsageText renders /usage.
func UsageText(u UsageInfo) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	if u.User != "" {
		line("your usage today (%s UTC): %s", u.Day, usageLine(u.Today, u.Priced))
		line("this month (%s): %s", u.Month, usageLine(u.ThisMonth, u.Priced))
	}
	if u.Summaries > 0 {
		line("this conversation paid for %d summary call(s) to stay within its model's window (counted above)", u.Summaries)
	}
	var caps []string
	if u.DailyCalls > 0 {
		caps = append(caps, fmt.Sprintf("%d paid calls", u.DailyCalls))
	}
	if u.DailyUSD > 0 {
		caps = append(caps, fmt.Sprintf("$%.2f", u.DailyUSD))
	}
	if len(caps) > 0 {
		line("your daily limit: %s; it resets at %s", strings.Join(caps, " and "), clock(u.ResetAt, u.Now))
	}
	if !u.Priced {
		line("costs are not estimated: no model has prices (models.<ref>.usd_per_mtok_in, usd_per_mtok_out)")
	}
	if u.All {
		line("everyone today: %s", usageLine(u.EveryoneToday, u.Priced))
		line("everyone this month (%s): %s", u.Month, usageLine(u.Everyone, u.Priced))
		for _, g := range []struct {
			name string
			sums []UsageSum
		}{{"by user", u.ByUser}, {"by channel", u.ByPlace}, {"by model", u.ByModel}} {
			if len(g.sums) == 0 {
				continue
			}
			line("%s, this month:", g.name)
			for _, s := range g.sums {
				line("  %s: %s", s.Key, usageLine(s, u.Priced))
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
