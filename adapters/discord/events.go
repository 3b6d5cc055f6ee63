package discord

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/commands"
)

// sessionKey is "discord:<guild>:<channel>" (a thread is its own channel) or
// "discord:dm:<channel>" for direct messages.
func sessionKey(guildID, channelID string) string {
	if guildID == "" {
		return "discord:dm:" + channelID
	}
	return "discord:" + guildID + ":" + channelID
}

func mentions(m *discordgo.Message, botID string) bool {
	if botID == "" {
		return false
	}
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			return true
		}
	}
	return strings.Contains(m.Content, "<@"+botID+">") || strings.Contains(m.Content, "<@!"+botID+">")
}

// stripMention removes every mention of the bot and trims the text.
func stripMention(text, botID string) string {
	if botID != "" {
		text = strings.ReplaceAll(text, "<@"+botID+">", "")
		text = strings.ReplaceAll(text, "<@!"+botID+">", "")
	}
	return strings.TrimSpace(text)
}

// onEvent runs on the gateway's reader: each event the bot reads is decoded
// into discordgo's type and handled with no network call.
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

// onMessage filters a message and hands it to its channel's worker.
func (a *Adapter) onMessage(mc *discordgo.MessageCreate) {
	if mc == nil || mc.Message == nil || mc.Author == nil {
		return
	}
	m := mc.Message
	botID := a.link.BotID()
	if m.Author.ID == botID || m.Author.Bot {
		return // own echoes and other bots
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // joins, pins, thread-created notices...
	}
	direct := m.GuildID == ""
	mentioned := mentions(m, botID)
	lookup, open := false, false
	text := stripMention(m.Content, botID)
	switch {
	case direct:
	case mentioned:
		// Mentioned in a channel not known yet: the worker looks up whether it
		// is a thread (the bot then takes part in it from now on).
		lookup = !a.threads.Has(m.ChannelID) && !a.notThreads.Has(m.ChannelID)
		// With threads on, a question asked outside a thread opens one (a
		// command is answered where it was typed).
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
	in := adapters.Inbound{
		Channel:      Name,
		SessionKey:   sessionKey(m.GuildID, m.ChannelID),
		User:         "discord:" + m.Author.ID,
		Text:         text,
		ReplyTo:      m.ChannelID + replySep + m.ID,
		Direct:       direct,
		EventID:      "discord:msg:" + m.ID,
		Conversation: conversation(m.GuildID),
		Files:        files,
	}
	if ref := m.MessageReference; ref != nil && ref.MessageID != "" && (ref.ChannelID == "" || ref.ChannelID == m.ChannelID) &&
		(m.ReferencedMessage == nil || m.ReferencedMessage.Author == nil || m.ReferencedMessage.Author.ID != botID) {
		in.RepliesTo = replyRef(m.ChannelID, ref.MessageID) // H1: a reply chain the bot was not part of
	}
	a.enqueue(m.ChannelID, job{in: in, lookup: lookup, openThread: open, guild: m.GuildID, message: m.ID})
}

// conversation is the kind of a Discord conversation: a DM has no guild (bots
// take no part in group DMs); anything in a guild is a channel or a thread.
func conversation(guildID string) string {
	if guildID == "" {
		return adapters.ConversationDirect
	}
	return adapters.ConversationChannel
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

func (a *Adapter) onThreadCreate(tc *discordgo.ThreadCreate) {
	if tc == nil || tc.Channel == nil {
		return
	}
	if bot := a.link.BotID(); bot != "" && tc.OwnerID == bot {
		a.threads.Put(tc.ID, tc.ParentID)
	}
}

// ---- interactions ----

// commandOption is the name of a command's one string option ("" for none),
// and whether detour has the command.
func commandOption(name string) (string, bool) {
	for _, c := range commandDefs() {
		switch {
		case c.Name != name:
		case len(c.Options) == 0:
			return "", true
		default:
			return c.Options[0].Name, true
		}
	}
	return "", false
}

// commandDefs are detour's application commands.
func commandDefs() []*discordgo.ApplicationCommand {
	opt := func(name, desc string, required bool) []*discordgo.ApplicationCommandOption {
		return []*discordgo.ApplicationCommandOption{{
			Type: discordgo.ApplicationCommandOptionString, Name: name, Description: desc,
			Required: required, Autocomplete: true,
		}}
	}
	return []*discordgo.ApplicationCommand{
		{Name: "model", Description: "Show or switch this conversation's model",
			Options: opt("model", "provider/model, optionally @profile", false)},
		{Name: "new", Description: "Start a new conversation, optionally on another model",
			Options: opt("model", "provider/model, optionally @profile", false)},
		{Name: "reset", Description: "Clear this conversation and its automatic model override"},
		{Name: "compact", Description: "Replace this conversation so far by a summary"},
		{Name: "status", Description: "Show the selected model and the active fallback, if any"},
		{Name: "usage", Description: "Your paid calls, tokens and estimated cost (all: everyone's, admins)",
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "scope",
				Description: "all: everyone's usage (admins)", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "all", Value: "all"}}}}},
		// T5: hidden from everyone but server admins until they grant it
		// (Server Settings > Integrations); detour still checks admin.users.
		{Name: "recover", Description: "Admin: probe a model or profile now and clear its cooldown",
			Options: opt("target", "provider/model or profile id", true), DefaultMemberPermissions: &adminsOnly},
		{Name: "help", Description: "List the commands"},
	}
}

