package discord

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/lanes"
)

// sessionKey is "discord:<guild>:<channel>" (a thread is its own channel) or
// "discord:dm:<channel>" for direct messages.
func sessionKey(guildID, channelID string) string {
	if guildID == "" {
		return "discord:dm:" + channelID
	}
	return "discord:" + guildID + ":" + channelID
}

// replySep separates the channel from the asking message's id in ReplyTo
// ("<channel>/<message>"): replies reference the message they answer.
const replySep = "/"

// written is a message someone wrote, not a join, pin or thread-created notice.
func written(m *discordgo.Message) bool {
	return m.Type == discordgo.MessageTypeDefault || m.Type == discordgo.MessageTypeReply
}

// mention strips every mention of the bot (<@id>, or the legacy nickname form
// <@!id>) from a message's text, and says whether it had one.
func mention(m *discordgo.Message, botID string) (text string, mentioned bool) {
	text = m.Content
	if botID == "" {
		return strings.TrimSpace(text), false
	}
	mentioned = slices.ContainsFunc(m.Mentions, func(u *discordgo.User) bool { return u != nil && u.ID == botID })
	for _, form := range []string{"<@" + botID + ">", "<@!" + botID + ">"} {
		mentioned = mentioned || strings.Contains(text, form)
		text = strings.ReplaceAll(text, form, "")
	}
	return strings.TrimSpace(text), mentioned
}

// inbound is what every message and interaction delivers. A DM has no guild
// (bots take no part in group DMs); anything in a guild is a channel or a thread.
func inbound(guild, channel, user, text, replyTo, event string) adapters.Inbound {
	in := adapters.Inbound{Channel: Name, SessionKey: sessionKey(guild, channel), User: "discord:" + user, Text: text,
		ReplyTo: replyTo, Direct: guild == "", EventID: "discord:" + event, Conversation: adapters.ConversationChannel}
	if in.Direct {
		in.Conversation = adapters.ConversationDirect
	}
	return in
}

// onEvent runs on the gateway's reader: it decodes and handles, with no network call.
func (a *Adapter) onEvent(event string, data json.RawMessage) {
	switch event {
	case "MESSAGE_CREATE":
		decode(data, a.onMessage)
	case "THREAD_CREATE":
		decode(data, a.onThreadCreate)
	case "INTERACTION_CREATE":
		decode(data, a.onInteraction)
	}
}

func decode[T any](data json.RawMessage, handle func(*T)) {
	var v T
	if json.Unmarshal(data, &v) == nil {
		handle(&v)
	}
}

// onMessage filters a message and hands it to its channel's lane.
func (a *Adapter) onMessage(mc *discordgo.MessageCreate) {
	if mc.Message == nil || mc.Author == nil {
		return
	}
	m := mc.Message
	botID := a.link.BotID()
	if m.Author.ID == botID || m.Author.Bot || !written(m) {
		return // own echoes, other bots, notices
	}
	text, mentioned := mention(m, botID)
	lookup, open := false, false
	switch {
	case m.GuildID == "":
	case mentioned:
		// In a channel not known yet, the lane looks up whether it is a thread
		// (the bot then takes part in it). With threads on, a question asked
		// outside a thread opens one; a command is answered where it was typed.
		lookup = !a.threads.Has(m.ChannelID) && !a.notThreads.Has(m.ChannelID)
		_, isCommand := commands.Parse(text)
		open = a.cfg.Threads && !a.threads.Has(m.ChannelID) && !isCommand
	case a.threads.Has(m.ChannelID):
	default:
		return
	}
	files := filesOf(m.Attachments) // I1
	if text == "" && len(files) == 0 {
		return // nothing to answer (or, in mention-only mode, no content for us)
	}
	if a.seen.Seen("msg:" + m.ID) {
		return // already delivered (replayed on resume)
	}
	in := inbound(m.GuildID, m.ChannelID, m.Author.ID, text, m.ChannelID+replySep+m.ID, "msg:"+m.ID)
	in.Files = files
	if ref := m.MessageReference; ref != nil && ref.MessageID != "" && (ref.ChannelID == "" || ref.ChannelID == m.ChannelID) &&
		(m.ReferencedMessage == nil || m.ReferencedMessage.Author == nil || m.ReferencedMessage.Author.ID != botID) {
		in.RepliesTo = replyRef(m.ChannelID, ref.MessageID) // H1: a reply chain the bot was not part of
	}
	a.enqueue(m.ChannelID, job{in: in, lookup: lookup, openThread: open, guild: m.GuildID, message: m.ID})
}

