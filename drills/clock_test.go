package drills

import (
	"context"
	"sync"
	"testing"
	"time"
)

// racingWall is a wall clock on a loaded machine: every reading finds step
// more time gone.
func racingWall(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// issue 36: in fast mode the drill clock moves only by Advance and Sleep; the
// real time the bot spends working (here: ten seconds per reading of the wall
// clock) does not move it, so a cooldown ends where the scenario says.
func TestClock_FastIgnoresWallTime(t *testing.T) {
	c := newClock(FastScale, racingWall(10*time.Second))
	t0 := c.Now()
	if got := c.Now().Sub(t0); got != 0 {
		t.Fatalf("wall time moved the fast clock by %s", got)
	}
	c.Advance(70 * time.Second)
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(t0); got != 73*time.Second {
		t.Errorf("after Advance(70s) and Sleep(3s) the clock moved %s, want exactly 73s", got)
	}
	// In real time (scale 1), the wall clock is the clock.
	r := newClock(1, racingWall(10*time.Second))
	r0 := r.Now()
	if got := r.Now().Sub(r0); got != 10*time.Second {
		t.Errorf("the real-time clock moved %s between readings, want the wall's 10s", got)
	}
}

// issue 36: the redirecting-edge drill failed once under load: its first
// refusal starts a 5 s cooldown (A3), and the wall time a busy machine spent
// between two steps ended it, so both new sessions of the next step called the
// primary. With a wall clock that races (a second per reading, far more than
// any machine), the verdict holds.
func TestRedirectingEdge_A2_PassesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a drill")
	}
	cfg, err := LoadConfig("demo.yaml", demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := Lookup("redirecting-edge")
	if !ok {
		t.Fatal("no redirecting-edge drill")
	}
	rep := RunScenario(context.Background(), cfg, sc, Options{Fast: true, TempDir: t.TempDir(), wall: racingWall(time.Second)})
	if rep.Err != "" || !rep.Verdict.Pass {
		var b []string
		for _, c := range rep.Verdict.Checks {
			if !c.Pass {
				b = append(b, c.Name+": "+c.Detail)
			}
		}
		t.Fatalf("redirecting-edge under load: err %q, failed checks %q", rep.Err, b)
	}
}
