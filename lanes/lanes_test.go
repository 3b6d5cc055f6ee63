package lanes

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Lanes run one key's items in order and keys in parallel, refuse past their
// bounds, cost no goroutine once idle, and Wait until all is done.
func TestLanes_OrderPerKeyBoundsAndIdle(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{}, 1)
	var mu sync.Mutex
	got := map[string][]int{}
	l := New(func(key string, n int) {
		if key == "slow" {
			running <- struct{}{}
			<-release
		}
		mu.Lock()
		got[key] = append(got[key], n)
		mu.Unlock()
	}, 3, 2, 0)
	before := runtime.NumGoroutine()
	if err := l.Add("slow", 0); err != nil {
		t.Fatal(err)
	}
	<-running // item 0 runs; three more may queue behind it
	for i := 1; i < 4; i++ {
		if err := l.Add("slow", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Add("slow", 4); !errors.Is(err, ErrFull) {
		t.Fatalf("4th item queued behind a running one = %v", err)
	}
	for i := range 3 {
		if err := l.Add("fast", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Add("third", 0); err != nil && !errors.Is(err, ErrTooMany) {
		t.Fatal(err)
	}
	go func() {
		for range running {
		}
	}()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got["fast"]) == 3 })
	if l.Active() == 0 {
		t.Fatal("the slow key has no lane while its work waits")
	}
	close(release)
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["slow"], []int{0, 1, 2, 3}) || !slices.Equal(got["fast"], []int{0, 1, 2}) {
		t.Fatalf("order per key: %v", got)
	}
	if n := l.Active(); n != 0 {
		t.Fatalf("%d keys still have a lane once Wait returned", n) // a drained router reports no worker
	}
	close(running)
	waitFor(t, func() bool { return l.Active() == 0 && runtime.NumGoroutine() <= before })
	l.Close()
	if err := l.Add("slow", 9); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
}

// A bound on running keys: past it a key with work waits in line with no
// goroutine, runs when one frees, and a busy key takes turns with those
// waiting instead of starving them; every item still runs in its key's
// order. (issue 37: memory follows the bound, not the burst.)
func TestLanes_RunningBound(t *testing.T) {
	var mu sync.Mutex
	var order []string
	running, peak := 0, 0
	gate := make(chan struct{})
	l := New(func(key string, n int) {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		<-gate
		mu.Lock()
		running--
		order = append(order, key)
		mu.Unlock()
	}, 0, 0, 1)
	before := runtime.NumGoroutine()
	for i := range 3 {
		if err := l.Add("busy", i); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := l.Add(k, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := runtime.NumGoroutine() - before; got > 1 {
		t.Fatalf("%d goroutines for 4 keys with work and a bound of 1", got)
	}
	if l.Active() != 4 {
		t.Fatalf("Active = %d, want the 4 keys with work", l.Active())
	}
	for range 6 {
		gate <- struct{}{}
	}
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if peak > 1 {
		t.Fatalf("%d keys ran at once, want at most 1", peak)
	}
	// busy's second item waits behind a, b and c, which were in line before it.
	if got := strings.Join(order, " "); got != "busy a b c busy busy" {
		t.Fatalf("order = %q, want the waiting keys served before busy's second item", got)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}
