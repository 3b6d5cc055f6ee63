package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// ErrTooLong is returned by Pauses.Wait when a pause lasts longer than the
// caller will wait.
var ErrTooLong = errors.New("live: rate limited for longer than the caller waits")

// Pauses keeps, per key (a method, a route's bucket, "global"), a time before
// which no call is made: what a platform's 429 asks for with its Retry-After,
// or what a refusal is remembered for. The zero value is not usable: set Now
// and Sleep (both from one clock in tests).
type Pauses struct {
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error

	mu sync.Mutex
	m  map[string]*pause
}

// pause is one key's pause: one waiter sleeps, the others wait for it to wake.
type pause struct {
	until    time.Time
	sleeping bool
	wake     chan struct{} // closed when the sleeper stops; replaced for the next one
}

// NewPauses returns Pauses on the given clock.
func NewPauses(now func() time.Time, sleep func(context.Context, time.Duration) error) *Pauses {
	return &Pauses{Now: now, Sleep: sleep}
}

// Pause makes key wait d from now; a pause already longer stays.
func (p *Pauses) Pause(key string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	until := p.Now().Add(d)
	if p.m == nil {
		p.m = map[string]*pause{}
	}
	if len(p.m) > 4096 { // forget pauses long over
		now := p.Now()
		maps.DeleteFunc(p.m, func(_ string, e *pause) bool { return !e.sleeping && !e.until.After(now) })
	}
	if e := p.m[key]; e != nil {
		if until.After(e.until) {
			e.until = until
		}
		return
	}
	p.m[key] = &pause{until: until, wake: make(chan struct{})}
}

// Left is how long key must still wait (0: it may go).
func (p *Pauses) Left(key string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.m[key]; e != nil {
		return max(e.until.Sub(p.Now()), 0)
	}
	return 0
}

// Wait returns once key's pause is over, or fails at once with ErrTooLong when
// it lasts longer than limit (0 = no limit). However many callers wait on one
// key, one of them sleeps and the others wait for it; a sleeper cut short
// hands the sleeping over to another waiter.
func (p *Pauses) Wait(ctx context.Context, key string, limit time.Duration) error {
	for {
		p.mu.Lock()
		e := p.m[key]
		if e == nil {
			p.mu.Unlock()
			return nil
		}
		d := e.until.Sub(p.Now())
		if d <= 0 { // over: end it and let the others go
			delete(p.m, key)
			close(e.wake)
			p.mu.Unlock()
			return nil
		}
		if limit > 0 && d > limit {
			p.mu.Unlock()
			return fmt.Errorf("%s: %v: %w", key, d.Round(time.Millisecond), ErrTooLong)
		}
		if e.sleeping {
			wake := e.wake
			p.mu.Unlock()
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		e.sleeping = true
		p.mu.Unlock()
		err := p.Sleep(ctx, d)
		p.mu.Lock()
		e.sleeping = false
		if err != nil { // cut short: another waiter takes over the sleeping
			close(e.wake)
			e.wake = make(chan struct{})
			p.mu.Unlock()
			return err
		}
		p.mu.Unlock()
		// Look again: the pause is over, or it was extended meanwhile.
	}
}

// Window keeps calls of each limited key within a number per minute, the way
// Slack counts its Web API tiers: at most Limits[key] calls in any 60 seconds,
// each counted from the moment its answer came back (the platform saw it before
// that), so the window never frees a slot earlier than the platform does. A key
// paused after a 429 takes no call until the pause is over.
type Window struct {
	Limits map[string]int
	*Pauses

	mu    sync.Mutex
	calls map[string][]*time.Time // key → calls within the last minute (zero time: in flight)
}

// NewWindow returns a window with the given limits per minute on p's clock.
func NewWindow(p *Pauses, limits map[string]int) *Window {
	return &Window{Limits: limits, Pauses: p, calls: map[string][]*time.Time{}}
}

// Reserve takes a slot for a call of key now; the caller runs done when the call
// returns. When no slot is free it takes none, and says how long until one may
// be (done is nil).
func (w *Window) Reserve(key string) (done func(), wait time.Duration) {
	if d := w.Left(key); d > 0 {
		return nil, d
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	limit := w.Limits[key]
	if limit <= 0 {
		return func() {}, 0
	}
	now := w.Now()
	calls := w.calls[key][:0]
	var oldest time.Time
	for _, at := range w.calls[key] {
		if at.IsZero() || now.Sub(*at) < time.Minute {
			calls = append(calls, at)
			if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
				oldest = *at
			}
		}
	}
	w.calls[key] = calls
	if len(calls) >= limit {
		if oldest.IsZero() {
			return nil, time.Second // every slot is in flight
		}
		return nil, oldest.Add(time.Minute).Sub(now)
	}
	slot := new(time.Time)
	w.calls[key] = append(calls, slot)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		*slot = w.Now()
	}, 0
}

// Take waits until key has a slot and reserves it.
func (w *Window) Take(ctx context.Context, key string) (done func(), err error) {
	for {
		done, d := w.Reserve(key)
		if d <= 0 {
			return done, nil
		}
		if err := w.Sleep(ctx, d); err != nil {
			return nil, fmt.Errorf("%s: waiting for its limit: %w", key, err)
		}
	}
}
