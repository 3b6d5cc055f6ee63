package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Earlier messages of a thread (H1, H2): mentioned for the first time in a
// thread it did not start, the bot reads the thread with conversations.replies
// (https://docs.slack.dev/reference/methods/conversations.replies): the
// thread's messages oldest first, the parent first, paginated with
// response_metadata.next_cursor, at most limit a page, Tier 3 for internal apps
// (50+ a minute; an app distributed outside the Marketplace gets 1 a minute and
// 15 a page). It needs channels:history, groups:history, im:history or
// mpim:history, by the conversation's type; both manifests ask for them.

// Bounds of one thread read.
const (
	repliesPage     = 200 // Slack's advice: no more than 200 a page
	repliesMaxPages = 10  // a thread of 2,000 messages is read no further
)

// earlierRef is what Inbound.Earlier holds: the thread and the message that
// addressed the bot ("C1|1712.000100|1712.000900").
type earlierRef struct{ channel, thread, before string }

func (e earlierRef) encode() string { return e.channel + "|" + e.thread + "|" + e.before }

func decodeEarlier(s string) (earlierRef, bool) {
	p := strings.Split(s, "|")
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return earlierRef{}, false
	}
	return earlierRef{p[0], p[1], p[2]}, true
}

// ReadEarlier implements adapters.HistoryReader: the thread's parent and the
// newest messages before the one that addressed the bot, max in all, without
// the bot's own messages (its answers, notices and errors).
func (a *Adapter) ReadEarlier(ctx context.Context, earlier string, max int) ([]adapters.Earlier, error) {
	ref, ok := decodeEarlier(earlier)
	if !ok || max <= 0 {
		return nil, nil
	}
	me := a.me.Load()
	var (
		parent *slackgo.Message
		recent []slackgo.Message // a window of the newest max-1
		cursor string
	)
	for page := 0; page < repliesMaxPages; page++ {
		msgs, more, next, err := a.replies(ctx, ref, cursor)
		if err != nil {
			return nil, err
		}
		for i := range msgs {
			m := msgs[i]
			if m.Timestamp == "" || m.Timestamp >= ref.before && m.Timestamp != ref.thread {
				continue
			}
			if m.User == me.user || (me.botID != "" && m.BotID == me.botID) {
				continue // the bot's own messages are never context
			}
			if m.Timestamp == ref.thread {
				if parent == nil {
					parent = &m
				}
				continue
			}
			recent = append(recent, m)
			if len(recent) > max-1 {
				recent = recent[1:]
			}
		}
		if !more || next == "" {
			break
		}
		cursor = next
	}
	var out []adapters.Earlier
	if parent != nil {
		out = append(out, earlierOf(*parent))
	}
	for _, m := range recent {
		out = append(out, earlierOf(m))
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out, nil
}

// replies reads one page, waiting out 429s (Tier 3) within the context.
func (a *Adapter) replies(ctx context.Context, ref earlierRef, cursor string) (msgs []slackgo.Message, more bool, next string, err error) {
	p := &slackgo.GetConversationRepliesParameters{ChannelID: ref.channel, Timestamp: ref.thread, Cursor: cursor,
		Latest: ref.before, Inclusive: false, Limit: repliesPage}
	err = a.call(ctx, "conversations.replies", "", func(ctx context.Context) error {
		msgs, more, next, err = a.api.GetConversationRepliesContext(ctx, p)
		return err
	})
	switch {
	case slackCode(err) == "missing_scope":
		return nil, false, "", errors.New("slack: conversations.replies: missing_scope: the app needs channels:history, groups:history, im:history and mpim:history (slack-manifest.yaml)")
	case err != nil:
		return nil, false, "", fmt.Errorf("slack: %w", err)
	}
	return msgs, more, next, nil
}

// earlierOf maps one Slack message.
func earlierOf(m slackgo.Message) adapters.Earlier {
	e := adapters.Earlier{User: "slack:" + m.User, Text: strings.TrimSpace(unescapeSlack(m.Text)), At: tsTime(m.Timestamp)}
	if m.User == "" || m.BotID != "" {
		e.Bot = true
		e.User = "slack:" + m.BotID
		if m.BotProfile != nil && m.BotProfile.Name != "" {
			e.Name = m.BotProfile.Name
		} else {
			e.Name = m.Username
		}
	}
	for _, f := range m.Files {
		e.Files = append(e.Files, f.Name)
	}
	return e
}

// tsTime reads a Slack timestamp ("1712000000.000100"); the zero time for
// anything else.
func tsTime(ts string) time.Time {
	sec, _, _ := strings.Cut(ts, ".")
	n, err := strconv.ParseUint(sec, 10, 63)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(int64(n), 0).UTC()
}
