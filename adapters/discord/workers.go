package discord

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
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
	if j.lookup && a.isThread(ctx, j.channel()) { // remembered as a thread from now on
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
	ch, err := link.Get(ctx, a.link, "get channel", "", func(opts ...discordgo.RequestOption) (*discordgo.Channel, error) {
		return a.rest.Channel(channelID, opts...)
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

// Thread settings (channels.discord.threads). Discord allows names of 1 to 100
// characters and archives a thread after 60, 1440, 4320 or 10080 idle minutes.
// https://discord.com/developers/docs/resources/channel#start-thread-from-message
const (
	maxThreadName     = 100
	threadArchiveMins = 1440
	threadFallback    = "detour"
)

// moveToThread starts a public thread from j's message, named from the question,
// and points j at it: the answer and the rest of the conversation go there (the
// thread's own session). When Discord refuses (missing Create Public Threads
// permission, say), the question is answered in the channel as without threads.
func (a *Adapter) moveToThread(ctx context.Context, j *job) {
	ch := j.channel()
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	start := &discordgo.ThreadStart{Name: threadName(j.in.Text), AutoArchiveDuration: threadArchiveMins}
	th, err := link.Get(ctx, a.link, "start thread", "", func(opts ...discordgo.RequestOption) (*discordgo.Channel, error) {
		return a.rest.MessageThreadStartComplex(ch, j.message, start, opts...)
	})
	id := ""
	switch {
	case err == nil && th != nil && th.ID != "":
		id = th.ID
	case restCode(err) == discordgo.ErrCodeThreadAlreadyCreatedForThisMessage:
		id = j.message // started before (a replay): a thread has its message's id
	default:
		a.log.Warn("discord thread not started; answering in the channel", "channel_id", ch, "err", err)
		return
	}
	a.threads.Put(id, ch)
	j.in.SessionKey = sessionKey(j.guild, id)
	j.in.ReplyTo = id // the question is the thread's starter: nothing to reference
	// T5: the thread is where the question was asked.
	j.in.Parent = sessionKey(j.guild, ch)
}

// threadName is the question's first line, its spaces collapsed, cut at a word
// to fit Discord's 100 characters.
func threadName(question string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(question), "\n")
	name := strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(name) > maxThreadName {
		r := []rune(name)[:maxThreadName-1]
		cut := string(r)
		if i := strings.LastIndexByte(cut, ' '); i > maxThreadName/2 {
			cut = cut[:i]
		}
		name = cut + "…"
	}
	if name == "" {
		return threadFallback
	}
	return name
}

// restCode is Discord's JSON error code of a REST error, 0 for none.
func restCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}
