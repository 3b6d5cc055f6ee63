package discord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/health"
)

// The health board (issue 38) on Discord: one status message in the admin
// channel, posted when the board first has something to report (a provider,
// model or key not answering, a fallback, all down: a calm channel stays
// quiet), then edited in place whenever the board changes, back to calm
// included (posted again when someone deleted it: the edit's 404, code 10008
// Unknown Message), and the board as an ephemeral answer to /status all. Edits go through discordgo's REST client,
// which waits for the route's rate-limit bucket (X-RateLimit-Remaining and
// -Reset-After, https://discord.com/developers/docs/topics/rate-limits), and
// the app looks for changes at most every few seconds, so one status message
// stays well within its bucket.

// BoardFunc computes the board user ("discord:…", or health.AdminChannel for
// the admin channel) may see.
type BoardFunc = func(ctx context.Context, user string) (health.Board, error)

// boardCallTimeout bounds one status update or /status all answer.
const boardCallTimeout = 15 * time.Second

// status is the adapter's status message.
type status struct {
	board   atomic.Pointer[BoardFunc]
	channel atomic.Pointer[string]
	mu      sync.Mutex // one update at a time, in order
	msgID   string     // the status message, once posted
	last    string     // its content
}

// SetBoard gives the adapter the board it shows.
func (a *Adapter) SetBoard(fn BoardFunc) {
	if fn != nil {
		a.status.board.Store(&fn)
	}
}

// SetStatusChannel names the channel (the admin channel) that holds the
// status message. Only shard 0 keeps it, so replicas sharded as the docs say
// (one shard each) keep one message between them.
func (a *Adapter) SetStatusChannel(id string) {
	if id = strings.TrimSpace(id); id != "" && a.cfg.ShardID == 0 {
		a.status.channel.Store(&id)
	}
}

// BoardChanged brings the status message up to date: an edit when it exists,
// a new message when it was never posted or was deleted.
func (a *Adapter) BoardChanged(ctx context.Context) {
	fn, ch := a.status.board.Load(), a.status.channel.Load()
	if fn == nil || ch == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, boardCallTimeout)
	defer cancel()
	b, err := (*fn)(ctx, health.AdminChannel)
	if err != nil {
		a.log.Warn("discord: status message: the board could not be read", "err", err)
		return
	}
	text := BoardText(b, MaxMessageLen)
	s := &a.status
	s.mu.Lock()
	defer s.mu.Unlock()
	if text == s.last || (s.msgID == "" && calm(b)) {
		return // nothing new; or all is well and nothing was said yet: the channel stays quiet
	}
	if s.msgID == "" && s.last == "" {
		s.msgID = a.findStatus(ctx, *ch) // the message a previous run of the bot posted
	}
	if s.msgID != "" {
		e := &discordgo.MessageEdit{ID: s.msgID, Channel: *ch, Content: &text, AllowedMentions: noMentions()}
		_, err := a.rest.ChannelMessageEditComplex(e, discordgo.WithContext(ctx))
		if err == nil {
			s.last = text
			return
		}
		if link.Code(err) != discordgo.ErrCodeUnknownMessage {
			a.log.Warn("discord: status message not edited", "channel", *ch, "err", link.Err("edit message", "", err))
			return
		}
		a.log.Info("discord: the status message was deleted; posting it again", "channel", *ch)
		s.msgID = ""
	}
	m, err := a.postOne(ctx, *ch, "", text, 0, nil)
	if err != nil {
		a.log.Warn("discord: status message not posted", "channel", *ch, "err", err)
		return
	}
	s.msgID, s.last = m.ID, text
}

// statusPrefix starts every status message (BoardText), so the bot finds its
// own after a restart.
const statusPrefix = "**detour health**"

// findStatus returns the id of the bot's latest status message among the
// channel's last 50 messages, "" when there is none or it cannot be read (Read
// Message History missing: a new one is posted). It waits a little for the
// gateway's READY, which names the bot.
func (a *Adapter) findStatus(ctx context.Context, channel string) string {
	bot := a.link.BotID()
	for i := 0; bot == "" && i < 100; i++ {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ""
		case <-t.C:
		}
		bot = a.link.BotID()
	}
	if bot == "" {
		return ""
	}
	msgs, err := a.rest.ChannelMessages(channel, 50, "", "", "", discordgo.WithContext(ctx))
	if err != nil {
		a.log.Debug("discord: earlier status message not looked for", "channel", channel, "err", link.Err("read messages", "", err))
		return ""
	}
	for _, m := range msgs { // newest first
		if m != nil && m.Author != nil && m.Author.ID == bot && strings.HasPrefix(m.Content, statusPrefix) {
			return m.ID
		}
	}
	return ""
}

