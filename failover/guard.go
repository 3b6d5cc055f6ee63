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
	ring  []time.Time // times of the last limit calls, oldest at head
	head  int
	n     int
}

// NewGuard returns a guard allowing perMinute paid calls in any sliding minute;
// perMinute <= 0 means no limit. A nil clock uses the system clock.
func NewGuard(perMinute int, clock Clock) *Guard {
	g := &Guard{clock: clock, limit: perMinute}
	if perMinute > 0 {
		g.ring = make([]time.Time, perMinute)
	}
	return g
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
	for g.n > 0 && now.Sub(g.ring[g.head]) >= time.Minute {
		g.head = (g.head + 1) % g.limit
		g.n--
	}
	if g.n >= g.limit {
		return false
	}
	g.ring[(g.head+g.n)%g.limit] = now
	g.n++
	return true
}
