package lanes

import (
	"context"
	"errors"
	"runtime"
	"slices"
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
	}, 3, 2)
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
