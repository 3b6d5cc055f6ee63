package sessions

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// BoardRecords is what the health board (issue 38) reads of the sessions'
// tables: the fallbacks in force, the notices, incidents and key disables of
// a recent window, and one day's usage. It holds session keys and profile ids,
// never a secret; the board decides what each audience sees.
type BoardRecords struct {
	Fallbacks []ActiveFallback
	Notices   []BoardNotice
	Incidents []IncidentPeriod
	Disables  []KeyDisable
	Usage     []UsageSum // the day's usage by model, largest spend first
	Incident  bool       // an incident is open now (V4)
}

// ActiveFallback is one session answered by an automatic fallback (S3).
type ActiveFallback struct {
	Session string
	Origin  string // the model selected
	Model   string // the fallback answering
	Reason  string
	Status  int
	Since   time.Time // when the fallback began or its origin was last checked
}

// BoardNotice is one fallback or cleared notice (N1, N2) with its change.
type BoardNotice struct {
	At       time.Time
	Session  string
	Selected string
	Active   string // == Selected: a clear
	Reason   string
}

// IncidentPeriod is one all-models-unavailable incident (V4); Closed is zero
// while it is open.
type IncidentPeriod struct {
	Opened, Closed time.Time
}

// KeyDisable is one failed call whose reason disables its profile (D3, D4).
type KeyDisable struct {
	At      time.Time
	Profile string
	Model   string
	Reason  string
}

// ReadBoard reads the board's records: what is in force now, what happened
// since since, and the usage of day (2006-01-02, UTC). A table that does not
// exist yet has none. It only reads.
func ReadBoard(ctx context.Context, db *gorm.DB, since time.Time, day string) (BoardRecords, error) {
	var out BoardRecords
	db = db.WithContext(ctx)
	has := func(m any) bool { return db.Migrator().HasTable(m) }
	since = since.UTC()
	if has(&Entry{}) {
		var es []Entry
		err := db.Select("key", "provider_override", "model_override", "fallback_origin", "fallback_reason", "fallback_status", "last_probe_at", "updated_at").
			Where("model_override_source = ? AND fallback_origin <> ''", string(failover.SourceAuto)).Order("key").Find(&es).Error
		if err != nil {
			return out, fmt.Errorf("sessions: read fallbacks: %w", err)
		}
		for _, e := range es {
			f := ActiveFallback{Session: e.Key, Origin: e.FallbackOrigin, Model: string(e.override()), Reason: e.FallbackReason,
				Status: e.FallbackStatus, Since: e.UpdatedAt}
			if e.LastProbeAt != nil {
				f.Since = *e.LastProbeAt
			}
			out.Fallbacks = append(out.Fallbacks, f)
		}
	}
	if has(&NoticeRow{}) {
		var ns []NoticeRow
		if err := db.Where("created_at >= ? AND active <> ''", since).Order("created_at, id").Find(&ns).Error; err != nil {
			return out, fmt.Errorf("sessions: read notices: %w", err)
		}
		for _, n := range ns {
			out.Notices = append(out.Notices, BoardNotice{At: n.CreatedAt, Session: n.SessionKey, Selected: n.Selected, Active: n.Active, Reason: n.Reason})
		}
	}
	if has(&incidentPeriod{}) {
		var ps []incidentPeriod
		if err := db.Where("closed_at IS NULL OR closed_at >= ?", since).Order("opened_at, id").Find(&ps).Error; err != nil {
			return out, fmt.Errorf("sessions: read incidents: %w", err)
		}
		for _, p := range ps {
			ip := IncidentPeriod{Opened: p.OpenedAt}
			if p.ClosedAt != nil {
				ip.Closed = *p.ClosedAt
			}
			out.Incidents = append(out.Incidents, ip)
		}
	}
	if has(&incidentRow{}) {
		var row incidentRow
		if err := db.Where(map[string]any{"id": 1}).Limit(1).Find(&row).Error; err != nil {
			return out, fmt.Errorf("sessions: read incident: %w", err)
		}
		out.Incident = row.Open
	}
	if has(&AttemptRow{}) {
		var as []AttemptRow
		err := db.Select("started_at", "profile", "model", "reason").
			Where("started_at >= ? AND profile <> '' AND reason IN ?", since,
				[]string{string(classify.ReasonBilling), string(classify.ReasonAuthPermanent)}).
			Order("started_at, id").Limit(1000).Find(&as).Error
		if err != nil {
			return out, fmt.Errorf("sessions: read disables: %w", err)
		}
		for _, a := range as {
			out.Disables = append(out.Disables, KeyDisable{At: a.StartedAt, Profile: a.Profile, Model: a.Model, Reason: a.Reason})
		}
	}
	if has(&usageRow{}) {
		next, err := time.Parse(time.DateOnly, day)
		if err != nil {
			return out, fmt.Errorf("sessions: read usage: bad day %q: %w", day, err)
		}
		out.Usage, err = sessionStore{db: db}.usageSums(ctx, "", "model", day, next.AddDate(0, 0, 1).Format(time.DateOnly), 100)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