func (a *Adapter) onThreadCreate(tc *discordgo.ThreadCreate) {
	if bot := a.link.BotID(); tc.Channel != nil && bot != "" && tc.OwnerID == bot {
		a.threads.Put(tc.ID, tc.ParentID)
	}
}

// setParent names the channel a thread belongs to (Inbound.Parent), as far as
// the bot learnt it (the thread it started, THREAD_CREATE, a lookup), so that
// access.channels allows the threads of an allowed channel (T5).
func (a *Adapter) setParent(in *adapters.Inbound, guild, channel string) {
	if in.Parent != "" || guild == "" {
		return
	}
	if parent, ok := a.threads.Value(channel); ok && parent != "" {
		in.Parent = sessionKey(guild, parent)
	}
}

// Channel lanes (lanes.Lanes): a slow lookup or a full router inbox holds up its
// channel only, never the gateway reader or another channel. Past workerQueue
// waiting events a channel is stuck: an event is dropped with a log line.
const (
	workerQueue = 64
	maxWorkers  = 4096 // channels with work at once
)

// job is one inbound event for a channel's lane.
type job struct {
	in             adapters.Inbound
	lookup         bool // look up whether the channel is a thread first
	openThread     bool // unless the channel is a thread, start one from the message
	guild, message string
}

// enqueue hands j to its channel's lane; it never blocks.
func (a *Adapter) enqueue(channel string, j job) {
	switch err := a.lanes.Add(channel, j); {
	case errors.Is(err, lanes.ErrTooMany):
		a.log.Warn("discord event dropped: too many busy channels", "channel_id", channel, "limit", maxWorkers)
	case errors.Is(err, lanes.ErrFull):
		a.log.Warn("discord event dropped: its channel is too far behind", "channel_id", channel, "queued", workerQueue)
	}
}

// handle is channel ch's lane's step: it delivers j to the router, unless Run has ended.
func (a *Adapter) handle(ch string, j job) {
	a.mu.Lock()
	ctx, inbox := a.ctx, a.inbox
	a.mu.Unlock()
	if ctx == nil || ctx.Err() != nil || inbox == nil {
		return
	}
	if j.lookup && a.isThread(ctx, ch) { // remembered as a thread from now on
		// H1: first mentioned in a thread it did not start (its own are known).
		j.in.Earlier, j.in.RepliesTo = threadRef(ch, j.message), ""
	}
	if j.openThread && !a.threads.Has(ch) {
		a.moveToThread(ctx, ch, &j)
	}
	a.setParent(&j.in, j.guild, ch)
	select {
	case inbox <- j.in:
	case <-ctx.Done():
	}
}

// lookupTimeout bounds a channel lookup or a thread start on a channel's lane.
const lookupTimeout = 5 * time.Second

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
	ch, err := a.rest.Channel(channelID, discordgo.WithContext(ctx))
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

// Discord allows thread names of 1 to 100 characters and archives a thread
// after 60, 1440, 4320 or 10080 idle minutes.
// https://discord.com/developers/docs/resources/channel#start-thread-from-message
const (
	maxThreadName     = 100
	threadArchiveMins = 1440
	threadFallback    = "detour"
)

// moveToThread starts a public thread from j's message, named from the question,
// and points j at it (the thread's own session). When Discord refuses (no Create
// Public Threads permission, say), the question is answered in the channel.
func (a *Adapter) moveToThread(ctx context.Context, ch string, j *job) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	start := &discordgo.ThreadStart{Name: threadName(j.in.Text), AutoArchiveDuration: threadArchiveMins}
	th, err := a.rest.MessageThreadStartComplex(ch, j.message, start, discordgo.WithContext(ctx))
	id := ""
	switch {
	case err == nil && th != nil && th.ID != "":
		id = th.ID
	case link.Code(err) == discordgo.ErrCodeThreadAlreadyCreatedForThisMessage:
		id = j.message // started before (a replay): a thread has its message's id
	default:
		a.log.Warn("discord thread not started; answering in the channel", "channel_id", ch, "err", err)
		return
	}
	a.threads.Put(id, ch)
	j.in.SessionKey = sessionKey(j.guild, id)
	j.in.ReplyTo = id                     // the question is the thread's starter: nothing to reference
	j.in.Parent = sessionKey(j.guild, ch) // T5
}

// threadName is the question's first line, its spaces collapsed, cut at a word
// to fit Discord's 100 characters.
func threadName(question string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(question), "\n")
	name := strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(name) > maxThreadName {
		cut := string([]rune(name)[:maxThreadName-1])
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
