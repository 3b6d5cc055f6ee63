package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/notices"
)

// Entry is one session's durable state (O1). The override fields are owned by the
// fallback runner when their source is "auto" and by the user when it is "user".
type Entry struct {
	Key string `gorm:"primaryKey;size:255"`

	// O1: the fields a fallback owns.
	ProviderOverride                   string
	ModelOverride                      string
	ModelOverrideSource                string // "", auto, user (empty with a model = legacy, S5)
	AuthProfileOverride                string
	AuthProfileOverrideSource          string // auto | user
	AuthProfileOverrideCompactionCount int
	FallbackOrigin                     string // model selected before the auto fallback
	FallbackReason                     string
	FallbackStatus                     int // HTTP status of the failure behind FallbackReason, for its plain words

	CompactionCount int
	LastProbeAt     *time.Time // last S3 probe of the origin (or when the fallback began)
	LiveSwitch      bool       // O4: a user change is pending for the next turn

	// Notice state (N3).
	NoticeSelected string
	NoticeActive   string
	NoticeReason   string

	PaidCalls    int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64 // estimated from the configured prices (B1); 0 without prices

	CreatedAt time.Time
	UpdatedAt time.Time
}

// TableName keeps detour's tables recognisable in a shared database.
func (Entry) TableName() string { return "session_entries" }

// Message is one stored history message (user or assistant content only; notices
// are never stored, N4).
type Message struct {
	ID         uint64 `gorm:"primaryKey;autoIncrement"`
	SessionKey string `gorm:"index;size:255;not null"`
	Role       string `gorm:"size:16;not null"`
	Content    string
	Model      string
	CreatedAt  time.Time
}

// TableName names the history table.
func (Message) TableName() string { return "session_messages" }

// AttemptRow is one recorded attempt (V1).
type AttemptRow struct {
	ID         uint64 `gorm:"primaryKey;autoIncrement"`
	SessionKey string `gorm:"index;size:255"`
	Turn       string `gorm:"size:64"`
	Model      string // provider/model
	Profile    string // profile id, never a secret
	Kind       string
	Reason     string // "" on success
	Skipped    string // skip reason when no call was made
	Status     int
	Code       string
	Summary    string // human summary, redacted
	StartedAt  time.Time
	DurationMS int64
}

// TableName names the attempts table.
func (AttemptRow) TableName() string { return "session_attempts" }

func (e *Entry) notice() notices.State {
	return notices.State{Selected: e.NoticeSelected, Active: e.NoticeActive, Reason: classify.Reason(e.NoticeReason)}
}

func (e *Entry) override() failover.ModelRef {
	if e.ModelOverride == "" {
		return ""
	}
	if e.ProviderOverride == "" {
		return failover.ModelRef(e.ModelOverride)
	}
	return failover.ModelRef(e.ProviderOverride + "/" + e.ModelOverride)
}

// source returns the selection source of the override (S5: empty = legacy user).
func (e *Entry) source() failover.Source {
	if e.ModelOverride == "" {
		return ""
	}
	switch s := failover.Source(e.ModelOverrideSource); s {
	case failover.SourceAuto, failover.SourceUser:
		return s
	case "":
		return failover.SourceLegacy
	default:
		return s
	}
}

// incidentRow is the one row saying whether an all-models-unavailable incident
// is open (V4): its report was sent and no turn has succeeded since. It is in
// the database so a restart, or another replica, does not report it again.
type incidentRow struct {
	ID       uint `gorm:"primaryKey"`
	Open     bool `gorm:"not null;default:false"`
	OpenedAt *time.Time
}

// TableName names the incidents table.
func (incidentRow) TableName() string { return "incidents" }

// incidentOpen reports whether an incident is open.
func (s sessionStore) incidentOpen(ctx context.Context) (bool, error) {
	var row incidentRow
	err := s.db.WithContext(ctx).Where("id = 1").Limit(1).Find(&row).Error
	return row.Open, err
}

