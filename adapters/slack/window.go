package slack

import (
	"sync"
	"time"
)

// Per-method limits of Slack's Web API tiers, in calls per minute per workspace
// (https://docs.slack.dev/apis/web-api/rate-limits/). The live-reply methods are
// kept inside them by a sliding window, so a busy workspace gets slower streams
// rather than HTTP 429s.
var methodLimits = map[string]int{
	"chat.startStream":  20,  // Tier 2 (https://docs.slack.dev/reference/methods/chat.startStream)
	"chat.appendStream": 100, // Tier 4 (https://docs.slack.dev/reference/methods/chat.appendStream)
	"chat.stopStream":   20,  // Tier 2 (https://api.slack.com/methods/chat.stopStream)
	"chat.update":       50,  // Tier 3 (https://docs.slack.dev/reference/methods/chat.update)
	"chat.delete":       50,  // Tier 3 (https://docs.slack.dev/reference/methods/chat.delete)
}

// window keeps calls of each limited method within its per-minute limit: at most
// limit calls in any 60 seconds, the way Slack counts them. A call counts from
// the moment its answer came back (Slack saw it before that), so the window never
// frees a slot earlier than Slack does.
type window struct {
	now    func() time.Time
	limits map[string]int

	mu     sync.Mutex
	calls  map[string][]*time.Time // method → calls within the last minute (nil time: in flight)
	paused map[string]time.Time    // method → no call before (a 429's Retry-After)
}

func newWindow(now func() time.Time, limits map[string]int) *window {
	return &window{now: now, limits: limits, calls: map[string][]*time.Time{}, paused: map[string]time.Time{}}
}

// pause makes method wait d: Slack answered 429 (the limit is shared with other
// replicas of the app).
func (w *window) pause(method string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if until := w.now().Add(d); until.After(w.paused[method]) {
		w.paused[method] = until
	}
}

// reserve takes a slot for a call of method now; the caller runs done when the
// call returns. When no slot is free it takes none and returns how long until
// one may be (done is nil).
func (w *window) reserve(method string) (done func(), wait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if until := w.paused[method]; now.Before(until) {
		return nil, until.Sub(now)
	}
	limit := w.limits[method]
	if limit <= 0 {
		return func() {}, 0
	}
	calls := w.calls[method][:0]
	var oldest time.Time
	for _, at := range w.calls[method] {
		if at.IsZero() || now.Sub(*at) < time.Minute {
			calls = append(calls, at)
			if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
				oldest = *at
			}
		}
	}
	w.calls[method] = calls
	if len(calls) >= limit {
		if oldest.IsZero() {
			return nil, time.Second // every slot is in flight
		}
		return nil, oldest.Add(time.Minute).Sub(now)
	}
	slot := new(time.Time)
	w.calls[method] = append(calls, slot)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		*slot = w.now()
	}, 0
}
