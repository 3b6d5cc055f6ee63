package slack

import (
	"context"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// conversationOfType maps a message event's channel_type to the conversation
// kind (T5); "group" is a private channel
// (https://api.slack.com/events/message.mpim, .../message.groups).
var conversationOfType = map[string]string{
	"im":       adapters.ConversationDirect,
	"app_home": adapters.ConversationDirect,
	"mpim":     adapters.ConversationGroup,
	"channel":  adapters.ConversationChannel,
	"group":    adapters.ConversationChannel,
}

// learnConversation remembers the kind of ev's conversation when the event names
// it (message events do; app_mention events do not).
func (a *Adapter) learnConversation(ev innerEvent) {
	if k := conversationOfType[ev.ChannelType]; k != "" && ev.Channel != "" {
		a.mem.kinds.Put(ev.Channel, k)
	}
}

// conversation is the kind of ev's conversation: from its channel type, an
// earlier event of it, or conversations.info (once per conversation). When that
// fails, an id starting with G counts as a group DM: such ids are group DMs or
// private channels made before 2021, and T5 fails closed.
func (a *Adapter) conversation(ctx context.Context, ev innerEvent) string {
	if k := conversationOfType[ev.ChannelType]; k != "" {
		return k
	}
	if strings.HasPrefix(ev.Channel, "D") {
		return adapters.ConversationDirect
	}
	if k, ok := a.mem.kinds.Value(ev.Channel); ok && k != "" {
		return k
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ch, err := a.api.GetConversationInfoContext(ctx, &slackgo.GetConversationInfoInput{ChannelID: ev.Channel})
	k := adapters.ConversationChannel
	switch {
	case err != nil:
		a.log.Warn("slack: the kind of a conversation is unknown (conversations.info failed)", "channel", ev.Channel, "err", safeErr(err))
		if strings.HasPrefix(ev.Channel, "G") {
			k = adapters.ConversationGroup
		}
		return k // not remembered: asked again next time
	case ch.IsIM:
		k = adapters.ConversationDirect
	case ch.IsMpIM:
		k = adapters.ConversationGroup
	}
	a.mem.kinds.Put(ev.Channel, k)
	return k
}

// slashConversation is the kind of a slash command's conversation: Slack names a
// DM "directmessage" and a group DM "mpdm-<members>".
func slashConversation(cmd slackgo.SlashCommand) string {
	switch {
	case strings.HasPrefix(cmd.ChannelID, "D") || cmd.ChannelName == "directmessage":
		return adapters.ConversationDirect
	case strings.HasPrefix(cmd.ChannelName, "mpdm-"):
		return adapters.ConversationGroup
	}
	return adapters.ConversationChannel
}
