package discord

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/commands"
)

// commandDefs are detour's application commands.
var commandDefs = func() []*discordgo.ApplicationCommand {
	opt := func(name, desc string, required bool) []*discordgo.ApplicationCommandOption {
		return []*discordgo.ApplicationCommandOption{{
			Type: discordgo.ApplicationCommandOptionString, Name: name, Description: desc,
			Required: required, Autocomplete: true,
		}}
	}
	// adminsOnly is default_member_permissions "0": only members with the
	// Administrator permission see the command until a server admin grants it.
	var adminsOnly int64
	return []*discordgo.ApplicationCommand{
		{Name: "model", Description: "Show or switch this conversation's model",
			Options: opt("model", "provider/model, optionally @profile", false)},
		{Name: "new", Description: "Start a new conversation, optionally on another model",
			Options: opt("model", "provider/model, optionally @profile", false)},
		{Name: "reset", Description: "Clear this conversation and its automatic model override"},
		{Name: "compact", Description: "Replace this conversation so far by a summary"},
		{Name: "status", Description: "Show the selected model and the active fallback (all: every provider's health)",
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "scope",
				Description: "all: the health board of every provider, model and key", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "all", Value: "all"}}}}},
		{Name: "usage", Description: "Your paid calls, tokens and estimated cost (all: everyone's, admins)",
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "scope",
				Description: "all: everyone's usage (admins)", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "all", Value: "all"}}}}},
		// T5: hidden from everyone but server admins until they grant it
		// (Server Settings > Integrations); detour still checks admin.users.
		{Name: "recover", Description: "Admin: probe a model or profile now and clear its cooldown",
			Options: opt("target", "provider/model or profile id", true), DefaultMemberPermissions: &adminsOnly},
		{Name: "help", Description: "List the commands"},
	}
}()

// commandArg is the value given to the command's one string option ("" for
// none), and whether detour has the command.
func commandArg(d discordgo.ApplicationCommandInteractionData) (string, bool) {
	i := slices.IndexFunc(commandDefs, func(c *discordgo.ApplicationCommand) bool { return c.Name == d.Name })
	if i < 0 || len(commandDefs[i].Options) == 0 {
		return "", i >= 0
	}
	for _, o := range d.Options {
		if o != nil && o.Name == commandDefs[i].Options[0].Name {
			s, _ := o.Value.(string)
			return strings.TrimSpace(s), true
		}
	}
	return "", true
}

func (a *Adapter) registerCommands(ctx context.Context) error {
	app := a.link.AppID()
	if app == "" {
		return errors.New("discord: READY carried no application id")
	}
	_, err := a.rest.ApplicationCommandBulkOverwrite(app, a.cfg.GuildID, commandDefs, discordgo.WithContext(ctx))
	if err != nil {
		return link.Err("register commands", "", err)
	}
	scope := "global"
	if a.cfg.GuildID != "" {
		scope = "guild " + a.cfg.GuildID
	}
	a.log.Info("discord commands registered", "count", len(commandDefs), "scope", scope)
	return nil
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

const (
	// interactionDeadline is Discord's: the first response must arrive within 3 s.
	interactionDeadline = 3 * time.Second
	// maxAnswering bounds the interaction goroutines (each lives at most
	// interactionDeadline before it hands the command on).
	maxAnswering = 256
	// interactionTTL is how long an interaction token stays usable (Discord: 15 min).
	interactionTTL = 14 * time.Minute
)

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
	i := ic.Interaction
	if i == nil || a.seen.Seen("interaction:"+i.ID) {
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

func (a *Adapter) command(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	arg, known := commandArg(d)
	if !ok || !known {
		return
	}
	if d.Name == "status" && arg == "all" && a.answerBoard(ctx, i, received) {
		return // issue 38: the health board, answered here (board.go)
	}
	text := strings.TrimSpace("/" + d.Name + " " + arg)
	// Command answers are for the person who asked (the router marks them
	// Ephemeral); the deferral fixes the visibility of the edited answer.
	a.acknowledge(ctx, i, received, &pending{i: i, created: time.Now(), ephemeral: true}, text,
		&discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}})
}

