package commands

import (
	"strings"
	"testing"
	"time"
)

// covers U3, U4, R17: /usage takes "all" and nothing else; /compact takes no
// argument.
func TestParse_UsageAndCompact(t *testing.T) {
	for text, want := range map[string]Command{
		"/usage":         {Name: CmdUsage},
		"!usage ALL":     {Name: CmdUsage, All: true},
		"/compact":       {Name: CmdCompact},
		"<@U1> !compact": {Name: CmdCompact},
	} {
		c, ok := Parse(text)
		if !ok || c.Name != want.Name || c.All != want.All || c.Err != "" {
			t.Errorf("Parse(%q) = %+v, %v", text, c, ok)
		}
	}
	for text, want := range map[string]string{"/usage everyone": "usage: /usage [all]", "/compact now": "usage: /compact"} {
		if c, _ := Parse(text); c.Err != want || c.All {
			t.Errorf("Parse(%q).Err = %q, want %q", text, c.Err, want)
		}
	}
}

// covers U1, U3, U4: /usage renders the user's day and month, the estimated
// calls, the daily limit, and for admins the groups.
func TestUsageText_U3_U4(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	u := UsageInfo{User: "slack:U1", Day: "2026-03-01", Month: "March 2026", Now: now, ResetAt: now.Add(10 * time.Hour), Priced: true,
		Today:     UsageSum{Calls: 3, TokensIn: 1200, TokensOut: 300, USD: 0.0123, Estimated: 2},
		ThisMonth: UsageSum{Calls: 40, TokensIn: 12000, TokensOut: 3000, USD: 1.5},
		DailyUSD:  0.05, All: true, Everyone: UsageSum{Calls: 41}, EveryoneToday: UsageSum{Calls: 4},
		ByUser: []UsageSum{{Key: "slack:U1", Calls: 40}}, ByModel: []UsageSum{{Key: "p1/a", Calls: 41}}}
	got := UsageText(u)
	for _, want := range []string{
		"your usage today (2026-03-01 UTC): 3 paid call(s), 1,200 tokens in, 300 out, estimated cost $0.0123 (tokens of 2 call(s) estimated: the provider sent no usage)",
		"this month (March 2026): 40 paid call(s), 12,000 tokens in, 3,000 out, estimated cost $1.50",
		"your daily limit: $0.05; it resets at 2026-03-02 00:00 UTC (in 10 h)",
		"everyone this month (March 2026): 41 paid call(s)",
		"by user, this month:\n  slack:U1: 40 paid call(s)",
		"by model, this month:\n  p1/a: 41 paid call(s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("UsageText lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "by channel") {
		t.Errorf("an empty group is shown:\n%s", got)
	}
	u = UsageInfo{User: "console:a", Day: "2026-03-01", Month: "March 2026"}
	if got := UsageText(u); !strings.Contains(got, "your usage today (2026-03-01 UTC): no paid calls") || !strings.Contains(got, "costs are not estimated") {
		t.Errorf("no usage, no prices:\n%s", got)
	}
}
