package store

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/sqlite"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

func TestNanos_Clamps(t *testing.T) {
	tests := []struct {
		at   time.Time
		want int64
	}{
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Unix(1, 5), 1_000_000_005},
	}
	for _, tc := range tests {
		if got := nanos(tc.at); got != tc.want {
			t.Errorf("nanos(%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

// TestDecodeTime: integer nanoseconds, NULL, and the DATETIME text (or parsed
// time) of a file written before times were integers; bad values are errors.
func TestDecodeTime(t *testing.T) {
	want := time.Date(2026, 11, 29, 22, 14, 5, 987654321, time.UTC)
	tests := []struct {
		name    string
		in      any
		want    time.Time
		wantErr bool
	}{
		{"integer", want.UnixNano(), want, false},
		{"null", nil, time.Time{}, false},
		{"mattn text", "2026-11-29 22:14:05.987654321+00:00", want, false},
		{"text in another zone", "2026-11-29 23:14:05.987654321+01:00", want, false},
		{"bytes with T and Z", []byte("2026-11-29T22:14:05.987654321Z"), want, false},
		{"parsed time", want.In(time.FixedZone("X", 7200)), want, false},
		{"zero parsed time", time.Time{}, time.Time{}, false},
		{"garbage", "yesterday", time.Time{}, true},
		{"float", 1.5, time.Time{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeTime(tc.in)
			if (err != nil) != tc.wantErr || !got.Equal(tc.want) || (!got.IsZero() && got.Location() != time.UTC) {
				t.Errorf("decodeTime(%v) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestStateStore_OldDatetimeTextFile: a file whose profile_states was created
// with DATETIME text columns opens, its rows read back exactly, and they can be
// updated.
// covers D6
func TestStateStore_OldDatetimeTextFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open(sqlite.DriverName, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE `profile_states` (`key` text,`last_used` datetime,`last_failure` datetime," +
			"`error_count` integer NOT NULL DEFAULT 0,`consecutive` integer NOT NULL DEFAULT 0,`cooldown_until` datetime," +
			"`cooldown_reason` text,`cooldown_model` text,`disabled_until` datetime,`disabled_reason` text," +
			"`disable_count` integer NOT NULL DEFAULT 0,`recovery_at` datetime,`last_error` text,`last_probe` datetime," +
			"`updated_at` datetime,PRIMARY KEY (`key`))",
		"INSERT INTO profile_states (key, last_used, error_count, consecutive, cooldown_until, cooldown_reason, " +
			"cooldown_model, disabled_reason, disable_count, last_error, updated_at) VALUES ('openai:default', " +
			"'2026-11-29 22:14:05.987654321+00:00', 2, 1, '2026-11-29 22:19:05.5+00:00', 'rate_limit', '', '', 0, '', " +
			"'2026-11-29 22:14:05+00:00')",
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	want := failover.ProfileState{Key: "openai:default", ErrorCount: 2, Consecutive: 1,
		LastUsed:       time.Date(2026, 11, 29, 22, 14, 5, 987654321, time.UTC),
		CooldownUntil:  time.Date(2026, 11, 29, 22, 19, 5, 500000000, time.UTC),
		CooldownReason: classify.ReasonRateLimit}
	db := openT(t, path)
	var ddl string
	if err := db.Raw("SELECT sql FROM sqlite_master WHERE name = 'profile_states'").Scan(&ddl).Error; err != nil {
		t.Fatal(err)
	}
	// AutoMigrate retypes the columns (the driver would otherwise read integers
	// in a DATETIME column as seconds); the old text values stay text.
	if !strings.Contains(ddl, "`last_used` integer") || !strings.Contains(ddl, "`cooldown_until` integer") {
		t.Errorf("profile_states after Open: %s; want integer time columns", ddl)
	}
	s := newStoreT(t, db)
	if got := mustGet(t, s, "openai:default"); !reflect.DeepEqual(got, want) {
		t.Errorf("old row:\n got %+v\nwant %+v", got, want)
	}
	got := mustUpdate(t, s, "openai:default", func(p *failover.ProfileState) { p.ErrorCount++ })
	want.ErrorCount = 3
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old row updated:\n got %+v\nwant %+v", got, want)
	}
	if got := mustGet(t, newStoreT(t, openT(t, path)), "openai:default"); !reflect.DeepEqual(got, want) {
		t.Errorf("old row updated, other handle:\n got %+v\nwant %+v", got, want)
	}
}
