package slack

import (
	"context"
	"errors"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Thinking is the status shown while a turn runs (L1).
const Thinking = "is thinking…"

// StartProgress implements adapters.Progress: the thread shows Slack's
// assistant status ("detour is thinking…") until the answer is posted, which
// clears it, or Stop. Slack drops a status after two minutes without a message,
// so it is set again every StatusRefresh while the turn runs.
//
// Everything happens on the indicator's own goroutine: StartProgress and the
// Indicator methods return at once. A status call that Slack rate limits is
// dropped, not retried, and no status call is made by any indicator until the
// Retry-After has passed: progress never waits and never holds up a reply.
// A message outside a thread (a top-level direct message) has no status.
func (a *Adapter) StartProgress(ctx context.Context, in adapters.Inbound) adapters.Indicator {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" || t.ThreadTS == "" || t.slash() {
		return noIndicator{}
	}
	ind := &indicator{a: a, t: t, want: Thinking, kick: make(chan struct{}, 1), done: make(chan struct{})}
	ind.kick <- struct{}{}
	key := threadKey(t.Channel, t.ThreadTS)
	a.indicators.Store(key, ind)
	go func() {
		defer a.indicators.CompareAndDelete(key, ind)
		ind.run(context.WithoutCancel(ctx))
	}()
	return ind
}

// posted tells the thread's running indicator that the bot posted there: Slack
// cleared the status, and refreshing it would put "is thinking…" under an
// answer that is already growing. A later Status shows again.
func (a *Adapter) posted(t target) {
	if t.ThreadTS == "" {
		return
	}
	if v, ok := a.indicators.Load(threadKey(t.Channel, t.ThreadTS)); ok {
		ind := v.(*indicator)
		ind.mu.Lock()
		ind.quiet = true
		if ind.setting {
			ind.raced = true // that set may land after the post
		}
		ind.mu.Unlock()
		ind.wake()
	}
}

// noIndicator is progress where Slack has no status to show.
type noIndicator struct{}

func (noIndicator) Status(string) {}
func (noIndicator) Stop()         {}

// indicator is one thread's status while a turn runs.
type indicator struct {
	a    *Adapter
	t    target
	kick chan struct{} // wakes the goroutine (cap 1)
	done chan struct{} // closed when the goroutine ends

	mu      sync.Mutex
	want    string
	stopped bool
	quiet   bool // a post cleared the status; only a new Status sets it again
	setting bool // a status call is in flight
	raced   bool // the bot posted while a status call was in flight
}

// Status implements adapters.Indicator.
func (i *indicator) Status(text string) {
	i.mu.Lock()
	if i.stopped || text == "" {
		i.mu.Unlock()
		return
	}
	i.want, i.quiet = text, false
	i.mu.Unlock()
	i.wake()
}

// Stop implements adapters.Indicator: the status is cleared (once).
func (i *indicator) Stop() {
	i.mu.Lock()
	i.stopped = true
	i.mu.Unlock()
	i.wake()
}

func (i *indicator) wake() {
	select {
	case i.kick <- struct{}{}:
	default:
	}
}

// statusCallTimeout bounds one status call: a slow Slack must not keep an
// indicator (and its goroutine) alive long after its turn.
const statusCallTimeout = 5 * time.Second

// run sets the wanted status whenever it changes and every StatusRefresh, and
// clears it when stopped. ctx only carries values: the indicator ends with Stop.
func (i *indicator) run(ctx context.Context) {
	defer close(i.done)
	refresh := time.NewTimer(i.a.cfg.StatusRefresh)
	defer refresh.Stop()
	var sent string // what Slack shows, as far as we know
	for {
		force := false
		select {
		case <-i.kick:
		case <-refresh.C:
			force = true
		}
		i.mu.Lock()
		want, stopped, quiet, raced := i.want, i.stopped, i.quiet, i.raced
		i.raced = false
		i.mu.Unlock()
		if quiet {
			if !raced {
				sent = "" // Slack removed it with the post
			}
			want = ""
		}
		if stopped || (quiet && sent != "") {
			// The reply clears the status too; this covers a turn that ends
			// without a post here, and a set that raced a post.
			if sent != "" && i.set(ctx, "") {
				sent = ""
			}
			if stopped {
				return
			}
		}
		if want != "" && (want != sent || force) {
			if i.set(ctx, want) {
				sent = want
			}
		}
		next := i.a.cfg.StatusRefresh
		if wait := i.a.statusPausedFor(); wait > 0 && want != sent {
			next = min(next, wait) // try again once Slack allows it
		}
		if !refresh.Stop() {
			select {
			case <-refresh.C:
			default:
			}
		}
		refresh.Reset(next)
	}
}

// set makes one assistant.threads.setStatus call; false when it was dropped or
// failed. A 429 pauses every indicator for its Retry-After.
func (i *indicator) set(ctx context.Context, status string) bool {
	if i.a.statusPausedFor() > 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, statusCallTimeout)
	defer cancel()
	i.mu.Lock()
	i.setting = true
	i.mu.Unlock()
	err := i.a.api.SetAssistantThreadsStatusContext(ctx, slackgo.AssistantThreadsSetStatusParameters{
		ChannelID: i.t.Channel, ThreadTS: i.t.ThreadTS, Status: status,
	})
	i.mu.Lock()
	i.setting = false
	i.mu.Unlock()
	if err == nil {
		return true
	}
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		wait := rl.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		i.a.pauseStatus(min(wait, i.a.cfg.MaxRetryWait))
		i.a.log.Debug("slack status rate limited; dropped", "retry_after", wait)
		return false
	}
	i.a.log.Debug("slack status not set", "channel", i.t.Channel, "err", safeErr(err))
	return false
}

// statusPausedFor is how long status calls must still wait after a 429.
func (a *Adapter) statusPausedFor() time.Duration {
	until := a.statusPause.Load()
	if until == 0 {
		return 0
	}
	return time.Until(time.Unix(0, until)) // real time: the pause is Slack's
}

// pauseStatus stops status calls for d.
func (a *Adapter) pauseStatus(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		old := a.statusPause.Load()
		if old >= until || a.statusPause.CompareAndSwap(old, until) {
			return
		}
	}
}
