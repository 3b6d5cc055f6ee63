package sessions

import (
	"context"
	"slices"
	"strings"

	"github.com/detourbot/detour/adapters"
)

// Access is who may talk to the bot and where (T5). Empty lists mean everyone,
// everywhere. Admin users may always talk to the bot.
type Access struct {
	Users []string // "slack:U123", "discord:456", "console:alice"
	// Channels lists channel names ("slack") or session-key prefixes
	// ("slack:T1:C9"); a thread counts as the channel it belongs to.
	Channels []string
	// RefuseDirect refuses direct messages, group DMs included
	// (access.direct_messages: false).
	RefuseDirect bool
	// ChannelModelEveryone lets anyone set the model of a channel's new
	// conversations (access.channel_model: everyone); else only admins (T9).
	ChannelModelEveryone bool
}

// refusal is the one short answer a refused person gets.
const refusal = "sorry, this bot is not open to you here; ask an admin to add you (access.users, access.channels)"

// allowed reports whether in may reach a command or a model (T5). It is checked
// before anything else, so a refused message costs no paid call.
func (r *Router) allowed(in adapters.Inbound) bool {
	if r.cfg.isConfiguredAdmin(in.User) {
		return true
	}
	a := r.cfg.Access
	if a.RefuseDirect && isDirect(in) && in.Channel != "console" {
		return false
	}
	if len(a.Users) > 0 && !slices.Contains(a.Users, in.User) {
		return false
	}
	if len(a.Channels) > 0 && !slices.ContainsFunc(a.Channels, func(c string) bool {
		// A thread is where its channel is: an allowed channel's threads
		// are allowed (Inbound.Parent), and nothing else is.
		return c == in.Channel || under(in.SessionKey, c) || (in.Parent != "" && under(in.Parent, c))
	}) {
		return false
	}
	return true
}

// under reports whether session key is c or lies under it ("c:...").
func under(key, c string) bool { return key == c || strings.HasPrefix(key, c+":") }

// isDirect reports whether in came from a direct message, a group DM included
// (access.direct_messages); a private channel is a channel.
func isDirect(in adapters.Inbound) bool {
	switch in.Conversation {
	case adapters.ConversationDirect, adapters.ConversationGroup:
		return true
	case adapters.ConversationChannel:
		return false
	}
	return in.Direct
}

// refuse answers a refused message. In a shared channel only once per person and
// conversation an hour, so a stranger cannot make the bot spam it; a direct
// conversation (and the console, which answers every line) gets every answer.
func (r *Router) refuse(ctx context.Context, in adapters.Inbound) {
	if !in.Direct && r.refused.Seen(in.User+"\x00"+in.SessionKey) {
		r.log.Debug("refused again, not answered", "user", in.User, "session", in.SessionKey)
		return
	}
	r.log.Info("refused: not allowed by access", "user", in.User, "session", in.SessionKey)
	out := reply(in, adapters.KindError, refusal)
	out.Ephemeral = true
	r.send(ctx, out)
}
