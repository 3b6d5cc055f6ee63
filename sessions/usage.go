package sessions

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/llm"
)

// Usage (U1-U4): every paid call is counted per user, place and model and UTC
// day, with the tokens the provider reported, or, when it reported none, the
// R15 estimate of the prompt and of the answer, so the cost caps (B1, T6) act
// whatever the provider sends.

// withEstimate fills in the tokens of a call whose provider reported none
// (U1): the prompt's estimate and the answer's. A call that failed before any
// answer text is not estimated: providers do not bill a refused request.
func withEstimate(out failover.Output, err error, prompt []llm.Message) failover.Output {
	if out.InputTokens > 0 || out.OutputTokens > 0 || (err != nil && out.Text == "") {
		return out
	}
	out.InputTokens, out.OutputTokens = estimate(prompt), EstimateTokens(out.Text)
	out.UsageEstimated = true
	return out
}

// placeOf is where in's conversation is: the channel a thread belongs to (the
// adapter's Inbound.Parent, or a Slack thread's channel: "slack:T1:C1" for
// "slack:T1:C1:1712.0001"), else the session itself (a channel, a direct
// message, a console session).
func placeOf(in adapters.Inbound) string {
	if in.Parent != "" {
		return in.Parent
	}
	key := in.SessionKey
	if strings.HasPrefix(key, "slack:") && strings.Count(key, ":") >= 3 {
		return key[:strings.LastIndexByte(key, ':')]
	}
	return key
}

// countUsage adds one paid call of in's user to the turn's usage (U2); the
// turn stores it once, when it ends (storeUsage).
func (t *tally) countUsage(in adapters.Inbound, a failover.AttemptRecord) {
	if a.Skipped != "" {
		return
	}
	day, _ := dayOf(a.Started)
	row := usageRow{Day: day, User: in.User, Place: placeOf(in), Model: a.Candidate.Ref()}
	i := slices.IndexFunc(t.usage, func(u usageRow) bool { return u.Day == row.Day && u.Model == row.Model })
	if i < 0 {
		t.usage = append(t.usage, row)
		i = len(t.usage) - 1
	}
	u := &t.usage[i]
	u.Calls++
	u.TokensIn += int64(a.InputTokens)
	u.TokensOut += int64(a.OutputTokens)
	u.USD += a.CostUSD
	if a.UsageEstimated {
		u.Estimated++
	}
}

// storeUsage stores what t counted, whatever the turn came to (a paid call
// counts, answered or not).
func (r *Router) storeUsage(in adapters.Inbound, t *tally) {
	if len(t.usage) == 0 {
		return
	}
	if err := r.st.addUsage(context.WithoutCancel(r.base), t.usage); err != nil {
		r.log.Warn("record usage", "session", in.SessionKey, "err", err)
	}
	t.usage = nil
}

// monthOf is the UTC month of now: its first day, and the first day of the next.
func monthOf(now time.Time) (from, to string, name string) {
	u := now.UTC()
	start := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start.Format(time.DateOnly), start.AddDate(0, 1, 0).Format(time.DateOnly), start.Format("January 2006")
}

// usageTopN bounds each grouping of /usage all.
const usageTopN = 10

// Usage gathers what /usage shows (U3, U4): in's user's usage today and this
// month, and with all (admins only) everyone's this month by user, place and
// model.
func (r *Router) Usage(ctx context.Context, in adapters.Inbound, all bool) (commands.UsageInfo, error) {
	now := r.clock.Now()
	day, end := dayOf(now)
	from, to, month := monthOf(now)
	info := commands.UsageInfo{User: in.User, Day: day, Month: month, Now: now, ResetAt: end, Priced: r.priced(),
		DailyCalls: r.cfg.UserBudget.Calls, DailyUSD: r.cfg.UserBudget.USD}
	next := end.Format(time.DateOnly)
	one := func(user, from, to string) (commands.UsageSum, error) {
		sums, err := r.st.usageSums(ctx, user, "", from, to, 1)
		if err != nil || len(sums) == 0 {
			return commands.UsageSum{}, err
		}
		return toSum(sums[0]), nil
	}
	var err error
	if e, lerr := r.st.load(ctx, in.SessionKey); lerr == nil {
		info.Summaries = e.Summaries // R16: what keeping this conversation short cost
	}
	if in.User != "" {
		if info.Today, err = one(in.User, day, next); err != nil {
			return info, err
		}
		if info.ThisMonth, err = one(in.User, from, to); err != nil {
			return info, err
		}
	}
	if !all {
		return info, nil
	}
	info.All = true
	if info.Everyone, err = one("", from, to); err != nil {
		return info, err
	}
	if info.EveryoneToday, err = one("", day, next); err != nil {
		return info, err
	}
	for col, dst := range map[string]*[]commands.UsageSum{"user_id": &info.ByUser, "place": &info.ByPlace, "model": &info.ByModel} {
		sums, err := r.st.usageSums(ctx, "", col, from, to, usageTopN)
		if err != nil {
			return info, err
		}
		for _, s := range sums {
			*dst = append(*dst, toSum(s))
		}
	}
	return info, nil
}

func toSum(s UsageSum) commands.UsageSum {
	return commands.UsageSum{Key: s.Key, Calls: s.Calls, TokensIn: s.TokensIn, TokensOut: s.TokensOut, Estimated: s.Estimated, USD: s.USD}
}
