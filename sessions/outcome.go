package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/notices"
	"github.com/detourbot/detour/redact"
)

// A turn's outcome: its records and usage, the answer or the error written
// through the message's writer, the admin's report (V1, V4, N1-N4, M8).

// attemptRows turns the turn's attempt records into rows (V1).
func (t *turn) attemptRows() []AttemptRow {
	r := t.r
	if len(t.attempts) == 0 {
		return nil
	}
	id := fmt.Sprintf("%d", r.clock.Now().UnixNano())
	rows := make([]AttemptRow, 0, len(t.attempts))
	for _, a := range t.attempts {
		row := AttemptRow{SessionKey: t.entry.Key, Turn: id, Model: a.Candidate.Ref(), Profile: a.Candidate.Profile,
			Kind: string(a.Kind), Skipped: string(a.Skipped), StartedAt: a.Started.UTC(), DurationMS: a.Duration.Milliseconds()}
		if f := a.Failure; f != nil {
			row.Reason, row.Status, row.Code = string(f.Reason), f.Status, f.Code
			row.Summary = redact.Preview(f.Message, 200)
		} else if a.Skipped == "" {
			row.Summary = "ok"
		}
		rows = append(rows, row)
	}
	return rows
}

// recordAttempts stores the attempt records of a turn that stored no exchange.
func (t *turn) recordAttempts(ctx context.Context) {
	r := t.r
	if err := r.st.addAttempts(ctx, t.attemptRows()); err != nil {
		r.log.Warn("record attempts", "session", t.entry.Key, "err", err)
	}
}

// storageFailure is the user's error when the database failed before any paid
// call: what failed, why when the storage itself is the cause, and that
// nothing was sent to a model (T7).
func storageFailure(what string, err error) string {
	if p := store.Problem(err); p != "" {
		return "the bot cannot store this conversation: " + p + "; nothing was sent to a model. Please tell the bot's operator"
	}
	return "internal error: " + what + "; nothing was sent to a model; please try again"
}

// addPaidCalls counts the paid calls of a turn that stored no exchange in its
// session (B1, /status), even when the turn was cancelled.
func (t *turn) addPaidCalls(ctx context.Context) {
	r := t.r
	if t.paid.Calls == 0 {
		return
	}
	if err := r.st.addPaidCalls(context.WithoutCancel(ctx), t.entry.Key, paidCounts{calls: t.paid.Calls, usd: t.paid.USD, in: t.tokensIn, out: t.tokensOut}); err != nil {
		r.log.Warn("record paid calls", "session", t.entry.Key, "err", err)
	}
}

// answer is what a successful turn writes, computed before anything is
// written: the exchange to store, the notice the change of model owes ("" =
// none), and the reply.
type answer struct {
	x      exchange
	notice string
	out    adapters.Outbound
	// prev and next are the notice states the exchange moves between, for
	// the alerter (alertNotice).
	prev, next notices.State
}

