package failovertest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestClock_NoRealWaiting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	start := time.Now()
	if err := c.Sleep(context.Background(), 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep waited in real time")
	}
	if got := c.Now().Sub(t0); got != 7*24*time.Hour {
		t.Fatalf("advanced %v", got)
	}
	c.Set(t0)
	c.Advance(time.Second)
	if !c.Now().Equal(t0.Add(time.Second)) {
		t.Fatal("Set/Advance")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sleep returned %v", err)
	}
	if n := len(c.Sleeps()); n != 1 {
		t.Fatalf("recorded %d sleeps", n)
	}
}

func TestManualClock_SleepWaitsForAdvance(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManualClock(t0)
	done := make(chan error, 1)
	go func() { done <- c.Sleep(context.Background(), time.Second) }()
	for c.Sleeping() != 1 {
		time.Sleep(time.Millisecond)
	}
	c.Advance(500 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Sleep returned before its end")
	case <-time.After(20 * time.Millisecond):
	}
	c.Advance(500 * time.Millisecond)
	if err := <-done; err != nil || !c.Now().Equal(t0.Add(time.Second)) || c.Sleeping() != 0 {
		t.Fatalf("err %v now %v sleeping %d", err, c.Now(), c.Sleeping())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	for c.Sleeping() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || c.Sleeping() != 0 {
		t.Fatalf("cancelled Sleep: %v, %d sleeping", err, c.Sleeping())
	}
}
