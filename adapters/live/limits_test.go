package live

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
)

var t0 = time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)

// covers L2: the window lets at most the limit through in any minute and says
// how long until the next fits; a pause holds every call back.
func TestWindow_L2_SlidingMinute(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	w := NewWindow(NewPauses(clock, nil), map[string]int{"m": 3})
	for i := range 3 {
		done, d := w.Reserve("m")
		if d != 0 {
			t.Fatalf("call %d waits %v", i, d)
		}
		now = now.Add(time.Second) // the call takes a second: it counts from its answer
		done()
		now = now.Add(9 * time.Second)
	}
	if _, d := w.Reserve("m"); d != 31*time.Second {
		t.Fatalf("4th call waits %v, want 31s (until the first answered call leaves the minute)", d)
	}
	now = now.Add(31 * time.Second)
	if _, d := w.Reserve("m"); d != 0 {
		t.Fatalf("after the wait: %v", d)
	}
	// Calls in flight hold their slot.
	w2 := NewWindow(NewPauses(clock, nil), map[string]int{"m": 1})
	if _, d := w2.Reserve("m"); d != 0 {
		t.Fatal(d)
	}
	if _, d := w2.Reserve("m"); d <= 0 {
		t.Fatal("a second call went out while the first was in flight")
	}
	if _, d := w.Reserve("other"); d != 0 {
		t.Fatal("an unlimited method waited")
	}
	w.Pause("other", 5*time.Second)
	if _, d := w.Reserve("other"); d != 5*time.Second {
		t.Fatalf("paused method waits %v", d)
	}
}

// Concurrent waiters on one pause: one sleeps, the rest wait for it, a sleeper
// cut short hands the sleeping over, another key never waits; a pause longer
// than the caller's limit fails at once.
func TestPauses_OneSleeperPerKey(t *testing.T) {
	clock := failovertest.NewClock(t0)
	release := make(chan struct{})
	var mu sync.Mutex
	var sleeps []time.Duration
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		sleeps = append(sleeps, d)
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return clock.Sleep(ctx, d)
	}
	p := NewPauses(clock.Now, sleep)
	p.Pause("global", time.Second)
	if err := p.Wait(ctx, "other", 0); err != nil {
		t.Fatalf("another key waited: %v", err)
	}
	if err := p.Wait(ctx, "global", 500*time.Millisecond); !errors.Is(err, ErrTooLong) {
		t.Fatalf("a pause past the limit = %v, want ErrTooLong", err)
	}
	first, cancelFirst := context.WithCancel(ctx)
	errs := make(chan error, 4)
	go func() { errs <- p.Wait(first, "global", 0) }()
	sleeping := func() bool { p.mu.Lock(); defer p.mu.Unlock(); e := p.m["global"]; return e != nil && e.sleeping }
	waitFor(t, sleeping)
	for range 3 {
		go func() { errs <- p.Wait(ctx, "global", time.Minute) }()
	}
	for range 3 {
		runtime.Gosched()
	}
	cancelFirst() // the sleeper gives up: a waiter takes over
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleeper: %v", err)
	}
	waitFor(t, sleeping)
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(sleeps, []time.Duration{time.Second, time.Second}) {
		t.Fatalf("sleeps = %v, want the sleeper's 1s and its successor's 1s", sleeps)
	}
	if got := clock.Now().Sub(t0); got != time.Second {
		t.Fatalf("paused %v in all, want 1s", got)
	}
	if p.Left("global") != 0 {
		t.Fatal("the pause outlived its time")
	}
}

// covers L1: the indicator shows at once, refreshes, goes quiet after a post
// (clearing a set that raced it), ends for good on ErrStop, and Stop clears.
func TestIndicator_L1_RefreshQuietStop(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	block := make(chan struct{}, 1)
	set := func(ctx context.Context, s string) error {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
		if s == "hold" {
			<-block
		}
		if s == "forbidden" {
			return ErrStop
		}
		return nil
	}
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }

	i := NewIndicator(set, "thinking", 20*time.Millisecond, 0)
	done := make(chan struct{})
	go func() { defer close(done); i.Run(ctx) }()
	waitFor(t, func() bool { return len(seen()) >= 3 }) // shown, then refreshed
	i.Status("hold")
	waitFor(t, func() bool { return slices.Contains(seen(), "hold") })
	i.Quiet() // a post while that set is in flight: it may land after the post
	block <- struct{}{}
	waitFor(t, func() bool { c := seen(); return c[len(c)-1] == "" })
	n := len(seen())
	time.Sleep(60 * time.Millisecond) // three refresh periods: nothing while quiet
	if len(seen()) != n {
		t.Fatalf("refreshed while quiet: %q", seen())
	}
	i.Stop()
	i.Stop()
	<-done
	if len(seen()) != n {
		t.Fatalf("Stop cleared a status that was already cleared: %q", seen())
	}

	i2 := NewIndicator(set, "forbidden", time.Millisecond, 0)
	done2 := make(chan struct{})
	go func() { defer close(done2); i2.Run(ctx) }()
	<-done2 // ErrStop ends it without another call
	if c := seen(); c[len(c)-1] != "forbidden" || slices.Index(c, "forbidden") != len(c)-1 {
		t.Fatalf("asked again after ErrStop: %q", c)
	}
}
