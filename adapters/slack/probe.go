package slack

import (
	"context"
	"errors"
	"fmt"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Probe checks the bot token (auth.test), the app-level token
// (apps.connections.open: a Socket Mode URL is issued, no socket is opened) and,
// when target names a channel id, that the bot can post there
// (conversations.info: it exists and the bot is a member). Nothing is posted.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	at, err := a.api.AuthTestContext(ctx)
	out := []adapters.ProbeResult{adapters.Checked("slack bot token (auth.test)", safeErr(err), func() string {
		return fmt.Sprintf("workspace %s (%s), bot user %s", at.Team, at.TeamID, at.UserID)
	})}
	_, _, err = a.api.StartSocketModeContext(ctx)
	out = append(out, adapters.Checked("slack app token (apps.connections.open)", safeErr(err),
		func() string { return "Socket Mode can connect" }))
	if target == "" {
		return out
	}
	ch, err := a.api.GetConversationInfoContext(ctx, &slackgo.GetConversationInfoInput{ChannelID: target})
	if err == nil && !ch.IsMember && !ch.IsIM {
		err = errors.New("#" + ch.Name + ": the bot is not a member; invite it (/invite @bot) or reports cannot be posted")
	}
	return append(out, adapters.Checked("slack admin channel "+target+" (conversations.info)", safeErr(err),
		func() string { return "#" + ch.Name }))
}

// Connected reports whether a Socket Mode link is up now (adapters.Connector):
// from Slack's hello until the link drops, Slack asks for a reconnect, or Run
// ends. /readyz and the "ready" log line wait for it.
func (a *Adapter) Connected() bool { return a.connected.Load() }
