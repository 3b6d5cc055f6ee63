// Package failovertest holds test doubles for the failover engine and its users:
// a virtual clock whose Sleep advances time at once, so no test ever waits for a
// cooldown. It imports nothing of the project.
package failovertest

import (
	"context"
	"sync"
	"time"
)

// virtual is the time a virtual clock keeps.
type virtual struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the current virtual time.
func (v *virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Clock is a virtual clock. Now returns the virtual time; Sleep advances it
// immediately (no real waiting) and records the call. It is safe for concurrent use.
type Clock struct {
	virtual
	sleeps []time.Duration
}

// NewClock returns a clock set to t0.
func NewClock(t0 time.Time) *Clock { return &Clock{virtual: virtual{now: t0}} }

// Sleep advances the virtual time by d at once. It returns ctx.Err() without
// advancing when ctx is already done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return nil
}

// Advance moves the virtual time forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the virtual time to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleeps returns a copy of every duration passed to Sleep, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// ManualClock is a virtual clock whose Sleep blocks until Advance moves the
// time past its end (or ctx ends), so a test can hold goroutines inside a wait
// and release them when it chooses, without real waiting. It is safe for
// concurrent use.
type ManualClock struct {
	virtual
	waiters []*sleeper
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

// NewManualClock returns a manual clock set to t0.
func NewManualClock(t0 time.Time) *ManualClock { return &ManualClock{virtual: virtual{now: t0}} }

// Sleep blocks until Advance reaches now+d, or ctx ends (then it returns ctx.Err()).
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	c.mu.Lock()
	s := &sleeper{until: c.now.Add(d), wake: make(chan struct{})}
	c.waiters = append(c.waiters, s)
	c.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		for i, w := range c.waiters {
			if w == s {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the time forward by d and wakes every sleeper whose end came.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.until.After(c.now) {
			close(w.wake)
			continue
		}
		keep = append(keep, w)
	}
	c.waiters = keep
}

// Sleeping returns how many goroutines are blocked in Sleep.
func (c *ManualClock) Sleeping() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
