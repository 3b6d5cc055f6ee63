package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/notices"
)

// This file holds every SQL statement of the package. The same statements run
// on SQLite and Postgres (M1): gorm builds them, every write goes through an
// internal/database.Open handle (text cleaned of NUL and invalid UTF-8), keys
// are unbounded text, counters move with atomic increments ("n = n + ?"),
// ownership of an override or of an incident changes with compare-and-set
// UPDATEs, and every transaction is a store.Transaction (retried on deadlock,
// serialization failure or SQLite busy), so replicas sharing the database lose
// no update (M2).

// Entry is one session's durable state (O1). The override fields are owned by the
// fallback runner when their source is "auto" and by the user when it is "user".
type Entry struct {
	Key string `gorm:"primaryKey"`

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
	// LastTurnAt is when the latest turn began: written before the turn's first
	// paid call, so a database that cannot be written stops the turn first (T7).
	LastTurnAt *time.Time
	// LastExchange is the id of the latest exchange stored (M8): a write of an
	// exchange retried after its commit was in doubt finds it here and stores
	// nothing twice.
	LastExchange string `gorm:"not null;default:''"`

	// Notice state (N3).
	NoticeSelected string
	NoticeActive   string
	NoticeReason   string

	// What the conversation paid since its last /reset or /new (/status, N5):
	// every paid call, its tokens as /usage counts them (U1).
	PaidCalls    int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64 // estimated from the configured prices (B1); 0 without prices

	// ThreadContext is the conversation's earlier messages, read once when the
	// bot was first addressed in it (H1-H3); ThreadRead says they were read (or
	// tried), so neither a restart nor a redelivery reads them again.
	ThreadContext string
	ThreadRead    bool
	// Summary stands for the turns compaction dropped (R16); "" = none.
	Summary string
	// Summaries counts the summaries this conversation paid for (R16), since
	// it began or was last reset.
	Summaries int `gorm:"not null;default:0"`

	CreatedAt time.Time
	UpdatedAt time.Time
}

// TableName keeps detour's tables recognisable in a shared database.
func (Entry) TableName() string { return "session_entries" }

// Message is one stored history message (user or assistant content only; notices
// are never stored, N4).
type Message struct {
	ID         uint64 `gorm:"primaryKey;autoIncrement"`
	SessionKey string `gorm:"index;not null"`
	Role       string `gorm:"not null"`
	Content    string
	Model      string
	CreatedAt  time.Time
}

// TableName names the history table.
func (Message) TableName() string { return "session_messages" }

// AttemptRow is one recorded attempt (V1).
type AttemptRow struct {
	ID         uint64 `gorm:"primaryKey;autoIncrement"`
	SessionKey string `gorm:"index"`
	Turn       string
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

// NoticeRow is one fallback or cleared notice (N1, N2) as the session's notice
// state changed, kept for `bot history`. It is an operator's record, never part
// of the conversation history (N4).
type NoticeRow struct {
	ID         uint64 `gorm:"primaryKey;autoIncrement"`
	SessionKey string `gorm:"index"`
	Text       string
	CreatedAt  time.Time `gorm:"index"`
	// The notice's change (issue 38's board reads them, not Text): the model
	// selected and the one that answered (a fallback when they differ, a clear
	// when they are equal), and why it fell back.
	Selected string `gorm:"not null;default:''"`
	Active   string `gorm:"not null;default:''"`
	Reason   string `gorm:"not null;default:''"`
}

// TableName names the notices table.
func (NoticeRow) TableName() string { return "session_notices" }

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

// incidentPeriod is one all-models-unavailable incident (V4) from its opening
// to its end (nil while open), kept for the board's timeline (issue 38): the
// incidents row says only whether one is open now.
type incidentPeriod struct {
	ID       uint64    `gorm:"primaryKey;autoIncrement"`
	OpenedAt time.Time `gorm:"index"`
	ClosedAt *time.Time
}

// TableName names the incident periods table.
func (incidentPeriod) TableName() string { return "incident_periods" }

// inboundEvent is one platform event (or console message id) already taken by
// a process (M3): the row's insert is what only one replica (or one life of the
// process) wins. It keeps the event's answer once there is one (M7), so the
// same message sent again gets that answer back instead of a new turn.
type inboundEvent struct {
	ID string    `gorm:"primaryKey"`
	At time.Time `gorm:"index"`
	// Owner is whose message took the id (its session and user) and Digest a
	// SHA-256 of its text: a replay answers only the same message (M7, issue
	// 37); "" = claimed before they were kept.
	Owner  string `gorm:"not null;default:''"`
	Digest string `gorm:"not null;default:''"`
	// The answer: its session, kind (reply or error), text, model and whether
	// it was ephemeral; AnsweredAt nil = none stored yet.
	SessionKey string `gorm:"not null;default:''"`
	Kind       string `gorm:"not null;default:''"`
	Text       string `gorm:"not null;default:''"`
	Model      string `gorm:"not null;default:''"`
	Ephemeral  bool   `gorm:"not null;default:false"`
	AnsweredAt *time.Time
	// DeliveredAt is when the adapter took the answer; nil = stored but maybe
	// never delivered (a crash in between): a redelivery then delivers it.
	DeliveredAt *time.Time
}

// TableName names the inbound events table.
func (inboundEvent) TableName() string { return "inbound_events" }

// eventMemory is how long an event id is remembered: far beyond any platform's
// redelivery (Slack retries within minutes, Discord replays on resume).
const eventMemory = 24 * time.Hour

// claimEvent records event id as taken and reports whether this call took it
// (false: another replica, or this process before a restart, already did; prior
// is then the event's row, with its answer when one was stored). Now and then it
// forgets ids older than eventMemory.
func (s sessionStore) claimEvent(ctx context.Context, in adapters.Inbound, now time.Time) (taken bool, prior *inboundEvent, err error) {
	db := s.db.WithContext(ctx)
	owner, digest := eventOwner(in)
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&inboundEvent{ID: in.EventID, At: now.UTC(), Owner: owner, Digest: digest})
	if res.Error != nil {
		return false, nil, fmt.Errorf("sessions: claim event: %w", res.Error)
	}
	if now.Unix()%64 == 0 { // an occasional sweep keeps the table small
		db.Where("at < ?", now.Add(-eventMemory).UTC()).Delete(&inboundEvent{})
	}
	if res.RowsAffected == 1 {
		return true, nil, nil
	}
	var ev inboundEvent
	if err := db.Where(map[string]any{"id": store.CleanText(in.EventID)}).Limit(1).Find(&ev).Error; err != nil {
		return false, nil, fmt.Errorf("sessions: read event: %w", err)
	}
	return false, &ev, nil
}

