package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/adapters"
)

// Earlier messages of a thread (H1, H2): mentioned for the first time in a
// thread it did not start, the bot reads it with conversations.replies
// (https://docs.slack.dev/reference/methods/conversations.replies): oldest
// first, the parent first, paged by response_metadata.next_cursor; Tier 3 for
// internal apps (50+ a minute; an app distributed outside the Marketplace gets
// 1 a minute and 15 a page). It needs channels:history, groups:history,
// im:history or mpim:history, by the conversation's type; both manifests ask
// for them.

const (
	repliesPage     = 200 // Slack's advice: no more than 200 a page
	repliesMaxPages = 10  // a thread of 2,000 messages is read no further
)

// earlierRef is Inbound.Earlier: the thread and the message that addressed the
// bot ("C1|1712.000100|1712.000900").
type earlierRef struct{ channel, thread, before string }

func (e earlierRef) encode() string { return e.channel + "|" + e.thread + "|" + e.before }

// ReadEarlier implements adapters.HistoryReader: the thread's parent and the
// newest messages before the one that addressed the bot, max in all, without
// the bot's own (its answers, notices and errors).
func (a *Adapter) ReadEarlier(ctx context.Context, earlier string, max int) ([]adapters.Earlier, error) {
	p := strings.Split(earlier, "|")
	if len(p) != 3 || slices.Contains(p, "") || max <= 0 {
		return nil, nil
	}
	ref, me := earlierRef{p[0], p[1], p[2]}, a.me.Load()
	var parent, recent []adapters.Earlier // recent: a window of the newest max-1
	cursor := ""
	for range repliesMaxPages {
		msgs, more, next, err := a.replies(ctx, ref, cursor)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch {
			case m.Timestamp == "" || m.Timestamp >= ref.before && m.Timestamp != ref.thread:
			case m.User == me.user || (me.botID != "" && m.BotID == me.botID): // the bot's own are never context
			case m.Timestamp == ref.thread:
				if parent == nil {
					parent = []adapters.Earlier{earlierOf(m)}
				}
			default:
				if recent = append(recent, earlierOf(m)); len(recent) > max-1 {
					recent = recent[1:]
				}
			}
		}
		if !more || next == "" {
			break
		}
		cursor = next
	}
	return append(parent, recent...), nil
}

// replies reads one page, waiting out 429s within ctx.
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
		e.Bot, e.User, e.Name = true, "slack:"+m.BotID, m.Username
		if m.BotProfile != nil && m.BotProfile.Name != "" {
			e.Name = m.BotProfile.Name
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

// Files people share (I1-I4): a message event carries their metadata; the bytes
// are read only when a turn needs them, from url_private_download with the bot
// token as Authorization: Bearer
// (https://docs.slack.dev/messaging/working-with-files/, "Authentication"),
// which needs files:read. Without it Slack answers with its sign-in page (a
// redirect, then HTML): that is refused, never taken for the file. The token
// goes only to Slack's file hosts (or a configured api_url's host), and a
// redirect to another host is not followed.

// slackFile is the part of a file object the adapter reads.
type slackFile struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	Mode               string `json:"mode"` // hosted, external, snippet, post, tombstone, hidden_by_limit
	URLPrivateDownload string `json:"url_private_download"`
	URLPrivate         string `json:"url_private"`
}

// filesOf maps the files of a message event.
func filesOf(fs []slackFile) []adapters.File {
	if len(fs) == 0 {
		return nil
	}
	out := make([]adapters.File, 0, len(fs))
	for _, f := range fs {
		name, ref := cmp.Or(f.Name, f.Title), cmp.Or(f.URLPrivateDownload, f.URLPrivate)
		switch f.Mode {
		case "tombstone", "hidden_by_limit", "external":
			ref = "" // deleted, beyond the workspace's history limit, or hosted elsewhere
		}
		out = append(out, adapters.File{Name: name, MIME: f.Mimetype, Size: f.Size, Ref: ref})
	}
	return out
}

var (
	fileClient      = adapters.NewDownloadClient(2*time.Minute, nil) // same-host redirects only (I3)
	errNotSlackFile = errors.New("slack: the file is not on a Slack file host; it is not downloaded with the bot token")
	errSignIn       = errors.New("slack answered with its sign-in page instead of the file: the bot token needs the files:read scope (add it and reinstall the app)")
)

// ReadFile implements adapters.FileReader.
func (a *Adapter) ReadFile(ctx context.Context, f adapters.File, max int64) ([]byte, error) {
	if f.Ref == "" {
		return nil, errors.New("slack: the file cannot be downloaded (deleted, hidden by the workspace's plan, or hosted elsewhere)")
	}
	if !adapters.OnFileHost(f.Ref, a.cfg.APIURL, slackFileHost) {
		return nil, errNotSlackFile
	}
	h := http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}
	b, ctype, err := adapters.Download(ctx, fileClient, f.Ref, h, max)
	switch {
	case errors.Is(err, adapters.ErrRedirectRefused):
		return nil, errSignIn
	case err != nil:
		return nil, err
	}
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(ctype)), "text/html") && !strings.Contains(strings.ToLower(f.MIME), "html") {
		return nil, errSignIn
	}
	return b, nil
}

// slackFileHost: slack.com and its subdomains (files.slack.com).
func slackFileHost(h string) bool { return h == "slack.com" || strings.HasSuffix(h, ".slack.com") }
