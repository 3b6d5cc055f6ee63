package discord

import (
	"context"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/adapters/live"
)

// Typing indicator renewal: Discord shows one for about 10 seconds, or until the
// bot posts in the channel.
const (
	typingEvery = 8 * time.Second
	typingMax   = 5 * time.Minute
	// noTypingFor is how long a channel that refused the typing indicator (no
	// permission, gone) is not asked again: every refusal counts toward
	// Discord's 10,000 invalid requests in 10 minutes.
	noTypingFor = time.Hour
)

// StartProgress shows "is typing…" in the conversation's channel (L1) and keeps
// it up, renewed every 8 s, until Stop, the first words of a streamed reply
// (the growing message shows the work from then on, and a typing indicator
// renewed after it would outlive the answer, since edits do not clear it), five
// minutes, or the end of Run. It returns at once: the typing calls run on their
// own goroutine, and one that would have to wait for a rate limit is dropped, so
// progress never delays the turn nor takes a bucket a reply needs. A channel
// that refuses it (401, 403, 404) is not asked again for an hour. Commands
// answered through an interaction already show "thinking…": they get none.
func (a *Adapter) StartProgress(_ context.Context, in adapters.Inbound) adapters.Indicator {
	ch, _ := target(in.ReplyTo, in.SessionKey)
	if in.Native || strings.HasPrefix(in.ReplyTo, interactionPrefix) || ch == "" || a.noTyping.Has(ch) {
		return live.NoIndicator{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.stopping || a.typers[ch] != nil {
		return live.NoIndicator{} // another turn's indicator runs in the channel
	}
	ind := live.NewIndicator(func(ctx context.Context, status string) error { return a.typeOnce(ctx, ch, status) },
		"typing", a.typingEvery, typingMax)
	a.typers[ch] = ind
	ctx := a.ctx
	a.wg.Go(func() {
		defer a.endTyping(ch, ind)
		ind.Run(ctx)
	})
	return typing{a: a, ch: ch, ind: ind}
}

// typing is one turn's typing indicator.
type typing struct {
	a   *Adapter
	ch  string
	ind *live.Indicator
}

// Status is shown nowhere: Discord has no status text for a bot, only the typing
// indicator, which keeps running through a wait. Posting the wait as a message
// would leave one more message to delete.
func (typing) Status(string) {}

// Stop ends the typing indicator's renewal.
func (t typing) Stop() { t.a.endTyping(t.ch, t.ind) }

// typeOnce shows the typing indicator once ("" clears nothing: Discord has no
// call for it); under a rate limit it is dropped.
func (a *Adapter) typeOnce(ctx context.Context, ch, status string) error {
	if status == "" {
		return nil
	}
	err := a.rest.ChannelTyping(ch, discordgo.WithContext(link.Dropping(ctx)))
	if code := link.Status(err); code == 401 || code == 403 || code == 404 {
		a.noTyping.Add(ch)
		a.log.Info("discord refused the typing indicator; not asked again in this channel for a while",
			"channel_id", ch, "status", code, "for", noTypingFor)
		return live.ErrStop
	}
	if err != nil && ctx.Err() == nil {
		a.log.Debug("discord typing not shown", "channel_id", ch, "err", err)
	}
	return err
}

// stopTyping quiets the channel's indicator: the bot posted there.
func (a *Adapter) stopTyping(ch string) {
	a.mu.Lock()
	ind := a.typers[ch]
	a.mu.Unlock()
	if ind != nil {
		ind.Quiet()
	}
}

// endTyping stops ind and forgets it as the channel's indicator.
func (a *Adapter) endTyping(ch string, ind *live.Indicator) {
	a.mu.Lock()
	if a.typers[ch] == ind {
		delete(a.typers, ch)
	}
	a.mu.Unlock()
	ind.Stop()
}