// eventOwner is whose message in is (its session and user) and the digest of
// its text, as an event row keeps them.
func eventOwner(in adapters.Inbound) (owner, digest string) {
	sum := sha256.Sum256([]byte(in.Text))
	return store.CleanText(in.SessionKey + " " + in.User), hex.EncodeToString(sum[:])
}

// sameMessage reports whether ev was claimed by in's message: the same
// session, user and text (rows from before owners were kept count as same).
func (ev *inboundEvent) sameMessage(in adapters.Inbound) bool {
	owner, digest := eventOwner(in)
	return ev.Owner == "" || ev.Owner == owner && ev.Digest == digest
}

// releaseEvent forgets event id, so the message may be sent again with it
// (M7, issue 37: a turn that failed keeps no error under its id).
func (s sessionStore) releaseEvent(ctx context.Context, id string) error {
	if err := s.db.WithContext(ctx).Where(map[string]any{"id": store.CleanText(id)}).Delete(&inboundEvent{}).Error; err != nil {
		return fmt.Errorf("sessions: release event: %w", err)
	}
	return nil
}

// eventAnswer is the answer kept for an event (M7).
type eventAnswer struct {
	session string
	out     adapters.Outbound
}

func (a eventAnswer) fields(answered time.Time) map[string]any {
	return map[string]any{"session_key": a.session, "kind": string(a.out.Kind), "text": a.out.Text, "model": a.out.Model,
		"ephemeral": a.out.Ephemeral, "answered_at": gorm.Expr("COALESCE(answered_at, ?)", answered)}
}

// answerEvent keeps the answer of event id, and when it was delivered (nil =
// not yet).
func answerEvent(tx *gorm.DB, id string, a eventAnswer, now time.Time, delivered *time.Time) error {
	f := a.fields(now)
	if delivered != nil {
		f["delivered_at"] = delivered.UTC()
	}
	if err := tx.Model(&inboundEvent{}).Where(map[string]any{"id": store.CleanText(id)}).Updates(f).Error; err != nil {
		return fmt.Errorf("sessions: answer event: %w", err)
	}
	return nil
}

// answerEvent keeps the answer of event id (see the function of that name).
func (s sessionStore) answerEvent(ctx context.Context, id string, a eventAnswer, now time.Time, delivered *time.Time) error {
	return answerEvent(s.db.WithContext(ctx), id, a, now, delivered)
}

// eventDelivered records that the answer stored for event id was delivered.
func (s sessionStore) eventDelivered(ctx context.Context, id string, at time.Time) error {
	err := s.db.WithContext(ctx).Model(&inboundEvent{}).Where(map[string]any{"id": store.CleanText(id)}).
		Update("delivered_at", at.UTC()).Error
	if err != nil {
		return fmt.Errorf("sessions: event delivered: %w", err)
	}
	return nil
}