// compose computes the turn's answer from res (N1-N3, P2, M7, V1).
func (t *turn) compose(res failover.Result) answer {
	e, sel := t.entry, t.sel
	answered := failover.ModelRef(res.Candidate.Ref())
	prevNotice := e.notice()
	var cause *failover.Failure
	if res.FellBack {
		cause = res.Cause
	}
	next := noticeState(t, answered, cause)
	if t.imageDetour {
		prevNotice = imageNoticeBase(next) // I5: said on every such turn, kept by none
	}
	text := notices.ForChange(prevNotice, next)
	returned := answered == sel.selected && t.cur.Source == string(failover.SourceAuto) && !t.imageDetour

	now := t.r.clock.Now().UTC()
	x := exchange{
		id:  t.id,
		key: e.Key,
		messages: []Message{
			{SessionKey: e.Key, Role: "user", Content: t.msg.stored(), CreatedAt: now},
			{SessionKey: e.Key, Role: "assistant", Content: res.Output.Text, Model: string(answered), CreatedAt: now},
		},
		attempts:  t.attemptRows(),
		fields:    noticeFields(next, t.imageDetour),
		paidCalls: t.paid.Calls,
		tokensIn:  t.tokensIn, // every paid call's, as /usage counts them (N5, U1)
		tokensOut: t.tokensOut,
		returned:  returned,
		cost:      t.paid.USD,
		notice:    text,
	}
	x.noticeState = next // the board's timeline (issue 38)
	// P2: pin the profile that served, unless the user pinned one.
	pinned := e.AuthProfileOverride == res.Candidate.Profile && e.AuthProfileOverrideSource == string(failover.SourceAuto) &&
		e.AuthProfileOverrideCompactionCount == e.CompactionCount && t.prev == nil && !returned
	if !pinned && res.Candidate.Profile != "" && e.AuthProfileOverrideSource != string(failover.SourceUser) && !t.imageDetour {
		x.pin, x.pinCompacted = res.Candidate.Profile, e.CompactionCount
	}
	out := reply(t.in, adapters.KindReply, res.Output.Text)
	out.Model = string(answered)
	if t.in.EventID != "" && t.w.claimed {
		x.event, x.answer = t.in.EventID, eventAnswer{session: e.Key, out: out}
	}
	if !notices.Deliver(t.r.cfg.Notices, t.in.Direct) {
		text = "" // stored as the session's notice state all the same (N3)
	}
	return answer{x: x, notice: text, out: out, prev: prevNotice, next: next}
}

// succeed stores the turn's answer, then writes its notice and the reply.
func (t *turn) succeed(ctx context.Context, res failover.Result) {
	r := t.r
	a := t.compose(res)
	t.answered(failover.ModelRef(res.Candidate.Ref()), res.FellBack)
	err := r.storeAnswer(ctx, a.x)
	t.alertNotice(a) // the change of model happened, stored yet or not
	if err != nil {
		// M8: the answer was paid for: the person gets it, after a notice
		// (its own message, so the message still has one final answer) that
		// it is not saved yet; the exchange waits in memory for the database,
		// and its pending mark with it (M4).
		r.log.Error("store turn", "session", t.entry.Key, "err", err)
		r.noteDamaged(ctx, err, t.entry.Key)
		t.kept = r.keepUnsaved(&a.x, err)
		t.w.notice(ctx, a.notice) // once: a streamed answer may have shown it already (W1)
		t.w.notice(ctx, unsavedNotice(err, t.kept))
		if t.w.finish(ctx, a.out) == nil && t.kept {
			r.unsaved.delivered(&a.x, r.clock.Now())
		}
		return
	}
	t.stored, t.w.stored = true, a.x.event != ""
	r.incidentMu.Lock()
	r.incidentOpen = false // storeExchange ended it in the database
	r.incidentMu.Unlock()
	t.w.notice(ctx, a.notice) // N4: its own message, before the reply; once (W1)
	_ = t.w.finish(ctx, a.out)
	t.compactLater(a.out.Text) // R16: the next turns' summary, off this one's wait
}

// noticeState is the notice state of a turn answered by answered, moved off its
// first candidate by cause (nil = it was not).
func noticeState(t *turn, answered failover.ModelRef, cause *failover.Failure) notices.State {
	sel := t.sel
	if cause != nil && cause.Reason == classify.ReasonImageInput {
		// I5: moved off the requested model for its images, this turn only.
		return notices.State{Selected: string(sel.requested), Active: string(answered), Reason: classify.ReasonImageInput}
	}
	next := notices.State{Selected: string(sel.selected), Active: string(answered)}
	switch {
	case sel.source == failover.SourceUser || sel.source == failover.SourceLegacy:
		next.Selected = string(answered)
	case answered != sel.selected:
		next.Reason, next.Status = classify.Reason(t.cur.Reason), t.cur.Status
		if cause != nil {
			next.Reason, next.Status = cause.Reason, cause.Status
			if cause.Reason == classify.ReasonRefusedResponse && cause.Status != classify.StatusUnknown {
				next.Words = cause.Describe() // A2: what was refused (a skip knows only the reason)
			}
		}
	}
	return next
}

