package failover

import (
	"sync"
	"time"
)

// Guard bounds paid calls per sliding minute across the whole process (B2). It is
// safe for concurrent use; a nil *Guard allows everything.
type Guard struct {
	mu    sync.Mutex
	clock Clock
	limit int
	// calls are the times of the paid calls of the last minute, oldest
	// first: its memory follows the calls made, not the limit (a limit of a
	// million once cost 23 MiB at start, issue 37).
	calls []time.Time
}

// NewGuard returns a guard allowing perMinute paid calls in any sliding minute;
// perMinute <= 0 means no limit. A nil clock uses the system clock.
func NewGuard(perMinute int, clock Clock) *Guard {
	return &Guard{clock: clock, limit: perMinute}
}

// Allow reports whether one more paid call fits in the current minute, and
// counts it when it does.
func (g *Guard) Allow() bool {
	if g == nil || g.limit <= 0 {
		return true
	}
	now := time.Now()
	if g.clock != nil {
		now = g.clock.Now()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := 0
	for old < len(g.calls) && now.Sub(g.calls[old]) >= time.Minute {
		old++
	}
	// Slicing off the front keeps the array; append moves the live part to
	// a new one when it fills, so the memory stays about twice the calls kept.
	g.calls = g.calls[old:]
	if len(g.calls) >= g.limit {
		return false
	}
	g.calls = append(g.calls, now)
	return true
}