// userUsage is one user's paid calls and estimated spend on one UTC day (T6),
// shared by restarts and replicas.
type userUsage struct {
	User  string  `gorm:"column:user_id;primaryKey"`
	Day   string  `gorm:"primaryKey"` // 2006-01-02, UTC
	Calls int     `gorm:"not null;default:0"`
	USD   float64 `gorm:"column:usd;not null;default:0"`
}

// TableName names the per-user usage table.
func (userUsage) TableName() string { return "user_usage" }

// takePaidCall counts one paid call of user on day, unless that would pass
// maxCalls (0 = no call cap) or the day's spend already reached maxUSD (0 = no
// spend cap). The check and the count are one statement, so replicas cannot
// both take the last call.
func (s sessionStore) takePaidCall(ctx context.Context, user, day string, maxCalls int, maxUSD float64) (bool, error) {
	db := s.db.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&userUsage{User: user, Day: day}).Error; err != nil {
		return false, fmt.Errorf("sessions: user usage: %w", err)
	}
	q := db.Model(&userUsage{}).Where(map[string]any{"user_id": store.CleanText(user), "day": day})
	if maxCalls > 0 {
		q = q.Where("calls < ?", maxCalls)
	}
	if maxUSD > 0 {
		q = q.Where("usd < ?", maxUSD)
	}
	res := q.Update("calls", gorm.Expr("calls + 1"))
	if res.Error != nil {
		return false, fmt.Errorf("sessions: user usage: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// usage reads user's counts of day.
func (s sessionStore) usage(ctx context.Context, user, day string) (userUsage, error) {
	var u userUsage
	err := s.db.WithContext(ctx).Where(map[string]any{"user_id": store.CleanText(user), "day": day}).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return userUsage{User: user, Day: day}, nil
	}
	return u, err
}

// addSpend adds the estimated cost of a paid call to user's day.
func (s sessionStore) addSpend(ctx context.Context, user, day string, usd float64) error {
	if usd <= 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Model(&userUsage{}).Where(map[string]any{"user_id": store.CleanText(user), "day": day}).
		Update("usd", gorm.Expr("usd + ?", usd)).Error
	if err != nil {
		return fmt.Errorf("sessions: user usage: %w", err)
	}
	return nil
}

// sessionStore is the router's session persistence: every statement of the
// package. Keys are cleaned like the stored text (store.CleanText) so a key
// with a NUL byte or invalid UTF-8 finds its row.
type sessionStore struct {
	db *gorm.DB
	// recovered, when set, is told when an update of this store ended the
	// open incident (V4), with when it began: one replica, once.
	recovered func(since time.Time)
}

func (s sessionStore) migrate(ctx context.Context) error {
	if err := store.Migrate(ctx, s.db, &Entry{}, &Message{}, &AttemptRow{}, &incidentRow{}, &incidentPeriod{}, &NoticeRow{}, &inboundEvent{}, &userUsage{}, &usageRow{}, &pendingTurn{}); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// byKey is the WHERE of one entry.
func byKey(key string) map[string]any { return map[string]any{"key": store.CleanText(key)} }

// load returns the entry of key, creating it when absent.
func (s sessionStore) load(ctx context.Context, key string) (*Entry, error) {
	db := s.db.WithContext(ctx)
	var e Entry
	err := db.Where(byKey(key)).Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		e = Entry{Key: key}
		switch created, err := s.create(ctx, &e); {
		case err != nil:
			return nil, err
		case created:
			return &e, nil
		}
		err = db.Where(byKey(key)).Take(&e).Error // another replica created it
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: load %s: %w", key, err)
	}
	return &e, nil
}

// create inserts e, a session that starts with its parent's model choice
// (inherit), unless another replica created it first (created false).
func (s sessionStore) create(ctx context.Context, e *Entry) (created bool, err error) {
	if err := s.inherit(ctx, e); err != nil {
		return false, err
	}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(e)
	if res.Error != nil {
		return false, fmt.Errorf("sessions: create %s: %w", e.Key, res.Error)
	}
	return res.RowsAffected == 1, nil
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
	err := s.db.WithContext(ctx).Where(byKey(parent)).Limit(1).Find(&p).Error
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

// beginTurn records that a turn of key begins (creating the entry when absent)
// and returns the entry as it is then, in one statement for a known session
// (UPDATE ... RETURNING). It is the turn's durable write before any paid call:
// a database that cannot be written fails here (T7). It also consumes a
// pending live switch (O4): the turn takes the session's model as it is now.
func (s sessionStore) beginTurn(ctx context.Context, key string, now time.Time) (*Entry, error) {
	db := s.db.WithContext(ctx)
	fields := map[string]any{"last_turn_at": now.UTC(), "live_switch": false}
	for range 2 {
		var e Entry
		res := db.Model(&e).Clauses(clause.Returning{}).Where(byKey(key)).Updates(fields)
		if res.Error != nil {
			return nil, fmt.Errorf("sessions: begin turn %s: %w", key, res.Error)
		}
		if res.RowsAffected == 1 {
			return &e, nil
		}
		t := now.UTC()
		e = Entry{Key: key, LastTurnAt: &t}
		switch created, err := s.create(ctx, &e); {
		case err != nil:
			return nil, err
		case created:
			return &e, nil
		}
		// Another replica created it meanwhile: update that one.
	}
	return nil, fmt.Errorf("sessions: begin turn %s: the entry keeps vanishing", key)
}

// exists reports whether key has an entry.
func (s sessionStore) exists(ctx context.Context, key string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Entry{}).Where(byKey(key)).Limit(1).Count(&n).Error
	return n > 0, err
}

// historyOrder is the order of a conversation's history: the time each
// exchange was answered (its messages' CreatedAt), then the order they were
// written. An answer kept in memory while the database failed (M8) is written
// after later turns another replica answered, and still reads in its place
// (M4, issue 37).
const historyOrder = "created_at, id"

// history returns the stored messages of key, oldest first.
func (s sessionStore) history(ctx context.Context, key string) ([]Message, error) {
	var msgs []Message
	if err := s.db.WithContext(ctx).Where(map[string]any{"session_key": store.CleanText(key)}).Order(historyOrder).Find(&msgs).Error; err != nil {
		return nil, fmt.Errorf("sessions: history %s: %w", key, err)
	}
	return msgs, nil
}

// patch updates fields of key.
func (s sessionStore) patch(ctx context.Context, key string, fields map[string]any) error {
	if err := s.db.WithContext(ctx).Model(&Entry{}).Where(byKey(key)).Updates(fields).Error; err != nil {
		return fmt.Errorf("sessions: update %s: %w", key, err)
	}
	return nil
}

// casPatch updates fields of key only where every column of match still holds
// the given value; it reports whether the row matched (O2, O3).
func (s sessionStore) casPatch(ctx context.Context, key string, match, fields map[string]any) (bool, error) {
	q := s.db.WithContext(ctx).Model(&Entry{}).Where(byKey(key))
	for col, v := range match {
		q = q.Where(clause.Eq{Column: clause.Column{Name: col}, Value: v})
	}
	res := q.Updates(fields)
	if res.Error != nil {
		return false, fmt.Errorf("sessions: update %s: %w", key, res.Error)
	}
	return res.RowsAffected > 0, nil
}

// paidCounts is what paid calls add to a session's counts (/status, N5).
type paidCounts struct {
	calls   int
	usd     float64
	in, out int64 // tokens, as /usage counts them (U1)
}

// addPaidCalls adds c to key's counts.
func (s sessionStore) addPaidCalls(ctx context.Context, key string, c paidCounts) error {
	return s.patch(ctx, key, map[string]any{"paid_calls": gorm.Expr("paid_calls + ?", c.calls), "cost_usd": gorm.Expr("cost_usd + ?", c.usd),
		"input_tokens": gorm.Expr("input_tokens + ?", c.in), "output_tokens": gorm.Expr("output_tokens + ?", c.out)})
}

// dropHistory deletes the messages of key that come before message before in
// the history's order (compaction), or all of them (before == 0).
func dropHistory(tx *gorm.DB, key string, before uint64) error {
	q := tx.Where(map[string]any{"session_key": store.CleanText(key)})
	if before > 0 {
		at := tx.Model(&Message{}).Select("created_at").Where(map[string]any{"id": before})
		q = q.Where("(created_at < (?) OR (created_at = (?) AND id < ?))", at, at, before)
	}
	if err := q.Delete(&Message{}).Error; err != nil {
		return fmt.Errorf("sessions: drop history %s: %w", key, err)
	}
	return nil
}

// compact drops the history of key below message id keep (0 = all) and bumps the
// compaction count, in one transaction; a non-nil summary replaces the stored
// one in the same transaction (R16).
func (s sessionStore) compact(ctx context.Context, key string, keep uint64, summary *string) error {
	return store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		if err := dropHistory(tx, key, keep); err != nil {
			return err
		}
		upd := map[string]any{"compaction_count": gorm.Expr("compaction_count + 1")}
		if summary != nil {
			upd["summary"], upd["summaries"] = *summary, gorm.Expr("summaries + 1")
		}
		return tx.Model(&Entry{}).Where(byKey(key)).Updates(upd).Error
	})
}

