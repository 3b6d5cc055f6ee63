package discord

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
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

func (a *Adapter) onMessage(_ *discordgo.Session, mc *discordgo.MessageCreate) {
	if mc == nil || mc.Message == nil || mc.Author == nil {
		return
	}
	m := mc.Message
	botID := a.bot()
	if m.Author.ID == botID || m.Author.Bot {
		return // own echoes and other bots
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // joins, pins, thread-created notices...
	}
	ctx, _ := a.runCtx()
	direct := m.GuildID == ""
	mentioned := mentions(m, botID)
	switch {
	case direct:
	case mentioned:
		if !a.threads.Has(m.ChannelID) && a.isThread(ctx, m.ChannelID) {
			a.threads.Add(m.ChannelID) // mentioned in a thread: take part in it from now on
		}
	case a.threads.Has(m.ChannelID):
	default:
		return
	}
	text := stripMention(m.Content, botID)
	if text == "" {
		return
	}
	if a.seen.Seen(m.ID) {
		return // already delivered (replayed on resume)
	}
	a.deliver(adapters.Inbound{
		Channel:    Name,
		SessionKey: sessionKey(m.GuildID, m.ChannelID),
		User:       "discord:" + m.Author.ID,
		Text:       text,
		ReplyTo:    m.ChannelID,
		Direct:     direct,
	})
}

// isThread looks a channel's type up once (cached either way, bounded).
func (a *Adapter) isThread(ctx context.Context, channelID string) bool {
	if a.notThreads.Has(channelID) {
		return false
	}
	var ch *discordgo.Channel
	err := a.call(ctx, "get channel", "", func(opts ...discordgo.RequestOption) error {
		var err error
		ch, err = a.s.Channel(channelID, opts...)
		return err
	})
	if err != nil {
		a.log.Warn("discord channel lookup failed", "channel_id", channelID, "err", err)
		return false
	}
	if ch.IsThread() {
		return true
	}
	a.notThreads.Add(channelID)
	return false
}

func (a *Adapter) onThreadCreate(_ *discordgo.Session, tc *discordgo.ThreadCreate) {
	if tc == nil || tc.Channel == nil {
		return
	}
	if bot := a.bot(); bot != "" && tc.OwnerID == bot {
		a.threads.Add(tc.ID)
	}
}

// ---- interactions ----

// command names and their single string option.
var commandOption = map[string]string{
	"model":   "model",
	"new":     "model",
	"reset":   "",
	"status":  "",
	"recover": "target",
	"help":    "",
}

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
		{Name: "status", Description: "Show the selected model and the active fallback, if any"},
		{Name: "recover", Description: "Admin: probe a model or profile now and clear its cooldown",
			Options: opt("target", "provider/model or profile id", true)},
		{Name: "help", Description: "List the commands"},
	}
}

func (a *Adapter) registerCommands(ctx context.Context) error {
	app := a.app()
	if app == "" {
		return errNoApp
	}
	cmds := commandDefs()
	err := a.call(ctx, "register commands", "", func(opts ...discordgo.RequestOption) error {
		_, err := a.s.ApplicationCommandBulkOverwrite(app, a.cfg.GuildID, cmds, opts...)
		return err
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

var errNoApp = errorString("discord: READY carried no application id")

type errorString string

func (e errorString) Error() string { return string(e) }

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

func (a *Adapter) onInteraction(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
	if ic == nil || ic.Interaction == nil {
		return
	}
	ctx, _ := a.runCtx()
	switch ic.Type {
	case discordgo.InteractionApplicationCommandAutocomplete:
		a.autocomplete(ctx, ic.Interaction)
	case discordgo.InteractionApplicationCommand:
		a.command(ctx, ic.Interaction)
	}
}

func (a *Adapter) command(ctx context.Context, i *discordgo.Interaction) {
	d, ok := commandData(i)
	if !ok {
		return
	}
	optName, known := commandOption[d.Name]
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
	p := &pending{i: i, created: time.Now(), ephemeral: true}
	flags := discordgo.MessageFlagsEphemeral
	err := a.call(ctx, "defer interaction", i.Token, func(opts ...discordgo.RequestOption) error {
		return a.s.InteractionRespond(i, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: flags},
		}, opts...)
	})
	if err != nil {
		a.log.Warn("discord interaction defer failed; answering in the channel", "command", d.Name, "err", err)
	} else {
		p.deferred = true
	}
	a.interactions.put(i.ID, p)
	user := interactionUser(i)
	a.deliver(adapters.Inbound{
		Channel:    Name,
		SessionKey: sessionKey(i.GuildID, i.ChannelID),
		User:       "discord:" + user,
		Text:       text,
		ReplyTo:    interactionPrefix + i.ID + ":" + i.ChannelID,
		Direct:     i.GuildID == "",
		Native:     true,
	})
}

func (a *Adapter) autocomplete(ctx context.Context, i *discordgo.Interaction) {
	d, ok := commandData(i)
	if !ok {
		return
	}
	optName := commandOption[d.Name]
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
	err := a.call(ctx, "autocomplete", i.Token, func(opts ...discordgo.RequestOption) error {
		return a.s.InteractionRespond(i, &discordgo.InteractionResponse{
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

type choiceList struct {
	seen map[string]bool
	out  []string
}

func (c *choiceList) add(s string) {
	if len(c.out) >= maxChoices || len(s) > maxChoiceLen || s == "" || c.seen[s] {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[s] = true
	c.out = append(c.out, s)
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
}

type interactionStore struct {
	mu   sync.Mutex
	byID map[string]*pending
	n    int
	ids  []string
}

func newInteractionStore(n int) *interactionStore {
	return &interactionStore{byID: map[string]*pending{}, n: n}
}

func (s *interactionStore) put(id string, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; !ok {
		s.ids = append(s.ids, id)
	}
	s.byID[id] = p
	for len(s.ids) > s.n {
		delete(s.byID, s.ids[0])
		s.ids = s.ids[1:]
	}
}

func (s *interactionStore) get(id string) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byID[id]
	if p != nil && time.Since(p.created) > interactionTTL {
		return nil
	}
	return p
}
