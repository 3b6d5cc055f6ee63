package drills

import (
	"context"
	"sync"
	"time"
)

// Clock is the drill's clock: the wall clock plus a virtual offset. Advance jumps
// it forward (a scenario skips the 5-minute probe interval or a two-day reset
// without waiting); in fast mode Sleep waits a scaled-down real time and adds the
// rest to the offset, so after Sleep(d) Now has moved by at least d. Timeouts
// (idle, attempt, run) are real timers and are scaled in the configuration instead.
type Clock struct {
	scale float64 // real seconds per virtual second in Sleep; 1 = real time

	mu  sync.Mutex
	off time.Duration
}

// NewClock returns a clock; scale in (0,1] shrinks Sleep (1 = real time).
func NewClock(scale float64) *Clock {
	if scale <= 0 || scale > 1 {
		scale = 1
	}
	return &Clock{scale: scale}
}

// Now returns the wall clock plus the virtual offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off := c.off
	c.mu.Unlock()
	return time.Now().Add(off)
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

// Offset returns how far the clock has been moved ahead of the wall clock.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// Sleep waits d (scaled in fast mode) or until ctx ends.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	real := time.Duration(float64(d) * c.scale)
	t := time.NewTimer(real)
	defer t.Stop()
	select {
	case <-t.C:
		c.Advance(d - real)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
