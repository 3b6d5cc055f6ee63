package slack_test

import (
	"strings"
	"testing"
)

// covers T5, T6 through Slack: a user not in access.users is refused once and
// causes no provider call; a listed user past the daily budget is told when it
// resets, with no provider call either.
func TestE2E_T5_T6_StrangersAndBudgetsCostNothing(t *testing.T) {
	e := startE2E(t, func(s *setup) {
		s.yaml = "access: {users: [slack:U1]}\nlimits: {per_user_daily_paid_calls: 1}\n"
	})
	m := e.slack.Mention("C1", "U9", "spend the team's keys", "")
	ps := e.waitThread("C1", m.TS, 1)
	if !strings.Contains(ps[0].Text, "access.users") || len(e.llm.Calls()) != 0 {
		t.Fatalf("stranger: %d provider calls, posts:%s", len(e.llm.Calls()), describe(ps))
	}
	m = e.slack.Mention("C1", "U1", "first question", "")
	if ps := e.waitThread("C1", m.TS, 1); !strings.Contains(ps[len(ps)-1].Text, "first question") {
		t.Fatalf("listed user:%s", describe(ps))
	}
	calls := len(e.llm.Calls())
	m = e.slack.Mention("C1", "U1", "second question", "")
	ps = e.waitThread("C1", m.TS, 1)
	if last := ps[len(ps)-1].Text; !strings.Contains(last, "daily limit of 1 paid calls") || !strings.Contains(last, "resets at 00:00 UTC") {
		t.Fatalf("over budget:%s", describe(ps))
	}
	if n := len(e.llm.Calls()) - calls; n != 0 {
		t.Fatalf("%d provider calls past the budget", n)
	}
}
