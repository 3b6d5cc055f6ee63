package slack

import (
	"context"
	"fmt"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Probe checks the bot token (auth.test), the app-level token
// (apps.connections.open: a Socket Mode URL is issued, no socket is opened) and,
// when target names a channel id, that the bot can post there
// (conversations.info: it exists and the bot is a member). Nothing is posted.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	var out []adapters.ProbeResult
	at, err := a.api.AuthTestContext(ctx)
	r := adapters.ProbeResult{What: "slack bot token (auth.test)", OK: err == nil}
	if err != nil {
		r.Detail = safeErr(err).Error()
	} else {
		r.Detail = fmt.Sprintf("workspace %s (%s), bot user %s", at.Team, at.TeamID, at.UserID)
	}
	out = append(out, r)

	_, _, err = a.api.StartSocketModeContext(ctx)
	r = adapters.ProbeResult{What: "slack app token (apps.connections.open)", OK: err == nil, Detail: "Socket Mode can connect"}
	if err != nil {
		r.Detail = safeErr(err).Error()
	}
	out = append(out, r)

	if target == "" {
		return out
	}
	ch, err := a.api.GetConversationInfoContext(ctx, &slackgo.GetConversationInfoInput{ChannelID: target})
	r = adapters.ProbeResult{What: "slack admin channel " + target + " (conversations.info)", OK: err == nil}
	switch {
	case err != nil:
		r.Detail = safeErr(err).Error()
	case !ch.IsMember && !ch.IsIM:
		r.OK, r.Detail = false, "#"+ch.Name+": the bot is not a member; invite it (/invite @bot) or reports cannot be posted"
	default:
		r.Detail = "#" + ch.Name
	}
	return append(out, r)
}

// Connected reports whether a Socket Mode link is up now (adapters.Connector):
// from Slack's hello until the link drops, Slack asks for a reconnect, or Run
// ends. /readyz and the "ready" log line wait for it.
func (a *Adapter) Connected() bool { return a.connected.Load() }
