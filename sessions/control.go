package sessions

import (
	"context"
	"errors"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// The turn as the engine's Controller: what it may change in a run (T6, O2,
// O3, O6, R15).

// BeforeCall runs before each paid call (failover.Controller): a model the
// user switched to meanwhile wins over the rest of the chain (O6), then the
// user's daily budget must allow the call (T6).
func (t *turn) BeforeCall(ctx context.Context, a failover.Attempt) error {
	if a.Number > 1 {
		if to, ok := t.liveSwitch(ctx); ok {
			return &failover.LiveSwitchError{To: to}
		}
	}
	return t.r.takeCall(ctx, t.in.User)
}

// liveSwitch reports the model a user switched this session to while the turn
// ran (/model or a session patch from another path: O4), if any.
func (t *turn) liveSwitch(ctx context.Context) (failover.ModelRef, bool) {
	e, err := t.r.st.load(ctx, t.entry.Key)
	if err != nil || !e.LiveSwitch {
		return "", false
	}
	to := e.override()
	if to == "" || e.source() == failover.SourceAuto {
		to = t.sel.base // /model default: back to the configured model
	}
	if to == t.sel.requested || to == t.switched {
		return "", false
	}
	t.switched = to
	return to, true
}

// BeforeFallback persists the fallback override before its attempt (O2). It
// writes only when the stored override is still what this turn loaded, so a
// /model typed meanwhile is never overwritten.
func (t *turn) BeforeFallback(ctx context.Context, _, to failover.Candidate, cause failover.Failure) error {
	t.cause = &cause // the same failure the result names (A5's notice)
	r := t.r
	if t.sel.source == failover.SourceUser || t.sel.source == failover.SourceLegacy {
		return nil // S4: a user override never falls back (BuildChain keeps it alone)
	}
	if cause.Reason == classify.ReasonImageInput {
		t.imageDetour = true // I5: this turn only; the session keeps its model
		return nil
	}
	next := overrideState{
		Provider: to.Provider, Model: to.Model, Source: string(failover.SourceAuto),
		Profile: to.Profile, ProfileSource: string(failover.SourceAuto), ProfileCompaction: t.entry.CompactionCount,
		Origin: string(t.sel.selected), Reason: string(cause.Reason), Status: cause.Status,
	}
	if failover.ModelRef(to.Ref()) == t.sel.selected {
		// K4: the chain came back to the selected model; no override is needed.
		next.Provider, next.Model, next.Source, next.Origin, next.Reason, next.Status = "", "", "", "", "", 0
	}
	fields := merge(next.modelFields(), next.profileFields())
	if t.cur.Source != string(failover.SourceAuto) {
		// The fallback begins now: the first origin probe is due one interval later (S3).
		fields["last_probe_at"] = r.clock.Now().UTC()
	}
	ok, err := r.st.casPatch(ctx, t.entry.Key, t.cur.modelMatch(), fields)
	if err != nil {
		r.log.Warn("persist fallback override", "session", t.entry.Key, "err", err)
		return nil // the answer matters more than the bookkeeping
	}
	if !ok {
		r.log.Info("session model changed meanwhile; fallback not persisted", "session", t.entry.Key, "to", to.Ref())
		t.prev = nil
		return nil
	}
	prev := t.cur
	t.prev, t.cur, t.wroteFor = &prev, next, to
	return nil
}

// AfterFailedFallback rolls back what BeforeFallback wrote, field group by
// field group, and only where the stored values still match the failed
// candidate (O3).
func (t *turn) AfterFailedFallback(ctx context.Context, c failover.Candidate, _ failover.Failure) {
	if t.prev == nil || t.wroteFor.Ref() != c.Ref() {
		return
	}
	prev, wrote := *t.prev, t.cur
	if _, err := t.r.st.casPatch(ctx, t.entry.Key, wrote.modelMatch(), prev.modelFields()); err != nil {
		t.r.log.Warn("roll back fallback override", "session", t.entry.Key, "err", err)
	}
	if _, err := t.r.st.casPatch(ctx, t.entry.Key, wrote.profileMatch(), prev.profileFields()); err != nil {
		t.r.log.Warn("roll back fallback profile", "session", t.entry.Key, "err", err)
	}
	t.cur, t.prev = prev, nil
}

// Compact shortens the history when the engine asks (R15): after a
// context_overflow, or after a timeout on a prompt that fills most of the
// window. What a summary of the dropped turns paid is reported, so the run
// counts it in the turn's budget (B1, R16).
func (t *turn) Compact(ctx context.Context, f failover.Failure) (failover.Compaction, bool) {
	why := afterTimeout
	if f.Reason == classify.ReasonContextOverflow {
		why = afterOverflow
	}
	before := t.paid
	ok := t.compact(ctx, why)
	spent := failover.Spend{Calls: t.paid.Calls - before.Calls, USD: t.paid.USD - before.USD}
	return failover.Compaction{PromptTokens: estimate(t.prompt), Spent: spent}, ok
}

func isOverflow(err error) bool {
	var f *failover.Failure
	if errors.As(err, &f) && f.Reason == classify.ReasonContextOverflow {
		return true
	}
	var s *failover.SummaryError
	if errors.As(err, &s) && s.Stop == nil {
		if last := s.Last(); last != nil && last.Reason == classify.ReasonContextOverflow {
			return true
		}
	}
	return false
}