// compactIf is compact with a summary written off a turn (R16), stored only
// while the session is as it was read: message keep still there and the
// compaction count unchanged. A /reset, /new, /compact or another compaction
// meanwhile makes the summary stale, and stored reports false.
func (s sessionStore) compactIf(ctx context.Context, key string, keep uint64, summary string, count int) (stored bool, err error) {
	err = store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		stored = false // the transaction may run more than once
		var n int64
		if err := tx.Model(&Message{}).Where(map[string]any{"session_key": store.CleanText(key), "id": keep}).Count(&n).Error; err != nil {
			return fmt.Errorf("sessions: compact %s: %w", key, err)
		}
		if n == 0 {
			return nil
		}
		res := tx.Model(&Entry{}).Where(byKey(key)).Where(map[string]any{"compaction_count": count}).Updates(map[string]any{
			"compaction_count": gorm.Expr("compaction_count + 1"), "summary": summary, "summaries": gorm.Expr("summaries + 1")})
		if res.Error != nil {
			return fmt.Errorf("sessions: compact %s: %w", key, res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		stored = true
		return dropHistory(tx, key, keep)
	})
	return stored, err
}

// restart drops the whole history of key and applies fields, in one
// transaction (/new, /reset).
func (s sessionStore) restart(ctx context.Context, key string, fields map[string]any) error {
	fields = merge(fields, map[string]any{"summaries": 0}) // a new conversation has paid for none yet
	return store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		if err := dropHistory(tx, key, 0); err != nil {
			return err
		}
		return tx.Model(&Entry{}).Where(byKey(key)).Updates(fields).Error
	})
}

