package discord

import (
	"context"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
)

// Typing indicator renewal: Discord shows one for about 10 seconds, or until the
// bot posts in the channel.
const (
	typingEvery = 8 * time.Second
	typingMax   = 5 * time.Minute
)

// StartProgress shows "is typing…" in the conversation's channel (L1) and keeps
// it up, renewed every 8 s, until Stop, the first words of a streamed reply
// (the growing message shows the work from then on, and a typing indicator
// renewed after it would outlive the answer, since edits do not clear it), five
// minutes, or the end of Run. It returns at once: the typing calls run on their
// own goroutine, and one that would have to wait for a rate limit is dropped, so
// progress never delays the turn nor takes a bucket a reply needs. Commands
// answered through an interaction already show "thinking…": they get none.
func (a *Adapter) StartProgress(_ context.Context, in adapters.Inbound) adapters.Indicator {
	if in.Native || strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return noIndicator{}
	}
	ch, _ := target(in.ReplyTo, in.SessionKey)
	if ch == "" {
		return noIndicator{}
	}
	return &indicator{a: a, ch: ch, t: a.keepTyping(ch)}
}

// indicator is one turn's typing indicator.
type indicator struct {
	a  *Adapter
	ch string
	t  *typer // nil: another turn's indicator runs in the channel, or Run is ending
}

// Status is shown nowhere: Discord has no status text for a bot, only the typing
// indicator, which keeps running through a wait. Posting the wait as a message
// would leave one more message to delete.
func (i *indicator) Status(string) {}

// Stop ends the typing indicator's renewal.
func (i *indicator) Stop() {
	if i.t != nil {
		i.a.stopTyping(i.ch, i.t)
	}
}

type noIndicator struct{}

func (noIndicator) Status(string) {}
func (noIndicator) Stop()         {}

// typeOnce shows the typing indicator once; under a rate limit it is dropped.
func (a *Adapter) typeOnce(ctx context.Context, ch string) error {
	return a.rest.ChannelTyping(ch, discordgo.WithContext(withWaitPolicy(ctx, waitPolicy{drop: true})))
}

// typer is one channel's typing refresher.
type typer struct{ cancel context.CancelFunc }

// keepTyping starts the channel's refresher unless one runs; it belongs to Run.
// It returns the refresher started, nil when none was.
func (a *Adapter) keepTyping(ch string) *typer {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.stopping || a.typers[ch] != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(a.ctx)
	t := &typer{cancel: cancel}
	a.typers[ch] = t
	every := a.typingEvery
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.stopTyping(ch, t)
		tick := time.NewTicker(every)
		defer tick.Stop()
		limit := time.NewTimer(typingMax)
		defer limit.Stop()
		for {
			if err := a.typeOnce(ctx, ch); err != nil && ctx.Err() == nil {
				a.log.Debug("discord typing not shown", "channel_id", ch, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-limit.C:
				return
			case <-tick.C:
			}
		}
	}()
	return t
}

// stopTyping ends the channel's refresher (only t, when t is non-nil), cutting a
// typing call in flight short.
func (a *Adapter) stopTyping(ch string, t *typer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.typers[ch]
	if cur == nil || (t != nil && cur != t) {
		if t != nil {
			t.cancel()
		}
		return
	}
	delete(a.typers, ch)
	cur.cancel()
}
