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
	if last := ps[len(ps)-1].Text; !strings.Contains(last, "daily limit of 1 paid calls") || !strings.Contains(last, " 00:00 UTC (in ") {
		t.Fatalf("over budget:%s", describe(ps))
	}
	if n := len(e.llm.Calls()) - calls; n != 0 {
		t.Fatalf("%d provider calls past the budget", n)
	}
}

// covers T5 through Slack: with access.direct_messages false, a group DM (Slack's
// mpim) is a direct message and is refused, with no model call, while a private
// channel (an older one, whose id starts with G like a group DM's, or a newer
// one with a C id) is a channel and is answered; and a thread of a channel in
// access.channels is answered. Both subscription modes: with the message
// events, the app_mention's message twin says what its conversation is; with
// mentions only, the adapter asks conversations.info.
func TestE2E_T5_GroupDMsAreDirectPrivateChannelsAreChannels(t *testing.T) {
	for _, mentionsOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "all events", true: "mentions only"}[mentionsOnly], func(t *testing.T) {
			e := startE2E(t, func(s *setup) {
				s.yaml = "access: {direct_messages: false, channels: [slack:T1:C1, slack:T1:G5, slack:T1:G9]}\n"
				s.fake.OnlyMentions = mentionsOnly
				s.config.MentionsOnly = mentionsOnly
				s.fake.AddGroupDM("G9")
			})
			m := e.slack.Mention("G9", "U1", "from a group DM", "")
			ps := e.waitThread("G9", m.TS, 1)
			if !strings.Contains(ps[0].Text, "not open to you here") || len(e.llm.Calls()) != 0 {
				t.Fatalf("group DM: %d model calls, posts:%s", len(e.llm.Calls()), describe(ps))
			}
			m = e.slack.Mention("G5", "U1", "from an older private channel", "")
			if ps := e.waitThread("G5", m.TS, 1); !strings.Contains(ps[len(ps)-1].Text, "you said: from an older private channel") {
				t.Fatalf("private channel (G id):%s", describe(ps))
			}
			m = e.slack.Mention("C1", "U1", "in a channel", "")
			e.waitThread("C1", m.TS, 1)
			t2 := e.slack.Mention("C1", "U1", "in its thread", m.TS)
			if ps := e.waitThread("C1", m.TS, 2); !strings.Contains(ps[len(ps)-1].Text, "you said: in its thread") {
				t.Fatalf("thread of an allowed channel (mention %s):%s", t2.TS, describe(ps))
			}
			calls := len(e.llm.Calls())
			e.slack.DM("D1", "U1", "a direct message")
			if ps := e.waitThread("D1", "", 1); !strings.Contains(ps[0].Text, "not open to you here") {
				t.Fatalf("direct message:%s", describe(ps))
			}
			if n := len(e.llm.Calls()) - calls; n != 0 {
				t.Errorf("%d model calls for a refused direct message", n)
			}
		})
	}
}
