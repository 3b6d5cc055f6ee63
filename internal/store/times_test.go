package store

import (
	"math"
	"testing"
	"time"
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
