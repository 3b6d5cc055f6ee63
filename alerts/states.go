package alerts

import (
	"context"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// WatchStates wraps the engine's state store so that every disable of a key
// for billing or a permanent auth failure (D3, D4) that an update commits is
// told to alert as a key_disabled event. The engine decides disables; this
// only watches the states it stores, so the failover package knows nothing of
// alerts. Only the update that commits the change sees it (a replica that
// finds the key disabled already changes nothing: D1 never extends a
// window), and the event's id names the key and its new end, so it is the
// same wherever it is derived. now stamps the events (nil = time.Now).
//
// The result keeps st's BatchGetter and BatchUpdater when st has both.
func WatchStates(st failover.StateStore, now func() time.Time, alert func(Event)) failover.StateStore {
	if now == nil {
		now = time.Now
	}
	w := watched{st: st, now: now, alert: alert}
	bg, ok1 := st.(failover.BatchGetter)
	bu, ok2 := st.(failover.BatchUpdater)
	if ok1 && ok2 {
		return &watchedBatch{watched: w, bg: bg, bu: bu}
	}
	return &w
}

type watched struct {
	st    failover.StateStore
	now   func() time.Time
	alert func(Event)
}

type watchedBatch struct {
	watched
	bg failover.BatchGetter
	bu failover.BatchUpdater
}

// Get implements failover.StateStore.
func (w *watched) Get(ctx context.Context, key string) (failover.ProfileState, error) {
	return w.st.Get(ctx, key)
}

// Update implements failover.StateStore. fn may run more than once; the
// last run is the one the store committed.
func (w *watched) Update(ctx context.Context, key string, fn func(*failover.ProfileState)) (failover.ProfileState, error) {
	var before, after failover.ProfileState
	out, err := w.st.Update(ctx, key, func(s *failover.ProfileState) {
		before = *s
		fn(s)
		after = *s
	})
	if err == nil {
		w.check(key, before, after, out)
	}
	return out, err
}

// GetMany implements failover.BatchGetter.
func (w *watchedBatch) GetMany(ctx context.Context, keys []string) ([]failover.ProfileState, error) {
	return w.bg.GetMany(ctx, keys)
}

// UpdateMany implements failover.BatchUpdater.
func (w *watchedBatch) UpdateMany(ctx context.Context, keys []string, fn func(i int, st *failover.ProfileState)) ([]failover.ProfileState, error) {
	before := make([]failover.ProfileState, len(keys))
	after := make([]failover.ProfileState, len(keys))
	out, err := w.bu.UpdateMany(ctx, keys, func(i int, s *failover.ProfileState) {
		before[i] = *s
		fn(i, s)
		after[i] = *s
	})
	if err == nil && len(out) == len(keys) {
		for i, k := range keys {
			w.check(k, before[i], after[i], out[i])
		}
	}
	return out, err
}

// check alerts when the committed update of key disabled it.
func (w *watched) check(key string, before, after, stored failover.ProfileState) {
	if w.alert == nil || strings.HasPrefix(key, "model:") || strings.HasPrefix(key, "probe:") {
		return
	}
	if r := after.DisabledReason; r != classify.ReasonBilling && r != classify.ReasonAuthPermanent {
		return
	}
	if after.DisabledUntil.IsZero() || after.DisabledUntil.Equal(before.DisabledUntil) || !stored.DisabledUntil.Equal(after.DisabledUntil) {
		return
	}
	w.alert(NewKeyDisabled(w.now(), key, string(after.DisabledReason), after.DisabledUntil))
}