// adminsOnly is default_member_permissions "0": only members with the
// Administrator permission see the command until a server admin grants it.
var adminsOnly int64

func (a *Adapter) registerCommands(ctx context.Context) error {
	app := a.link.AppID()
	if app == "" {
		return errNoApp
	}
	cmds := commandDefs()
	_, err := link.Get(ctx, a.link, "register commands", "",
		func(opts ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error) {
			return a.rest.ApplicationCommandBulkOverwrite(app, a.cfg.GuildID, cmds, opts...)
		})
	if err == nil {
		scope := "global"
		if a.cfg.GuildID != "" {
			scope = "guild " + a.cfg.GuildID
		}
		a.log.Info("discord commands registered", "count", len(cmds), "scope", scope)
	}
	return err
}

var errNoApp = errors.New("discord: READY carried no application id")

func commandData(i *discordgo.Interaction) (discordgo.ApplicationCommandInteractionData, bool) {
	d, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	return d, ok
}

func stringOption(d discordgo.ApplicationCommandInteractionData, name string) (value string, focused bool) {
	for _, o := range d.Options {
		if o == nil || o.Name != name {
			continue
		}
		s, _ := o.Value.(string)
		return strings.TrimSpace(s), o.Focused
	}
	return "", false
}

func interactionUser(i *discordgo.Interaction) string {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User.ID
	}
	if i.User != nil {
		return i.User.ID
	}
	return ""
}

// interactionAnswers answer the kinds of interaction detour takes.
var interactionAnswers = map[discordgo.InteractionType]func(*Adapter, context.Context, *discordgo.Interaction, time.Time){
	discordgo.InteractionApplicationCommandAutocomplete: (*Adapter).autocomplete,
	discordgo.InteractionApplicationCommand:             (*Adapter).command,
	discordgo.InteractionMessageComponent:               (*Adapter).component,
}

// onInteraction gives each interaction its own goroutine, which answers Discord
// first (deferral or autocomplete choices) within the 3-second deadline,
// whatever else is waiting.
func (a *Adapter) onInteraction(ic *discordgo.InteractionCreate) {
	if ic == nil || ic.Interaction == nil {
		return
	}
	i := ic.Interaction
	if a.seen.Seen("interaction:" + i.ID) {
		return // replayed on resume: answered already
	}
	received := time.Now()
	answer := interactionAnswers[i.Type]
	if answer == nil {
		return
	}
	select {
	case a.answering <- struct{}{}:
	default:
		a.log.Warn("discord interaction dropped: too many interactions being answered", "interaction_id", i.ID, "limit", maxAnswering)
		return
	}
	if !a.goOwned(func(ctx context.Context) { defer func() { <-a.answering }(); answer(a, ctx, i, received) }) {
		<-a.answering
	}
}

// Interaction answering limits.
const (
	// interactionDeadline is Discord's: the first response must arrive within 3 s.
	interactionDeadline = 3 * time.Second
	// maxAnswering bounds the interaction goroutines (each lives at most
	// interactionDeadline before it hands the command on).
	maxAnswering = 256
	// lookupTimeout bounds a channel lookup on a channel's worker.
	lookupTimeout = 5 * time.Second
)

func (a *Adapter) command(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := commandData(i)
	if !ok {
		return
	}
	optName, known := commandOption(d.Name)
	if !known {
		return
	}
	text := "/" + d.Name
	arg := ""
	if optName != "" {
		arg, _ = stringOption(d, optName)
		if arg != "" {
			text += " " + arg
		}
	}
	// Command answers are for the person who asked (the router marks them
	// Ephemeral); the deferral fixes the visibility of the edited answer.
	a.acknowledge(ctx, i, received, &pending{i: i, created: time.Now(), ephemeral: true}, text,
		&discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}})
}

