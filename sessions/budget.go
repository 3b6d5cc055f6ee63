package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/when"
)

// UserBudget is each user's daily allowance (T6): paid calls and estimated
// spend per UTC day, 0 = no cap. It is counted before every paid call and
// stored, so restarts and replicas share it.
type UserBudget struct {
	Calls int
	USD   float64
}

func (b UserBudget) on() bool { return b.Calls > 0 || b.USD > 0 }

// userBudgetError stops a run whose user reached the daily budget; it says when
// the allowance comes back.
type userBudgetError struct {
	what  string
	reset time.Time
	now   time.Time
}

func (e *userBudgetError) Error() string {
	// Written as /usage writes the same moment (when.At).
	return fmt.Sprintf("you have reached your daily limit of %s; it resets at %s", e.what, when.At(e.reset, e.now))
}

func (e *userBudgetError) Unwrap() error { return failover.ErrUserBudget }

// dayOf is the UTC day a budget counts in, and when it ends.
func dayOf(now time.Time) (day string, end time.Time) {
	u := now.UTC()
	start := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	return start.Format(time.DateOnly), start.Add(24 * time.Hour)
}

// takeCall counts one paid call of user against the daily budget before it is
// made (T6), and refuses it, saying when the allowance comes back, when the
// budget is used up. Without a budget (or without a user) it allows all.
func (r *Router) takeCall(ctx context.Context, user string) error {
	b := r.cfg.UserBudget
	if !b.on() || user == "" {
		return nil
	}
	now := r.clock.Now()
	day, end := dayOf(now)
	ok, err := r.st.takePaidCall(ctx, user, day, b.Calls, b.USD)
	if err != nil {
		// A call that cannot be counted is not made (T7).
		return fmt.Errorf("the usage of today could not be recorded, so no call was made: %w", err)
	}
	if !ok {
		what := fmt.Sprintf("%d paid calls", b.Calls)
		if b.Calls == 0 || b.USD > 0 && r.spentUp(ctx, user, day, b) {
			what = fmt.Sprintf("$%.2f", b.USD)
		}
		return &userBudgetError{what: what, reset: end, now: now}
	}
	return nil
}

// addSpend adds what paid call a cost to user's day (T6).
func (r *Router) addSpend(user string, a failover.AttemptRecord) {
	if !r.cfg.UserBudget.on() || user == "" || a.CostUSD <= 0 {
		return
	}
	day, _ := dayOf(a.Started)
	if err := r.st.addSpend(context.WithoutCancel(r.base), user, day, a.CostUSD); err != nil {
		r.log.Warn("record spend", "user", user, "err", err)
	}
}

// spentUp reports whether the USD cap (rather than the call cap) is what ran out.
func (r *Router) spentUp(ctx context.Context, user, day string, b UserBudget) bool {
	u, err := r.st.usage(ctx, user, day)
	return err == nil && u.USD >= b.USD
}
