package discord

import (
	"context"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
)

// Channel workers: every inbound event of one channel is handled in order by that
// channel's goroutine, so a slow lookup or a full router inbox holds up that
// channel only, never the gateway reader or another channel.
const (
	// workerQueue bounds one channel's waiting events; past it an event is
	// dropped with a log line (a channel that far behind is stuck).
	workerQueue = 64
	// maxWorkers bounds the channels with a worker at once.
	maxWorkers = 4096
	// workerIdle is how long a worker waits for more work before it exits.
	workerIdle = 30 * time.Second
)

// replySep separates the channel from the asking message's id in ReplyTo
// ("<channel>/<message>"): replies reference the message they answer.
const replySep = "/"

// job is one inbound event for a channel's worker.
type job struct {
	in     adapters.Inbound
	lookup bool // look up whether the channel is a thread first
	// openThread: unless the channel is a thread, start one from the message
	// (channels.discord.threads) and move the conversation there.
	openThread     bool
	guild, message string
}

func (j job) channel() string {
	ch, _, _ := strings.Cut(j.in.ReplyTo, replySep)
	return ch
}

// chanWorker is one channel's goroutine and its queue.
type chanWorker struct {
	jobs chan job
}

// enqueue hands j to channel's worker, starting one if needed. It never blocks.
func (a *Adapter) enqueue(channel string, j job) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.stopping {
		return
	}
	w := a.workers[channel]
	if w == nil {
		if len(a.workers) >= maxWorkers {
			a.log.Warn("discord event dropped: too many busy channels", "channel_id", channel, "limit", maxWorkers)
			return
		}
		w = &chanWorker{jobs: make(chan job, workerQueue)}
		a.workers[channel] = w
		ctx := a.ctx
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.work(ctx, channel, w)
		}()
	}
	select {
	case w.jobs <- j:
	default:
		a.log.Warn("discord event dropped: its channel is too far behind", "channel_id", channel, "queued", workerQueue)
	}
}

// work runs one channel's jobs in order until it has been idle for workerIdle or
// Run ends.
func (a *Adapter) work(ctx context.Context, channel string, w *chanWorker) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			a.mu.Lock()
			delete(a.workers, channel)
			a.mu.Unlock()
			return
		case j := <-w.jobs:
			a.handle(ctx, j)
			idle.Reset(workerIdle)
		case <-idle.C:
			a.mu.Lock()
			if len(w.jobs) == 0 { // enqueue holds a.mu: no job can slip in now
				delete(a.workers, channel)
				a.mu.Unlock()
				return
			}
			a.mu.Unlock()
			idle.Reset(workerIdle)
		}
	}
}

// isThread looks a channel's type up once (cached either way, bounded).
func (a *Adapter) isThread(ctx context.Context, channelID string) bool {
	if a.threads.Has(channelID) {
		return true
	}
	if a.notThreads.Has(channelID) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var ch *discordgo.Channel
	err := a.call(ctx, "get channel", "", func(opts ...discordgo.RequestOption) error {
		var err error
		ch, err = a.rest.Channel(channelID, opts...)
		return err
	})
	if err != nil {
		a.log.Warn("discord channel lookup failed", "channel_id", channelID, "err", err)
		return false
	}
	if ch.IsThread() {
		a.threads.Put(channelID, ch.ParentID)
		return true
	}
	a.notThreads.Add(channelID)
	return false
}
