package alerts

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/detourbot/detour/internal/store"
)

// deliveryRow is one event's delivery to one hook. Its insert is the claim:
// the one replica (or the one life of a process) whose INSERT creates the row
// delivers the event; any other finds it and sends nothing.
type deliveryRow struct {
	ID         string    `gorm:"primaryKey"` // event id + "/" + hook key
	EventID    string    `gorm:"not null;index"`
	Type       string    `gorm:"not null"`
	Hook       string    `gorm:"not null"` // hookKey: a digest of the URL, which may hold a token
	ClaimedAt  time.Time `gorm:"not null;index"`
	Outcome    string    `gorm:"not null;default:'pending'"` // pending, delivered or failed
	Attempts   int       `gorm:"not null;default:0"`
	LastStatus int       `gorm:"not null;default:0"` // the last answer's HTTP status; 0 = none (no connection, timeout)
	DoneAt     *time.Time
}

// TableName names the deliveries table.
func (deliveryRow) TableName() string { return "alert_deliveries" }

// keepDeliveries is how long delivery rows are kept: far longer than any
// replica's queue holds an event.
const keepDeliveries = 30 * 24 * time.Hour

// claims records which events were claimed for delivery to which hooks.
type claims interface {
	// claim reports whether the caller now owns the delivery of event to hook
	// (false: someone claimed it before).
	claim(ctx context.Context, e Event, hook string, now time.Time) (bool, error)
	// done records how the delivery ended.
	done(ctx context.Context, e Event, hook string, outcome string, attempts, status int, now time.Time) error
}

// dbClaims keeps the claims in the shared database (SQLite or Postgres, M1).
type dbClaims struct{ db *gorm.DB }

// newDBClaims migrates the deliveries table and forgets rows older than
// keepDeliveries.
func newDBClaims(ctx context.Context, db *gorm.DB, now time.Time) (*dbClaims, error) {
	if err := store.Migrate(ctx, db, &deliveryRow{}); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	if err := db.WithContext(ctx).Where("claimed_at < ?", now.UTC().Add(-keepDeliveries)).Delete(&deliveryRow{}).Error; err != nil {
		return nil, fmt.Errorf("alerts: prune deliveries: %w", store.Explain(err))
	}
	return &dbClaims{db: db}, nil
}

func (c *dbClaims) claim(ctx context.Context, e Event, hook string, now time.Time) (bool, error) {
	row := deliveryRow{ID: e.ID + "/" + hook, EventID: e.ID, Type: string(e.Type), Hook: hook, ClaimedAt: now.UTC(), Outcome: "pending"}
	var won bool
	err := store.Transaction(ctx, c.db, func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		won = res.RowsAffected == 1
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("alerts: claim %s: %w", e.ID, store.Explain(err))
	}
	return won, nil
}

func (c *dbClaims) done(ctx context.Context, e Event, hook string, outcome string, attempts, status int, now time.Time) error {
	t := now.UTC()
	err := c.db.WithContext(ctx).Model(&deliveryRow{}).Where(map[string]any{"id": e.ID + "/" + hook}).
		Updates(map[string]any{"outcome": outcome, "attempts": attempts, "last_status": status, "done_at": &t}).Error
	if err != nil {
		return fmt.Errorf("alerts: record delivery %s: %w", e.ID, store.Explain(err))
	}
	return nil
}

// memClaims keeps the claims in memory: one process, no database (tests).
type memClaims struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *memClaims) claim(_ context.Context, e Event, hook string, _ time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := e.ID + "/" + hook
	if _, ok := c.m[k]; ok {
		return false, nil
	}
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[k] = "pending"
	return true, nil
}

func (c *memClaims) done(_ context.Context, e Event, hook string, outcome string, _, _ int, _ time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[e.ID+"/"+hook] = outcome
	return nil
}
