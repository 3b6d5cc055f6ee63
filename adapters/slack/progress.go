package slack

import (
	"context"
	"errors"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Thinking is the status shown while a turn runs (L1).
const Thinking = "is thinking…"

// statusCallTimeout bounds one status call: a slow Slack must not keep an
// indicator (and its goroutine) alive long after its turn.
const statusCallTimeout = 5 * time.Second

// StartProgress implements adapters.Progress: the thread shows Slack's
// assistant status ("detour is thinking…", assistant.threads.setStatus) until
// the answer is posted, which clears it, or Stop. Slack drops a status after two
// minutes without a message, so it is set again every StatusRefresh while the
// turn runs. The calls run on the indicator's own goroutine; one that Slack rate
// limits is dropped, not retried, and no indicator makes a status call until
// its Retry-After has passed: progress never waits and never holds up a reply.
// A message outside a thread (a top-level direct message) has no status.
func (a *Adapter) StartProgress(ctx context.Context, in adapters.Inbound) adapters.Indicator {
	t := decodeTarget(in.ReplyTo)
	if t.Channel == "" || t.ThreadTS == "" || t.slash() {
		return live.NoIndicator{}
	}
	ind := live.NewIndicator(func(ctx context.Context, status string) error {
		return a.setStatus(ctx, t, status)
	}, Thinking, a.cfg.StatusRefresh, 0)
	key := threadKey(t.Channel, t.ThreadTS)
	a.indicators.Store(key, ind)
	go func() { // ends with Stop
		defer a.indicators.CompareAndDelete(key, ind)
		ind.Run(context.WithoutCancel(ctx))
	}()
	return ind
}

// posted tells the thread's running indicator that the bot posted there: Slack
// cleared the status, and refreshing it would put "is thinking…" under an
// answer that is already growing. A later Status shows again.
func (a *Adapter) posted(t target) {
	if v, ok := a.indicators.Load(threadKey(t.Channel, t.ThreadTS)); ok && t.ThreadTS != "" {
		v.(*live.Indicator).Quiet()
	}
}

// errDropped is a status call not made: Slack asked to wait.
var errDropped = errors.New("slack: status calls paused after a 429")

// setStatus makes one assistant.threads.setStatus call; a 429 pauses them all.
func (a *Adapter) setStatus(ctx context.Context, t target, status string) error {
	const method = "assistant.threads.setStatus"
	if a.limits.Left(method) > 0 {
		return errDropped
	}
	ctx, cancel := context.WithTimeout(ctx, statusCallTimeout)
	defer cancel()
	err := a.api.SetAssistantThreadsStatusContext(ctx, slackgo.AssistantThreadsSetStatusParameters{
		ChannelID: t.Channel, ThreadTS: t.ThreadTS, Status: status,
	})
	if d := a.retryAfter(err); d > 0 {
		a.limits.Pause(method, d)
		a.log.Debug("slack status rate limited; dropped", "retry_after", d)
	} else if err != nil {
		a.log.Debug("slack status not set", "channel", t.Channel, "err", safeErr(err))
	}
	return err
}