// openIncident claims the incident; false when one is already open, so exactly
// one caller (across replicas) sends the report.
func (s sessionStore) openIncident(ctx context.Context, now time.Time) (bool, error) {
	db := s.db.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&incidentRow{ID: 1}).Error; err != nil {
		return false, fmt.Errorf("sessions: incident: %w", err)
	}
	res := db.Model(&incidentRow{}).Where("id = 1 AND open = ?", false).Updates(map[string]any{"open": true, "opened_at": now.UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("sessions: incident: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// closeIncident ends an open incident.
func (s sessionStore) closeIncident(ctx context.Context) error {
	return s.db.WithContext(ctx).Model(&incidentRow{}).Where("id = 1 AND open = ?", true).Update("open", false).Error
}

// sessionStore is the router's session persistence.
type sessionStore struct{ db *gorm.DB }

func (s sessionStore) migrate() error {
	if err := s.db.AutoMigrate(&Entry{}, &Message{}, &AttemptRow{}, &incidentRow{}); err != nil {
		return fmt.Errorf("sessions: migrate: %w", err)
	}
	return nil
}

// load returns the entry of key, creating it when absent.
func (s sessionStore) load(ctx context.Context, key string) (*Entry, error) {
	var e Entry
	err := s.db.WithContext(ctx).Where("key = ?", key).Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		e = Entry{Key: key}
		if err := s.inherit(ctx, &e); err != nil {
			return nil, err
		}
		if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&e).Error; err != nil {
			return nil, fmt.Errorf("sessions: create %s: %w", key, err)
		}
		return &e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: load %s: %w", key, err)
	}
	return &e, nil
}

// parentKey is the session whose model choice a new session of key starts with:
// key without its last ":"-separated part (the channel "slack:T1:C1" of the thread
// "slack:T1:C1:1712.0001"), or "" when key has fewer than three parts.
func parentKey(key string) string {
	i := strings.LastIndexByte(key, ':')
	if i <= 0 || strings.Count(key[:i], ":") < 1 {
		return ""
	}
	return key[:i]
}

// inherit gives a session being created the user's model choice stored on its
// parent (a channel default set by a slash command in that channel), so new
// threads of a channel start on it. Only a user's choice is a default: an
// automatic fallback belongs to the conversation that made it.
func (s sessionStore) inherit(ctx context.Context, e *Entry) error {
	parent := parentKey(e.Key)
	if parent == "" {
		return nil
	}
	var p Entry
	err := s.db.WithContext(ctx).Where("key = ?", parent).Limit(1).Find(&p).Error
	if err != nil {
		return fmt.Errorf("sessions: load defaults %s: %w", parent, err)
	}
	if p.Key == "" || p.ModelOverride == "" || p.source() != failover.SourceUser {
		return nil
	}
	e.ProviderOverride, e.ModelOverride, e.ModelOverrideSource = p.ProviderOverride, p.ModelOverride, p.ModelOverrideSource
	if p.AuthProfileOverrideSource == string(failover.SourceUser) {
		e.AuthProfileOverride, e.AuthProfileOverrideSource = p.AuthProfileOverride, p.AuthProfileOverrideSource
	}
	return nil
}

// history returns the stored messages of key, oldest first.
func (s sessionStore) history(ctx context.Context, key string) ([]Message, error) {
	var msgs []Message
	if err := s.db.WithContext(ctx).Where("session_key = ?", key).Order("id").Find(&msgs).Error; err != nil {
		return nil, fmt.Errorf("sessions: history %s: %w", key, err)
	}
	return msgs, nil
}

// patch updates fields of key.
func (s sessionStore) patch(ctx context.Context, key string, fields map[string]any) error {
	if err := s.db.WithContext(ctx).Model(&Entry{}).Where("key = ?", key).Updates(fields).Error; err != nil {
		return fmt.Errorf("sessions: update %s: %w", key, err)
	}
	return nil
}

// casPatch updates fields of key only where every column of match still holds
// the given value; it reports whether the row matched (O2, O3).
func (s sessionStore) casPatch(ctx context.Context, key string, match, fields map[string]any) (bool, error) {
	q := s.db.WithContext(ctx).Model(&Entry{}).Where("key = ?", key)
	for col, v := range match {
		q = q.Where(clause.Eq{Column: clause.Column{Name: col}, Value: v})
	}
	res := q.Updates(fields)
	if res.Error != nil {
		return false, fmt.Errorf("sessions: update %s: %w", key, res.Error)
	}
	return res.RowsAffected > 0, nil
}

// dropHistory deletes the messages of key with an id below before (compaction),
// or all of them (before == 0).
func (s sessionStore) dropHistory(ctx context.Context, tx *gorm.DB, key string, before uint64) error {
	q := tx.WithContext(ctx).Where("session_key = ?", key)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	if err := q.Delete(&Message{}).Error; err != nil {
		return fmt.Errorf("sessions: drop history %s: %w", key, err)
	}
	return nil
}

// clearedOverride is the patch that removes every O1 field.
// probeOriginsNow makes every session whose automatic fallback was forced by a
// model of provider (model "" = any of its models) re-try that model on its next
// turn instead of at its next S3 probe (B3: after a successful /recover).
func (s sessionStore) probeOriginsNow(ctx context.Context, provider, model string) (int64, error) {
	q := s.db.WithContext(ctx).Model(&Entry{}).Where("model_override_source = ?", string(failover.SourceAuto))
	if model != "" {
		q = q.Where("fallback_origin = ?", provider+"/"+model)
	} else {
		q = q.Where("fallback_origin LIKE ? ESCAPE '\\'", likePrefix(provider+"/"))
	}
	res := q.Update("last_probe_at", nil)
	return res.RowsAffected, res.Error
}

// likePrefix escapes s for a LIKE pattern that matches what starts with s.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

func clearedOverride() map[string]any {
	return map[string]any{
		"provider_override": "", "model_override": "", "model_override_source": "",
		"auth_profile_override": "", "auth_profile_override_source": "", "auth_profile_override_compaction_count": 0,
		"fallback_origin": "", "fallback_reason": "", "fallback_status": 0,
	}
}