// addAttempts stores attempt records.
func (s sessionStore) addAttempts(ctx context.Context, rows []AttemptRow) error {
	if len(rows) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Create(&rows).Error
}

// exchange is what a successful turn stores, in one transaction.
type exchange struct {
	// id names this exchange (M8): a retried write whose first commit was in
	// doubt (the connection broke during COMMIT) finds it stored and stops.
	id        string
	key       string
	messages  []Message    // the user's message and the answer
	attempts  []AttemptRow // V1
	fields    map[string]any
	paidCalls int
	tokensIn  int64
	tokensOut int64
	cost      float64 // estimated cost of the turn's calls (prices), for /status
	// returned: back on the origin (S3, N2): clear the auto override if it is
	// still the fallback's.
	returned bool
	// pin: the profile to pin (P2) unless the user pinned one; "" = none.
	pin          string
	pinCompacted int
	// notice is the fallback or cleared notice this turn's state change makes
	// ("" = none), kept for `bot history`.
	notice      string
	noticeState notices.State // the change notice says
	// event is the EventID the exchange answers ("" = none): its answer is kept
	// with the event (M7), in the same transaction.
	event  string
	answer eventAnswer
	// delivered is when the answer was delivered, when it was before the
	// exchange could be stored (M8); nil = not known to be.
	delivered *time.Time
}

// size is about the bytes x holds, for the bound on exchanges kept in memory.
func (x exchange) size() int {
	n := len(x.answer.out.Text)
	for _, m := range x.messages {
		n += len(m.Content)
	}
	for _, a := range x.attempts {
		n += len(a.Summary) + 128
	}
	return n + 512
}

// errStoredBefore says an exchange was found stored already (M8).
var errStoredBefore = errors.New("sessions: exchange stored before")

// storeExchange writes a successful turn: history, attempts, notice state and
// counters, the override and profile pin changes, and the end of any open
// incident (a success anywhere ends it for every replica, V4).
//
// The entry's update comes first and names the exchange (LastExchange), only
// where the entry does not name it already: a write retried after its commit
// was in doubt stores nothing twice (M8), and storeExchange reports success.
func (s sessionStore) storeExchange(ctx context.Context, x exchange) error {
	var ended *time.Time // the incident this exchange ended began then
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) (err error) {
		ended = nil
		upd := map[string]any{
			"paid_calls":    gorm.Expr("paid_calls + ?", x.paidCalls),
			"input_tokens":  gorm.Expr("input_tokens + ?", x.tokensIn),
			"output_tokens": gorm.Expr("output_tokens + ?", x.tokensOut),
			"cost_usd":      gorm.Expr("cost_usd + ?", x.cost),
			"last_exchange": x.id,
		}
		for k, v := range x.fields {
			upd[k] = v
		}
		res := tx.Model(&Entry{}).Where(byKey(x.key)).Where("last_exchange IS NULL OR last_exchange <> ?", x.id).Updates(upd)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errStoredBefore
		}
		if err := tx.Where(map[string]any{"id": x.id}).Delete(&pendingTurn{}).Error; err != nil {
			return err // the exchange is no longer pending: with it, in one transaction (M4)
		}
		msgs := append([]Message(nil), x.messages...) // Create sets IDs: a retry starts clean
		if err := tx.Create(&msgs).Error; err != nil {
			return err
		}
		if len(x.attempts) > 0 {
			rows := append([]AttemptRow(nil), x.attempts...)
			if err := tx.Create(&rows).Error; err != nil {
				return err
			}
		}
		if x.notice != "" {
			row := NoticeRow{SessionKey: x.key, Text: x.notice, CreatedAt: x.messages[0].CreatedAt,
				Selected: x.noticeState.Selected, Active: x.noticeState.Active, Reason: string(x.noticeState.Reason)}
			if err := tx.Create(&row).Error; err != nil {
				return err
			}
		}
		if x.returned {
			q := tx.Model(&Entry{}).Where(byKey(x.key)).Where(map[string]any{"model_override_source": string(failover.SourceAuto)})
			if err := q.Updates(merge(clearedOverride(), map[string]any{"last_probe_at": nil})).Error; err != nil {
				return err
			}
		}
		if x.pin != "" {
			q := tx.Model(&Entry{}).Where(byKey(x.key)).Where("auth_profile_override_source <> ?", string(failover.SourceUser))
			if err := q.Updates(map[string]any{"auth_profile_override": x.pin,
				"auth_profile_override_source": string(failover.SourceAuto), "auth_profile_override_compaction_count": x.pinCompacted}).Error; err != nil {
				return err
			}
		}
		if x.event != "" {
			if err := answerEvent(tx, x.event, x.answer, x.messages[0].CreatedAt, x.delivered); err != nil {
				return err
			}
		}
		ended, err = closeIncident(tx, x.messages[len(x.messages)-1].CreatedAt)
		return err
	})
	if errors.Is(err, errStoredBefore) {
		return nil
	}
	if err == nil {
		s.ended(ended)
	}
	return err
}

