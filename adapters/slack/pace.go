package slack

import (
	"context"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters/live"
)

// Per-method limits of Slack's Web API tiers, in calls per minute per workspace
// (https://docs.slack.dev/apis/web-api/rate-limits/). The live-reply methods are
// kept inside them by a sliding window (live.Window), so a busy workspace gets
// slower streams rather than HTTP 429s.
var methodLimits = map[string]int{
	"chat.startStream":  20,  // Tier 2 (https://docs.slack.dev/reference/methods/chat.startStream)
	"chat.appendStream": 100, // Tier 4 (https://docs.slack.dev/reference/methods/chat.appendStream)
	"chat.stopStream":   20,  // Tier 2 (https://api.slack.com/methods/chat.stopStream)
	"chat.delete":       50,  // Tier 3 (https://docs.slack.dev/reference/methods/chat.delete)
}

// pacer keeps posting within Slack's limits: chat.postMessage allows about one
// message per second per channel, and an HTTP 429 asks the whole workspace to
// wait (https://docs.slack.dev/apis/web-api/rate-limits/). Each channel is a lane
// that one post holds from its first try to its last retry, so posts to one
// channel go out in order and a slow or rate-limited channel delays no other;
// the next post there waits a full interval from this one's answer, after Slack
// saw it. (A token bucket, reserved before the request, would let two posts land
// closer than Slack allows when the first one is slow.) A 429 pauses its method
// for every channel until its Retry-After has passed.
type pacer struct {
	interval     time.Duration
	*live.Pauses // method → no call before; "post:<channel>" → the channel's next post

	mu    sync.Mutex
	lanes map[string]*lane
}

// lane is one channel's turn (a one-slot semaphore) while posts hold or want it.
type lane struct {
	channel string
	turn    chan struct{}
	users   int // guarded by pacer.mu
}

func newPacer(interval time.Duration, p *live.Pauses) *pacer {
	return &pacer{interval: interval, Pauses: p, lanes: map[string]*lane{}}
}

// acquire waits for channel's turn.
func (p *pacer) acquire(ctx context.Context, channel string) (*lane, error) {
	p.mu.Lock()
	l := p.lanes[channel]
	if l == nil {
		l = &lane{channel: channel, turn: make(chan struct{}, 1)}
		p.lanes[channel] = l
	}
	l.users++
	p.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		p.leave(l)
		return nil, ctx.Err()
	}
}

// release gives channel's turn to the next post.
func (p *pacer) release(l *lane) {
	<-l.turn
	p.leave(l)
}

func (p *pacer) leave(l *lane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(p.lanes, l.channel)
	}
}

// wait blocks until method may be called and, for a lane, until the channel's
// pace allows the next post.
func (p *pacer) wait(ctx context.Context, method string, l *lane) error {
	if err := p.Wait(ctx, method, 0); err != nil || l == nil {
		return err
	}
	return p.Wait(ctx, "post:"+l.channel, 0)
}

// posted records that l's channel just took a post (or a try Slack refused).
func (p *pacer) posted(l *lane) {
	if l != nil {
		p.Pause("post:"+l.channel, p.interval)
	}
}