// calm reports whether the board has nothing to report: every provider,
// model and key answering, no fallback, not all down.
func calm(b health.Board) bool {
	if b.AllDown != nil || len(b.Fallbacks) > 0 {
		return false
	}
	for _, p := range b.Providers {
		if p.State != health.Answering {
			return false
		}
		for _, m := range p.Models {
			if m.State != health.Answering {
				return false
			}
		}
		for _, k := range p.Keys {
			if k.State != health.Answering {
				return false
			}
		}
	}
	return true
}

// answerBoard answers /status all with the board, for the asker alone: an
// admin's board for admins, everyone's for the others.
func (a *Adapter) answerBoard(ctx context.Context, i *discordgo.Interaction, received time.Time) bool {
	fn := a.status.board.Load()
	if fn == nil {
		return false // no board: the router answers /status as always
	}
	dctx, cancel := context.WithDeadline(ctx, received.Add(interactionDeadline))
	err := a.rest.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}}, discordgo.WithContext(dctx))
	cancel()
	if err != nil {
		a.log.Warn("discord /status all not acknowledged", "interaction_id", i.ID, "err", link.Err("acknowledge interaction", i.Token, err))
		return true
	}
	ctx, cancel = context.WithTimeout(ctx, boardCallTimeout)
	defer cancel()
	text := "the health board could not be read; try again"
	if b, err := (*fn)(ctx, "discord:"+interactionUser(i)); err == nil {
		text = BoardText(b, MaxMessageLen)
	} else {
		a.log.Warn("discord /status all: the board could not be read", "err", err)
	}
	_, err = a.rest.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &text, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("discord /status all not answered", "interaction_id", i.ID, "err", link.Err("edit interaction response", i.Token, err))
	}
	return true
}

// BoardText renders the board as one Discord message of at most limit
// characters (Discord's is 2,000): a line per provider, model and key, the
// fallbacks, the last 24 hours and today's spend, cut with "…" when longer.
func BoardText(b health.Board, limit int) string {
	now := b.At
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	view := "everyone's view"
	if b.Admin {
		view = "admin view"
	}
	add("%s · %s · updated <t:%d:R>", statusPrefix, view, b.At.Unix())
	if b.AllDown != nil {
		s := "🚨 **All models are unavailable**"
		if !b.AllDown.Since.IsZero() {
			s += fmt.Sprintf(" since %s (%s)", health.Clock(b.AllDown.Since, now), health.Span(now.Sub(b.AllDown.Since)))
		}
		add("%s", s)
	}
	detail := func(d string) string {
		if d == "" {
			return ""
		}
		return " · " + d
	}
	for _, p := range b.Providers {
		add("%s **%s** %s%s", dot(p.State), esc(p.Name), health.Words(p.State), detail(p.Detail(now)))
		for _, m := range p.Models {
			add("  %s `%s` %s%s", dot(m.State), code(m.Ref), health.Words(m.State), detail(m.Detail(now)))
		}
		for _, k := range p.Keys {
			add("  %s key `%s` %s%s", dot(k.State), code(k.ID), health.Words(k.State), detail(k.Detail(now)))
		}
	}
	add("**Active fallbacks**")
	if len(b.Fallbacks) == 0 {
		add("  none")
	}
	for _, f := range b.Fallbacks {
		s := fmt.Sprintf("  `%s` → `%s`", code(f.From), code(f.To))
		if f.Reason != "" {
			s += " (" + health.Reason(f.Reason) + ")"
		}
		add("%s: %s", s, health.Count(int64(f.Count), "session"))
	}
	add("**Last 24 h**")
	if len(b.Timeline) == 0 {
		add("  nothing happened")
	}
	for _, e := range b.Timeline {
		add("  `%s` %s", health.Clock(e.At, now), esc(e.Line()))
	}
	if b.Omitted > 0 {
		add("  … %d earlier", b.Omitted)
	}
	if t := b.Today; t != nil {
		add("**Today** (%s UTC): %d calls, $%.2f", t.Day, t.Calls, t.USD)
	}
	out := strings.Join(lines, "\n")
	if textLen(out) <= limit {
		return out
	}
	// Cut at a line end, and say so.
	const more = "\n… (`bot status` shows the whole board)"
	for len(lines) > 1 && textLen(strings.Join(lines, "\n"))+textLen(more) > limit {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n") + more
}

func dot(state string) string {
	switch state {
	case health.Answering:
		return "🟢"
	case health.CoolingDown:
		return "🟡"
	case health.Down:
		return "🔴"
	}
	return "⛔"
}

// code keeps a name inside its inline code span.
func code(s string) string { return strings.ReplaceAll(s, "`", "'") }

// esc keeps names from formatting the message (mentions are off anyway:
// noMentions).
func esc(s string) string {
	return strings.NewReplacer("*", "\\*", "_", "\\_", "~", "\\~", "`", "'", "|", "\\|").Replace(s)
}
