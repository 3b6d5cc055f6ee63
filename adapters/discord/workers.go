package discord

import (
	"context"
	"errors"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Channel lanes: every inbound event of one channel is handled in order on that
// channel's goroutine (live.Lanes), so a slow lookup or a full router inbox
// holds up that channel only, never the gateway reader or another channel.
const (
	// workerQueue bounds one channel's waiting events; past it an event is
	// dropped with a log line (a channel that far behind is stuck).
	workerQueue = 64
	// maxWorkers bounds the channels with work at once.
	maxWorkers = 4096
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

// enqueue hands j to its channel's lane. It never blocks.
func (a *Adapter) enqueue(channel string, j job) {
	a.mu.Lock()
	stopping := a.ctx == nil || a.stopping
	a.mu.Unlock()
	if stopping {
		return
	}
	switch err := a.lanes.Add(channel, j); {
	case errors.Is(err, live.ErrTooMany):
		a.log.Warn("discord event dropped: too many busy channels", "channel_id", channel, "limit", maxWorkers)
	case errors.Is(err, live.ErrLaneFull):
		a.log.Warn("discord event dropped: its channel is too far behind", "channel_id", channel, "queued", workerQueue)
	}
}

// handle is a channel lane's step for one job; after Run it does nothing.
func (a *Adapter) handle(_ string, j job) {
	ctx, _ := a.runCtx()
	if ctx.Err() != nil {
		return
	}
	if j.lookup && a.isThread(ctx, j.channel()) {
		a.threads.Add(j.channel())
		// H1: first mentioned in a thread it did not start (its own are known).
		j.in.Earlier, j.in.RepliesTo = threadRef(j.channel(), j.message), ""
	}
	if j.openThread && !a.threads.Has(j.channel()) {
		a.moveToThread(ctx, &j)
	}
	a.setParent(&j.in, j.guild, j.channel())
	a.deliver(ctx, j.in)
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
	err := a.link.Call(ctx, "get channel", "", func(opts ...discordgo.RequestOption) error {
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