// acknowledge gives Discord resp within its deadline, remembers the
// interaction and hands its text to its channel's worker, in that channel's
// order, behind messages that arrived before it. An interaction Discord did
// not take the acknowledgement of gets its answer dropped, never posted in the
// channel (Send).
func (a *Adapter) acknowledge(ctx context.Context, i *discordgo.Interaction, received time.Time, p *pending, text string, resp *discordgo.InteractionResponse) {
	dctx, cancel := context.WithDeadline(ctx, received.Add(interactionDeadline))
	err := a.link.Call(dctx, "acknowledge interaction", i.Token, func(opts ...discordgo.RequestOption) error {
		return a.rest.InteractionRespond(i, resp, opts...)
	})
	cancel()
	if err != nil {
		a.log.Warn("discord interaction not acknowledged; its answer cannot be shown", "interaction_id", i.ID,
			"after", time.Since(received).Round(time.Millisecond), "err", err)
	}
	p.deferred = err == nil
	a.interactions.Add(i.ID, p)
	in := adapters.Inbound{
		Channel:      Name,
		SessionKey:   sessionKey(i.GuildID, i.ChannelID),
		User:         "discord:" + interactionUser(i),
		Text:         text,
		ReplyTo:      interactionPrefix + i.ID + ":" + i.ChannelID,
		Direct:       i.GuildID == "",
		Native:       true,
		EventID:      "discord:interaction:" + i.ID,
		Conversation: conversation(i.GuildID),
	}
	a.setParent(&in, i.GuildID, i.ChannelID)
	a.enqueue(i.ChannelID, job{in: in})
}

func (a *Adapter) autocomplete(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := commandData(i)
	if !ok {
		return
	}
	optName, _ := commandOption(d.Name)
	partial, _ := stringOption(d, optName)
	var choices []string
	switch d.Name {
	case "recover":
		choices = completeRecover(a.cfg.Models(), a.cfg.Profiles(), partial)
	default:
		choices = completeModel(a.cfg.Models(), a.cfg.Profiles(), partial)
	}
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(choices))
	for _, c := range choices {
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: c, Value: c})
	}
	ctx, cancel := context.WithDeadline(ctx, received.Add(interactionDeadline))
	defer cancel()
	err := a.link.Call(ctx, "autocomplete", i.Token, func(opts ...discordgo.RequestOption) error {
		return a.rest.InteractionRespond(i, &discordgo.InteractionResponse{
			Type: discordgo.InteractionApplicationCommandAutocompleteResult,
			Data: &discordgo.InteractionResponseData{Choices: out},
		}, opts...)
	})
	if err != nil {
		a.log.Warn("discord autocomplete failed", "command", d.Name, "err", err)
	}
}

// maxChoices and maxChoiceLen are Discord's autocomplete limits.
const (
	maxChoices   = 25
	maxChoiceLen = 100
)

type choiceList struct{ out []string }

func (c *choiceList) add(s string) {
	if len(c.out) < maxChoices && len(s) <= maxChoiceLen && s != "" && !slices.Contains(c.out, s) {
		c.out = append(c.out, s)
	}
}

// profilesFor keeps the profiles of a model's provider ("openai:main" for
// "openai/gpt-4o"); a profile id without a provider prefix fits every model.
func profilesFor(model string, profiles []string) []string {
	provider, _, _ := strings.Cut(model, "/")
	var out []string
	for _, p := range profiles {
		pp, _, ok := strings.Cut(p, ":")
		if !ok || pp == provider {
			out = append(out, p)
		}
	}
	return out
}

// completeModel suggests configured models matching partial (case-insensitive
// substring); "model@prof" suggests that model's profiles matching "prof". Models come
// first, then their @profile forms.
func completeModel(models, profiles []string, partial string) []string {
	p := strings.ToLower(partial)
	var c choiceList
	if before, after, ok := strings.Cut(p, "@"); ok {
		for _, m := range models {
			if !strings.Contains(strings.ToLower(m), before) {
				continue
			}
			for _, pr := range profilesFor(m, profiles) {
				if strings.Contains(strings.ToLower(pr), after) {
					c.add(m + "@" + pr)
				}
			}
		}
		return c.out
	}
	var matched []string
	for _, m := range models {
		if strings.Contains(strings.ToLower(m), p) {
			c.add(m)
			matched = append(matched, m)
		}
	}
	for _, m := range matched {
		for _, pr := range profilesFor(m, profiles) {
			c.add(m + "@" + pr)
		}
	}
	return c.out
}

// completeRecover suggests models and profile ids matching partial.
func completeRecover(models, profiles []string, partial string) []string {
	p := strings.ToLower(partial)
	var c choiceList
	for _, list := range [][]string{models, profiles} {
		for _, s := range list {
			if strings.Contains(strings.ToLower(s), p) {
				c.add(s)
			}
		}
	}
	return c.out
}

// interactionTTL is how long an interaction token stays usable (Discord: 15 min).
const interactionTTL = 14 * time.Minute

const interactionPrefix = "interaction:"

// pending is an interaction waiting for its answers.
type pending struct {
	mu        sync.Mutex
	i         *discordgo.Interaction
	created   time.Time
	ephemeral bool
	deferred  bool // the deferred response was accepted
	edited    bool // the deferred response has been replaced by the first answer
	update    bool // a pick: the original response is the menu's message, whose menu the answer removes
}

// interaction is the pending interaction id names, nil when unknown or expired.
func (a *Adapter) interaction(id string) *pending {
	p, _ := a.interactions.Get(id)
	if p == nil || time.Since(p.created) > interactionTTL {
		return nil
	}
	return p
}
