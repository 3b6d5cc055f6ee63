package slack

import (
	"context"
	"sync"
	"time"
)

// pacer keeps posting within Slack's limits: chat.postMessage allows about one
// message per second per channel, and an HTTP 429 asks the whole workspace to wait
// (https://docs.slack.dev/apis/web-api/rate-limits/). Each channel is a lane that
// one post holds at a time, from its first try to its last retry, so posts to one
// channel go out in order and a slow or rate-limited channel delays no other. A
// 429 pauses that method for every channel until its Retry-After has passed.
type pacer struct {
	interval time.Duration
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error

	mu     sync.Mutex
	lanes  map[string]*lane
	paused map[string]time.Time // method → no call before
}

// lane is one channel's turn (a one-slot semaphore) and when it may post next.
type lane struct {
	turn  chan struct{}
	next  time.Time // guarded by pacer.mu
	users int       // posts holding or waiting for the turn; guarded by pacer.mu
}

// maxIdleLanes bounds the lanes kept only for their next time.
const maxIdleLanes = 1024

func newPacer(interval time.Duration, now func() time.Time, sleep func(context.Context, time.Duration) error) *pacer {
	return &pacer{interval: interval, now: now, sleep: sleep, lanes: map[string]*lane{}, paused: map[string]time.Time{}}
}

// acquire waits for channel's turn.
func (p *pacer) acquire(ctx context.Context, channel string) (*lane, error) {
	p.mu.Lock()
	l := p.lanes[channel]
	if l == nil {
		p.sweepLocked()
		l = &lane{turn: make(chan struct{}, 1)}
		p.lanes[channel] = l
	}
	l.users++
	p.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		p.mu.Lock()
		l.users--
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

// release gives channel's turn to the next post.
func (p *pacer) release(l *lane) {
	<-l.turn
	p.mu.Lock()
	l.users--
	p.mu.Unlock()
}

// sweepLocked forgets lanes nobody uses whose pace no longer constrains a post,
// once there are many.
func (p *pacer) sweepLocked() {
	if len(p.lanes) < maxIdleLanes {
		return
	}
	now := p.now()
	for ch, l := range p.lanes {
		if l.users == 0 && !now.Before(l.next) {
			delete(p.lanes, ch)
		}
	}
}

// wait blocks until method may be called (no workspace pause) and, for a lane,
// until the channel's pace allows the next post.
func (p *pacer) wait(ctx context.Context, method string, l *lane) error {
	for {
		p.mu.Lock()
		until := p.paused[method]
		if l != nil && l.next.After(until) {
			until = l.next
		}
		d := until.Sub(p.now())
		p.mu.Unlock()
		if d <= 0 {
			return ctx.Err()
		}
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// posted records that l's channel just took a post (or a try Slack refused): the
// next one waits a full interval from now, which is after Slack saw this one.
func (p *pacer) posted(l *lane) {
	if l == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l.next = p.now().Add(p.interval)
}

// pause stops calls of method in every channel for d (a 429's Retry-After).
func (p *pacer) pause(method string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := p.now().Add(d); until.After(p.paused[method]) {
		p.paused[method] = until
	}
}