// pendingTurn marks a turn whose exchange is not stored yet (M4, issue 37):
// written as the turn begins, deleted with its exchange (storeExchange) or
// when it ends without one. A turn on another replica that finds an earlier
// one of its session pending waits a little for its exchange, so its prompt
// holds it; an answer kept in memory while the database failed (M8) keeps its
// mark until it is written.
type pendingTurn struct {
	ID         string    `gorm:"primaryKey"` // the turn's exchange id
	SessionKey string    `gorm:"index;not null"`
	BeganAt    time.Time `gorm:"not null"`
}

// TableName names the pending turns table.
func (pendingTurn) TableName() string { return "pending_turns" }

// pendingStale is when a mark no longer holds a turn back: its process ended
// (a crash leaves the mark) or its kept answer was lost. An answer kept in
// memory is written within about ten minutes or not at all (flushTries).
const pendingStale = 15 * time.Minute

// markPending records that turn id of key began at (idempotent: a turn that
// starts again, O6, keeps its mark).
func (s sessionStore) markPending(ctx context.Context, id, key string, at time.Time) error {
	row := pendingTurn{ID: id, SessionKey: store.CleanText(key), BeganAt: at.UTC()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("sessions: mark turn pending: %w", err)
	}
	return nil
}

// pendingBefore counts the turns of key, other than id, that began before at
// (and not so long before that their mark is stale) and have no stored
// exchange yet.
func (s sessionStore) pendingBefore(ctx context.Context, id, key string, at time.Time) (int64, error) {
	var n int64
	if err := pendingWhere(s.db.WithContext(ctx), id, key, at).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("sessions: read pending turns: %w", err)
	}
	return n, nil
}

// pendingWhere selects the marks pendingBefore counts.
func pendingWhere(db *gorm.DB, id, key string, at time.Time) *gorm.DB {
	at = at.UTC()
	return db.Model(&pendingTurn{}).Where(map[string]any{"session_key": store.CleanText(key)}).
		Where("id <> ? AND began_at > ? AND began_at < ?", id, at.Add(-pendingStale), at)
}

// dropPendingBefore deletes the marks pendingBefore counts: the turn waited
// for them long enough and answered without their exchanges, so later turns
// do not wait for them again (their exchanges, if ever written, still read in
// their place).
func (s sessionStore) dropPendingBefore(ctx context.Context, id, key string, at time.Time) error {
	if err := pendingWhere(s.db.WithContext(ctx), id, key, at).Delete(&pendingTurn{}).Error; err != nil {
		return fmt.Errorf("sessions: drop pending turns: %w", err)
	}
	return nil
}

// clearPending deletes the mark of turn id (it ended without an exchange to
// store), and now and then the marks gone stale.
func (s sessionStore) clearPending(ctx context.Context, id string, now time.Time) error {
	db := s.db.WithContext(ctx)
	if err := db.Where(map[string]any{"id": id}).Delete(&pendingTurn{}).Error; err != nil {
		return fmt.Errorf("sessions: clear pending turn: %w", err)
	}
	if now.Unix()%64 == 0 {
		db.Where("began_at < ?", now.Add(-pendingStale).UTC()).Delete(&pendingTurn{})
	}
	return nil
}

// ended tells s.recovered of the incident an update ended, if any.
func (s sessionStore) ended(since *time.Time) {
	if since != nil && s.recovered != nil {
		s.recovered(*since)
	}
}

// incidentOpen reports whether an incident is open.
func (s sessionStore) incidentOpen(ctx context.Context) (bool, error) {
	var row incidentRow
	err := s.db.WithContext(ctx).Where(map[string]any{"id": 1}).Limit(1).Find(&row).Error
	return row.Open, err
}

