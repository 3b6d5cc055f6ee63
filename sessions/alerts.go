package sessions

import (
	"strconv"
	"time"

	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/notices"
)

// Alerter receives the events operators subscribe to by webhook (issue 38,
// alerts.webhooks): fallbacks started and cleared (N1, N2), every model down
// and back (V4), budgets reached (B1, B2, T6). Alert runs on the turn's
// goroutine, so it must not block (alerts.Dispatcher.Alert only queues).
// Options.Alerter nil = none.
type Alerter interface {
	Alert(e alerts.Event)
}

// alert hands e to the alerter, if any.
func (r *Router) alert(e alerts.Event) {
	if r.alerter != nil {
		r.alerter.Alert(e)
	}
}

// alertNotice tells the alerter of the change of model a stores (N1, N2);
// the exchange's id names the change. An image detour (I5) is a turn's, not
// the conversation's: no alert.
func (t *turn) alertNotice(a answer) {
	r := t.r
	if r.alerter == nil || t.imageDetour || a.x.notice == "" {
		return
	}
	now := r.clock.Now()
	prev, next := a.prev, a.next
	switch {
	case next.OnFallback():
		status := next.Status
		if status == classify.StatusUnknown {
			status = 0
		}
		r.alert(alerts.NewFallbackStarted(now, alerts.Fallback{Session: a.x.key, Turn: a.x.id,
			Requested: next.Selected, Fallback: next.Active, Reason: string(next.Reason), Status: status}))
	case prev.OnFallback():
		back := next.Active
		if back == "" {
			back = next.Selected
		}
		r.alert(alerts.NewFallbackCleared(now, alerts.Fallback{Session: a.x.key, Turn: a.x.id, Requested: back, Fallback: prev.Active}))
	}
}

// alertAllDown tells the alerter of the incident this turn opened (V4):
// since is the instant the incident row records.
func (t *turn) alertAllDown(lines []notices.ReportLine, since time.Time) {
	r := t.r
	if r.alerter == nil {
		return
	}
	models := make([]alerts.Down, 0, len(lines))
	for _, l := range lines {
		d := alerts.Down{Model: l.Model, KeyID: l.Profile, Reason: string(l.Reason)}
		if l.Status > 0 {
			d.Status = l.Status
		}
		if !l.Recovery.IsZero() {
			u := l.Recovery.UTC()
			d.RetryAt = &u
		}
		models = append(models, d)
	}
	r.alert(alerts.NewAllDown(since, t.entry.Key, models))
}

// alertRecovered tells the alerter that the incident begun at since ended:
// only the update that closed the shared incident row calls it, so one
// replica, once.
func (r *Router) alertRecovered(since time.Time) {
	r.alert(alerts.NewRecovered(r.clock.Now(), since))
}

// alertGuard tells the alerter of the limit that refused this turn a paid
// call, if one did (B1, B2, T6).
func (t *turn) alertGuard() {
	r := t.r
	if r.alerter == nil || t.guard == "" {
		return
	}
	r.alert(alerts.NewBudgetReached(r.clock.Now(), t.guard, t.in.SessionKey, t.in.User, strconv.FormatInt(t.start.UnixNano(), 10)))
}