// fallbackNotice is the N1 notice the turn owes its reader if c answers, ""
// when none is due: a streamed fallback answer shows below it (A5). It runs on
// the engine's goroutine, where BeforeFallback, which sets t.cause, runs too.
func (t *turn) fallbackNotice(c failover.Candidate) string {
	r := t.r
	next := noticeState(t, failover.ModelRef(c.Ref()), t.cause)
	if !next.OnFallback() || !notices.Deliver(r.cfg.Notices, t.in.Direct) {
		return ""
	}
	prev := t.entry.notice()
	if next.Reason == classify.ReasonImageInput {
		prev = imageNoticeBase(next)
	}
	return notices.ForChange(prev, next)
}

// fail tells the user why no answer came, and the admin when every model is down.
func (t *turn) fail(ctx context.Context, err error) {
	r := t.r
	now := r.clock.Now()
	t.failed(err)
	// Counted even when the turn was cancelled (a second SIGTERM): the
	// provider was paid either way.
	t.addPaidCalls(ctx)
	var s *failover.SummaryError
	var f *failover.Failure
	var text string
	switch {
	case isOverflow(err):
		text = notices.FailureText(&failover.Failure{Reason: classify.ReasonContextOverflow})
	case errors.As(err, &s):
		text = notices.UserFailure(s, now)
		// V4: every model down, or the idle breaker stopping a turn that found
		// nothing healthy, is an incident for the admin.
		allDown := s.Stop == nil || errors.Is(s.Stop, failover.ErrBreakerTripped)
		if allDown && t.sel.source != failover.SourceUser && t.sel.source != failover.SourceLegacy {
			t.report(ctx, s, now)
		}
	case errors.As(err, &f):
		text = notices.FailureText(f)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		text = "the request was cancelled or timed out; please try again"
	default:
		r.log.Warn("turn failed", "session", t.entry.Key, "err", redact.Preview(err.Error(), 200))
		text = "the request failed; please try again"
	}
	_ = t.w.finish(ctx, reply(t.in, adapters.KindError, text))
}

// closeIncident ends the V4 incident (/recover brought a model back).
func (r *Router) closeIncident(ctx context.Context) {
	r.incidentMu.Lock()
	defer r.incidentMu.Unlock()
	if err := r.st.endIncident(ctx, r.clock.Now()); err != nil {
		r.log.Warn("close incident", "err", err)
		return
	}
	r.incidentOpen = false
}

// report posts the V4 admin report once per incident (until a turn succeeds).
func (t *turn) report(ctx context.Context, s *failover.SummaryError, now time.Time) {
	r := t.r
	channel, replyTo, ok := r.cfg.adminTarget()
	// The incident is opened whoever is told: the health board's timeline
	// shows every all-down period (issue 38), not only the reported ones.
	r.incidentMu.Lock()
	// To the microsecond, as Postgres keeps it: the recovered alert reads it
	// back and names the same instant.
	opened := now.Truncate(time.Microsecond)
	claimed, err := r.st.openIncident(ctx, opened)
	if err != nil {
		r.log.Warn("open incident", "err", err)
		claimed = !r.incidentOpen // the database is unwell: fall back to this process's view
	}
	r.incidentOpen = true
	r.incidentMu.Unlock()
	if !claimed {
		return // this incident was already reported (here, before a restart, or by a replica)
	}
	lines := notices.LinesFromSummary(s)
	t.alertAllDown(lines, opened)
	if !ok {
		return
	}
	r.send(ctx, adapters.Outbound{Kind: adapters.KindReport, Channel: channel, ReplyTo: replyTo, SessionKey: t.entry.Key,
		Text: notices.AdminReport(lines, t.entry.Key, now)})
}

// noticeFields is the notice state a successful turn stores (N3): none for a
// turn that moved models only for its images (I5).
func noticeFields(next notices.State, imageDetour bool) map[string]any {
	if imageDetour {
		return nil
	}
	return map[string]any{"notice_selected": next.Selected, "notice_active": next.Active, "notice_reason": string(next.Reason)}
}

// imageNoticeBase is the notice state an image detour is told against: the
// requested model answering, so the fallback notice is due on every such turn
// whatever the session's stored state (I5).
func imageNoticeBase(next notices.State) notices.State {
	return notices.State{Selected: next.Selected, Active: next.Selected}
}