// openIncident claims the incident; false when one is already open, so exactly
// one caller (across replicas) sends the report.
func (s sessionStore) openIncident(ctx context.Context, now time.Time) (bool, error) {
	db := s.db.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&incidentRow{ID: 1}).Error; err != nil {
		return false, fmt.Errorf("sessions: incident: %w", err)
	}
	claimed := false
	err := store.Transaction(ctx, db, func(tx *gorm.DB) error {
		res := tx.Model(&incidentRow{}).Where(map[string]any{"id": 1, "open": false}).Updates(map[string]any{"open": true, "opened_at": now.UTC()})
		if res.Error != nil {
			return res.Error
		}
		claimed = res.RowsAffected == 1
		if !claimed {
			return nil
		}
		return tx.Create(&incidentPeriod{OpenedAt: now.UTC()}).Error
	})
	if err != nil {
		return false, fmt.Errorf("sessions: incident: %w", err)
	}
	return claimed, nil
}

// endIncident ends an open incident (/recover).
func (s sessionStore) endIncident(ctx context.Context, now time.Time) error {
	var since *time.Time
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) (err error) {
		since, err = closeIncident(tx, now)
		return err
	})
	if err == nil {
		s.ended(since)
	}
	return err
}

// closeIncident ends an open incident (a no-op when none is open), and its
// period at now. since is when the incident it ended began; nil when this
// update ended none (none was open, or another replica ended it first: the
// compare-and-set decides).
func closeIncident(tx *gorm.DB, now time.Time) (since *time.Time, err error) {
	res := tx.Model(&incidentRow{}).Where(map[string]any{"id": 1, "open": true}).Update("open", false)
	if res.Error != nil || res.RowsAffected != 1 {
		return nil, res.Error
	}
	if err := tx.Model(&incidentPeriod{}).Where("closed_at IS NULL").Update("closed_at", now.UTC()).Error; err != nil {
		return nil, err
	}
	// Read within the update's transaction: a close does not write opened_at.
	var row incidentRow
	if err := tx.Where(map[string]any{"id": 1}).Limit(1).Find(&row).Error; err != nil {
		return nil, err
	}
	return row.OpenedAt, nil
}

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

// clearedOverride is the patch that removes every O1 field.
func clearedOverride() map[string]any {
	return map[string]any{
		"provider_override": "", "model_override": "", "model_override_source": "",
		"auth_profile_override": "", "auth_profile_override_source": "", "auth_profile_override_compaction_count": 0,
		"fallback_origin": "", "fallback_reason": "", "fallback_status": 0,
	}
}

// HistoryQuery selects the fallback history (`bot history`).
type HistoryQuery struct {
	Session string    // one session's key; "" = every session
	Since   time.Time // zero = from the start
	// All includes the turns whose first call answered; by default only turns
	// with a failed or skipped attempt are shown.
	All   bool
	Limit int // the newest Limit events; 0 = 1000
}

// HistoryEvent is one recorded attempt (V1) or notice.
type HistoryEvent struct {
	Time    time.Time
	Session string
	Turn    string // the attempts of one turn share it; "" for a notice
	Notice  string // the notice's text; "" for an attempt
	// An attempt's record.
	Model, Profile, Kind string
	Reason               string // "" on success
	Skipped              string // why no call was made
	Status               int
	Code                 string
	Summary              string
	Duration             time.Duration
}

// ReadHistory returns the attempts and notices q selects, oldest first. A
// database where no turn ever ran has none. It only reads.
func ReadHistory(ctx context.Context, db *gorm.DB, q HistoryQuery) ([]HistoryEvent, error) {
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	db = db.WithContext(ctx)
	var failed []string // by default, only the turns with a failed or skipped attempt
	if !q.All {
		failed = append(failed, "EXISTS (SELECT 1 FROM session_attempts b WHERE b.session_key = session_attempts.session_key"+
			" AND b.turn = session_attempts.turn AND (b.reason <> '' OR b.skipped <> ''))")
	}
	attempts, err := newest[AttemptRow](db, "started_at", q, failed...)
	if err != nil {
		return nil, fmt.Errorf("sessions: read attempts: %w", err)
	}
	notes, err := newest[NoticeRow](db, "created_at", q)
	if err != nil {
		return nil, fmt.Errorf("sessions: read notices: %w", err)
	}
	out := make([]HistoryEvent, 0, len(attempts)+len(notes))
	for _, a := range attempts {
		out = append(out, HistoryEvent{Time: a.StartedAt, Session: a.SessionKey, Turn: a.Turn, Model: a.Model,
			Profile: a.Profile, Kind: a.Kind, Reason: a.Reason, Skipped: a.Skipped, Status: a.Status, Code: a.Code,
			Summary: a.Summary, Duration: time.Duration(a.DurationMS) * time.Millisecond})
	}
	for _, n := range notes {
		out = append(out, HistoryEvent{Time: n.CreatedAt, Session: n.SessionKey, Notice: n.Text})
	}
	// Newest last; a turn's notice comes after its attempts (it is stored when
	// the answer is, after every attempt began).
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out, nil
}

