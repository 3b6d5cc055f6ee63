package app

import (
	"testing"
	"time"

	"github.com/detourbot/detour/health"
)

// TestFingerprint_Issue38: the board feed tells the channels of a change in
// what the board shows, not of the moment it was computed, the spend, a key's
// last use or the length of an all-down period still running.
// covers issue 38
func TestFingerprint_Issue38(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	base := func() health.Board {
		return health.Board{Version: 1, At: t0, Admin: true, AllDown: &health.Period{Since: t0.Add(-time.Minute)},
			Providers: []health.ProviderView{{Name: "p", State: health.Answering,
				Models: []health.ModelView{{Ref: "p/m", State: health.Answering}},
				Keys:   []health.KeyView{{ID: "p:k", State: health.Answering, LastUsed: t0}}}},
			Timeline: []health.Event{{At: t0.Add(-time.Minute), Kind: health.AllDown, Seconds: 60, Ongoing: true}},
			Today:    &health.Today{Calls: 1}}
	}
	tests := []struct {
		name    string
		change  func(*health.Board)
		changed bool
	}{
		{"computed later", func(b *health.Board) { b.At = t0.Add(time.Hour) }, false},
		{"more spend", func(b *health.Board) { b.Today = &health.Today{Calls: 9, USD: 1} }, false},
		{"a key used", func(b *health.Board) { b.Providers[0].Keys[0].LastUsed = t0.Add(time.Second) }, false},
		{"an outage goes on", func(b *health.Board) { b.Timeline[0].Seconds = 120 }, false},
		{"a model cools down", func(b *health.Board) { b.Providers[0].Models[0].State = health.CoolingDown }, true},
		{"a key disabled", func(b *health.Board) { b.Providers[0].Keys[0].State = health.Disabled }, true},
		{"all down ends", func(b *health.Board) { b.AllDown = nil }, true},
		{"a new fallback", func(b *health.Board) { b.Fallbacks = []health.FallbackView{{From: "p/m", To: "q/m", Count: 1}} }, true},
	}
	for _, tt := range tests {
		a, b := base(), base()
		tt.change(&b)
		if got := fingerprint(a) != fingerprint(b); got != tt.changed {
			t.Errorf("%s: changed %v, want %v", tt.name, got, tt.changed)
		}
		if !a.Providers[0].Keys[0].LastUsed.Equal(t0) || a.Timeline[0].Seconds != 60 || a.Today == nil {
			t.Fatalf("%s: fingerprint changed the board it read", tt.name)
		}
	}
}
