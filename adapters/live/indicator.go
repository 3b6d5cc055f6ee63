package live

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStop, returned by a Setter, ends the indicator: the platform refused for
// good (no permission), so asking again would only count against the bot.
var ErrStop = errors.New("live: progress refused; not asked again")

// Setter shows a progress status on a platform ("" clears it). It must not
// wait for rate limits: a status that cannot go now is dropped (an error).
type Setter func(ctx context.Context, status string) error

// Indicator is one running progress display (adapters.Indicator, L1): it sets
// the wanted status at once and again every Every while the turn runs, for at
// most Max, on its own goroutine (Run), so a slow platform never holds up the
// turn. Quiet says the bot posted where the status shows (the platform cleared
// it, or a refresh would outlive the answer): it is not refreshed again until
// the next Status. Stop clears it, once.
type Indicator struct {
	set        Setter
	every, max time.Duration
	kick       chan struct{}

	mu      sync.Mutex
	want    string
	stopped bool
	quiet   bool
	setting bool // a set is in flight
	raced   bool // Quiet came while a set was in flight: it may land after the post
}

// NewIndicator returns an indicator that shows first; call Run on a goroutine.
func NewIndicator(set Setter, first string, every, max time.Duration) *Indicator {
	i := &Indicator{set: set, every: every, max: max, want: first, kick: make(chan struct{}, 1)}
	i.wake()
	return i
}

// Status replaces the text shown.
func (i *Indicator) Status(text string) {
	i.mu.Lock()
	if i.stopped || text == "" {
		i.mu.Unlock()
		return
	}
	i.want, i.quiet = text, false
	i.mu.Unlock()
	i.wake()
}

// Quiet stops the refreshing until the next Status.
func (i *Indicator) Quiet() {
	i.mu.Lock()
	i.quiet = true
	i.raced = i.raced || i.setting
	i.mu.Unlock()
	i.wake()
}

// Stop clears the display; it is safe to call more than once.
func (i *Indicator) Stop() {
	i.mu.Lock()
	i.stopped = true
	i.mu.Unlock()
	i.wake()
}

func (i *Indicator) wake() {
	select {
	case i.kick <- struct{}{}:
	default:
	}
}

// Run shows the status until Stop, ErrStop, Max, or ctx ends.
func (i *Indicator) Run(ctx context.Context) {
	refresh := time.NewTimer(i.every)
	defer refresh.Stop()
	var limit <-chan time.Time
	if i.max > 0 {
		t := time.NewTimer(i.max)
		defer t.Stop()
		limit = t.C
	}
	sent := "" // what the platform shows, as far as we know
	for {
		force := false
		select {
		case <-i.kick:
		case <-refresh.C:
			force = true
		case <-limit:
			i.Stop()
			continue
		case <-ctx.Done():
			return
		}
		i.mu.Lock()
		want, stopped, quiet, raced := i.want, i.stopped, i.quiet, i.raced
		i.raced = false
		i.mu.Unlock()
		if quiet {
			if !raced {
				sent = "" // the post removed it
			}
			want = ""
		}
		if (stopped || quiet) && sent != "" && i.show(ctx, "") == nil {
			sent = ""
		}
		if stopped {
			return
		}
		if want != "" && (want != sent || force) {
			switch err := i.show(ctx, want); {
			case err == nil:
				sent = want
			case errors.Is(err, ErrStop):
				return
			}
		}
		refresh.Reset(i.every)
	}
}

// show makes one set call, marking it in flight for Quiet.
func (i *Indicator) show(ctx context.Context, status string) error {
	i.mu.Lock()
	i.setting = true
	i.mu.Unlock()
	err := i.set(ctx, status)
	i.mu.Lock()
	i.setting = false
	i.mu.Unlock()
	return err
}

// NoIndicator is progress where a platform has nothing to show.
type NoIndicator struct{}

// Status does nothing.
func (NoIndicator) Status(string) {}

// Stop does nothing.
func (NoIndicator) Stop() {}
