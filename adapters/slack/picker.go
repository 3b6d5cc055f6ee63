package slack

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Pickers (L4): an answer with Choices (/model without an argument) is an
// ephemeral message with a static select. A pick comes back as block_actions
// over Socket Mode and becomes an Inbound of that person, in the session the
// picker was offered in, whose Text is the choice's Command ("/model x").

// Slack's sizes for a static select: 100 options, option text 75 characters,
// value 150, block_id 255, a section's text 3,000
// (https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element/,
// https://docs.slack.dev/reference/block-kit/composition-objects/option-object/).
const (
	pickAction      = "detour_pick"  // the select's action_id
	pickBlockPrefix = "detour_pick|" // + the session key the choice applies to: its block_id
	maxOptions      = 100
	maxOptionText   = 75
	maxOptionValue  = 150
	maxBlockID      = 255
	maxSectionText  = 3000
)

// pickerBlocks renders out as a section and a select; false when no choice fits.
func pickerBlocks(out adapters.Outbound) ([]slackgo.Block, bool) {
	blockID := pickBlockPrefix + out.SessionKey
	if len(blockID) > maxBlockID {
		return nil, false
	}
	var opts []*slackgo.OptionBlockObject
	for _, c := range out.Choices {
		if len(opts) == maxOptions {
			break
		}
		if c.Command == "" || utf8.RuneCountInString(c.Command) > maxOptionValue || strings.TrimSpace(c.Label) == "" {
			continue
		}
		label := slackgo.NewTextBlockObject(slackgo.PlainTextType, truncateRunes(c.Label, maxOptionText), false, false)
		opts = append(opts, slackgo.NewOptionBlockObject(c.Command, label, nil))
	}
	if len(opts) == 0 {
		return nil, false
	}
	placeholder := slackgo.NewTextBlockObject(slackgo.PlainTextType, "Choose…", false, false)
	sel := slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, placeholder, pickAction, opts...)
	// Verbatim, so Slack does not turn names in the text into mentions (T3).
	text := slackgo.NewTextBlockObject(slackgo.MarkdownType, truncateRunes(ToMrkdwn(out.Text), maxSectionText), false, true)
	return []slackgo.Block{slackgo.NewSectionBlock(text, nil, nil), slackgo.NewActionBlock(blockID, sel)}, true
}

// sendPicker posts out with its select: ephemeral to the person who asked when
// known, else in the thread for everyone (a thread's model is everyone's there).
func (a *Adapter) sendPicker(ctx context.Context, t target, out adapters.Outbound) error {
	blocks, ok := pickerBlocks(out)
	if !ok {
		out.Choices = nil
		return a.Send(ctx, out)
	}
	fallback := escapeMrkdwn(truncateRunes(out.Text, maxChunk))
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(fallback, false), slackgo.MsgOptionBlocks(blocks...)}
	asker, _ := a.askers.Value(target{Channel: t.Channel, ThreadTS: t.ThreadTS}.encode())
	t.User = cmp.Or(t.User, asker) // a picker answering a typed "!model" is for whoever typed it
	if err := a.postMessage(ctx, t, opts...); err != nil {
		return fmt.Errorf("slack: posting a picker: %w", err)
	}
	return nil
}

// fromAction turns a pick in detour's select into an Inbound, or nil.
func (a *Adapter) fromAction(cb slackgo.InteractionCallback) *adapters.Inbound {
	if cb.Type != slackgo.InteractionTypeBlockActions || cb.User.ID == "" {
		return nil
	}
	var act *slackgo.BlockAction
	for _, ba := range cb.ActionCallback.BlockActions {
		if ba != nil && ba.ActionID == pickAction && strings.HasPrefix(ba.BlockID, pickBlockPrefix) {
			act = ba
			break
		}
	}
	if act == nil {
		return nil
	}
	if a.mem.seen.Seen("act:" + cb.TriggerID + ":" + act.ActionTs) {
		return nil
	}
	command, key := act.SelectedOption.Value, strings.TrimPrefix(act.BlockID, pickBlockPrefix)
	parts := append(strings.Split(key, ":"), "") // slack, team, channel[, thread], ""
	if !strings.HasPrefix(command, "/") || len(parts) < 4 || len(parts) > 5 || parts[0] != "slack" {
		a.log.Debug("slack: a pick that is not detour's", "block_id", act.BlockID)
		return nil
	}
	team, channel, thread := parts[1], parts[2], parts[3]
	if channel == "" || (cb.Channel.ID != "" && cb.Channel.ID != channel) || (cb.Team.ID != "" && cb.Team.ID != team) {
		a.log.Warn("slack: a pick names another conversation than the one it was made in; ignored")
		return nil
	}
	in := &adapters.Inbound{
		Channel:    Name,
		SessionKey: key,
		User:       "slack:" + cb.User.ID,
		Text:       command,
		ReplyTo:    target{Channel: channel, ThreadTS: thread, User: cb.User.ID, ResponseURL: cb.ResponseURL}.encode(),
		Direct:     strings.HasPrefix(channel, "D"),
		Native:     true,
		EventID:    "slack:act:" + cb.TriggerID,
	}
	if !in.Direct && thread == "" { // the channel's defaults session: the pick sets what new threads use
		in.DefaultsFor = "new threads in " + channelLabel(cb.Channel.Name)
	}
	return in
}