// component handles a pick in one of detour's menus: it acknowledges it at once
// (deferred update: the menu's message is edited with the answer later) and hands
// the chosen command to the router like a slash command, in its channel's order.
func (a *Adapter) component(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok || d.CustomID != pickID {
		return // not ours
	}
	text := ""
	if len(d.Values) == 1 {
		text = strings.TrimSpace(d.Values[0])
	}
	// Only a command can come from a menu (anything else is a forged payload).
	if c, ok := commands.Parse(text); !ok || c.Unknown != "" {
		a.log.Warn("discord pick ignored: not a command", "interaction_id", i.ID, "values", len(d.Values))
		return
	}
	p := &pending{i: i, created: time.Now(), update: true,
		ephemeral: i.Message != nil && i.Message.Flags&discordgo.MessageFlagsEphemeral != 0}
	a.acknowledge(ctx, i, received, p, text, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
}

// acknowledge gives Discord resp, remembers the interaction and hands its text
// to its channel's lane, behind messages that arrived before it. An interaction
// Discord did not take the acknowledgement of gets its answer dropped, never
// posted in the channel (Send).
func (a *Adapter) acknowledge(ctx context.Context, i *discordgo.Interaction, received time.Time, p *pending, text string, resp *discordgo.InteractionResponse) {
	dctx, cancel := context.WithDeadline(ctx, received.Add(interactionDeadline))
	err := a.rest.InteractionRespond(i, resp, discordgo.WithContext(dctx))
	cancel()
	if err != nil {
		a.log.Warn("discord interaction not acknowledged; its answer cannot be shown", "interaction_id", i.ID,
			"after", time.Since(received).Round(time.Millisecond), "err", link.Err("acknowledge interaction", i.Token, err))
	}
	p.deferred = err == nil
	a.interactions.Add(i.ID, p)
	in := inbound(i.GuildID, i.ChannelID, interactionUser(i), text, interactionPrefix+i.ID+":"+i.ChannelID, "interaction:"+i.ID)
	in.Native = true
	a.setParent(&in, i.GuildID, i.ChannelID)
	a.enqueue(i.ChannelID, job{in: in})
}

func (a *Adapter) autocomplete(ctx context.Context, i *discordgo.Interaction, received time.Time) {
	d, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok {
		return
	}
	arg, _ := commandArg(d)
	complete := completeModel
	if d.Name == "recover" {
		complete = completeRecover
	}
	choices := complete(a.cfg.Models(), a.cfg.Profiles(), arg)
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(choices))
	for _, c := range choices {
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: c, Value: c})
	}
	ctx, cancel := context.WithDeadline(ctx, received.Add(interactionDeadline))
	defer cancel()
	err := a.rest.InteractionRespond(i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionApplicationCommandAutocompleteResult,
		Data: &discordgo.InteractionResponseData{Choices: out},
	}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("discord autocomplete failed", "command", d.Name, "err", link.Err("autocomplete", i.Token, err))
	}
}

// Discord's limits on autocomplete choices and select menu options: 25 of
// them, names, labels and values of 100 characters.
// https://discord.com/developers/docs/components/reference#string-select
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
// substring), then their @profile forms; "model@prof" suggests only the forms of
// the models matching "model" whose profile matches "prof".
func completeModel(models, profiles []string, partial string) []string {
	model, profile, withProfile := strings.Cut(strings.ToLower(partial), "@")
	var c choiceList
	var matched []string
	for _, m := range models {
		if strings.Contains(strings.ToLower(m), model) {
			matched = append(matched, m)
			if !withProfile {
				c.add(m)
			}
		}
	}
	for _, m := range matched {
		for _, pr := range profilesFor(m, profiles) {
			if strings.Contains(strings.ToLower(pr), profile) {
				c.add(m + "@" + pr)
			}
		}
	}
	return c.out
}

// completeRecover suggests models and profile ids matching partial.
func completeRecover(models, profiles []string, partial string) []string {
	p := strings.ToLower(partial)
	var c choiceList
	for _, s := range slices.Concat(models, profiles) {
		if strings.Contains(strings.ToLower(s), p) {
			c.add(s)
		}
	}
	return c.out
}

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