// newest reads the newest q.Limit rows of T that q selects (its session,
// since q.Since by the time column at, and where), oldest first; none when
// T's table does not exist.
func newest[T any](db *gorm.DB, at string, q HistoryQuery, where ...string) ([]T, error) {
	var rows []T
	if !db.Migrator().HasTable(new(T)) {
		return nil, nil
	}
	tx := db.Model(new(T))
	if q.Session != "" {
		tx = tx.Where("session_key = ?", store.CleanText(q.Session))
	}
	if !q.Since.IsZero() {
		tx = tx.Where(at+" >= ?", q.Since.UTC())
	}
	for _, w := range where {
		tx = tx.Where(w)
	}
	if err := tx.Order(at + " DESC, id DESC").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	slices.Reverse(rows)
	return rows, nil
}

// usageRow is what one user spent in one place on one model on one UTC day
// (U2): paid calls, tokens and estimated cost, with how many of the calls had
// their tokens estimated because the provider sent none (U1). Rows are only
// ever incremented, so replicas add up without losing a call (M2).
type usageRow struct {
	Day       string  `gorm:"primaryKey"` // 2006-01-02, UTC
	User      string  `gorm:"column:user_id;primaryKey"`
	Place     string  `gorm:"primaryKey"` // where the conversation is: placeOf(session key)
	Model     string  `gorm:"primaryKey"` // provider/model
	Calls     int64   `gorm:"not null;default:0"`
	TokensIn  int64   `gorm:"not null;default:0"`
	TokensOut int64   `gorm:"not null;default:0"`
	Estimated int64   `gorm:"not null;default:0"` // calls whose tokens are estimates
	USD       float64 `gorm:"column:usd;not null;default:0"`
}

// TableName names the usage table.
func (usageRow) TableName() string { return "usage_days" }

// addUsage adds rows to the stored ones, one upsert each (usually one a turn).
func (s sessionStore) addUsage(ctx context.Context, rows []usageRow) error {
	db := s.db.WithContext(ctx)
	add := func(col string) clause.Expr {
		return gorm.Expr("usage_days." + col + " + excluded." + col)
	}
	for _, u := range rows {
		u.User, u.Place, u.Model = store.CleanText(u.User), store.CleanText(u.Place), store.CleanText(u.Model)
		err := db.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "day"}, {Name: "user_id"}, {Name: "place"}, {Name: "model"}},
			DoUpdates: clause.Assignments(map[string]any{"calls": add("calls"), "tokens_in": add("tokens_in"),
				"tokens_out": add("tokens_out"), "estimated": add("estimated"), "usd": add("usd")}),
		}).Create(&u).Error
		if err != nil {
			return fmt.Errorf("sessions: usage: %w", err)
		}
	}
	return nil
}

// UsageSum is the usage of a group of rows (U2, U3).
type UsageSum struct {
	Key       string `gorm:"column:grp"` // the user, place or model of the group ("" for a total)
	Calls     int64
	TokensIn  int64
	TokensOut int64
	Estimated int64
	USD       float64
}

// usageColumns are the groupings /usage all shows.
var usageColumns = map[string]bool{"user_id": true, "place": true, "model": true}

// usageSums adds up the rows of days [from, to) (user "" = every user), grouped
// by column ("" = one total), the largest spend first, at most limit groups.
func (s sessionStore) usageSums(ctx context.Context, user, column, from, to string, limit int) ([]UsageSum, error) {
	sel := "COALESCE(SUM(calls), 0) AS calls, COALESCE(SUM(tokens_in), 0) AS tokens_in, COALESCE(SUM(tokens_out), 0) AS tokens_out, " +
		"COALESCE(SUM(estimated), 0) AS estimated, COALESCE(SUM(usd), 0) AS usd"
	q := s.db.WithContext(ctx).Model(&usageRow{}).Where("day >= ? AND day < ?", from, to)
	if user != "" {
		q = q.Where("user_id = ?", store.CleanText(user))
	}
	if column != "" {
		if !usageColumns[column] {
			return nil, fmt.Errorf("sessions: usage: unknown grouping %q", column)
		}
		q = q.Select(column + " AS grp, " + sel).Group(column).Order("SUM(usd) DESC, SUM(calls) DESC, " + column).Limit(limit)
	} else {
		q = q.Select("'' AS grp, " + sel)
	}
	var out []UsageSum
	if err := q.Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("sessions: usage: %w", err)
	}
	return out, nil
}
