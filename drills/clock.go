package drills

import (
	"context"
	"sync"
	"time"
)

// Clock is the drill's clock. Advance jumps it forward (a scenario skips the
// 5-minute probe interval or a two-day reset without waiting). In real time
// (scale 1) it is the wall clock plus that offset. In fast mode it stands still
// between Advance and Sleep calls: Sleep waits a scaled-down real time and
// moves the clock by the whole d, and the real time the bot spends working
// moves it not at all. A scenario's cooldowns and probe windows therefore
// end where its steps say, however loaded the machine is (issue 36: a 5 s
// cooldown expired in wall time between two steps of redirecting-edge on a
// busy machine, and a second session called the cooling primary). Timeouts
// (idle, attempt, run) are real timers and are scaled in the configuration
// instead.
type Clock struct {
	scale float64 // real seconds per virtual second in Sleep; 1 = real time
	wall  func() time.Time
	base  time.Time // fast mode: the moment the clock stands at, before the offset

	mu  sync.Mutex
	off time.Duration
}

// NewClock returns a clock; scale in (0,1] shrinks Sleep (1 = real time).
func NewClock(scale float64) *Clock { return newClock(scale, time.Now) }

// newClock is NewClock on a given wall clock (the tests make it race).
func newClock(scale float64, wall func() time.Time) *Clock {
	if scale <= 0 || scale > 1 {
		scale = 1
	}
	if wall == nil {
		wall = time.Now
	}
	return &Clock{scale: scale, wall: wall, base: wall()}
}

// frozen reports whether the wall clock is left out (fast mode).
func (c *Clock) frozen() bool { return c.scale < 1 }

// Now returns the clock's time: the wall clock (or, in fast mode, the moment
// the clock started) plus the virtual offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off := c.off
	c.mu.Unlock()
	if c.frozen() {
		return c.base.Add(off)
	}
	return c.wall().Add(off)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// Offset returns how far the clock has been moved ahead of where the wall
// clock alone would put it.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// Sleep waits d (scaled in fast mode) or until ctx ends; afterwards Now has
// moved by at least d.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	real := time.Duration(float64(d) * c.scale)
	t := time.NewTimer(real)
	defer t.Stop()
	select {
	case <-t.C:
		if c.frozen() {
			c.Advance(d) // no wall time counts: the whole d
		} else {
			c.Advance(d - real)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
