package discord

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
)

// Earlier messages (H1, H2): first mentioned in a thread it did not start, the
// bot reads the messages before the mention (newest first, at most maxPage;
// https://discord.com/developers/docs/resources/message#get-channel-messages);
// a reply is read with the chain of messages it answers, one GET per step
// (https://discord.com/developers/docs/resources/message#get-channel-message).
// Both need View Channel and Read Message History, and the MESSAGE_CONTENT
// intent for messages that do not mention the bot. Its own are left out.
const maxPage = 100

// Refs of Inbound.Earlier and Inbound.RepliesTo: "thread|<channel>|<before>"
// and "reply|<channel>|<message>".
func threadRef(channel, before string) string { return "thread|" + channel + "|" + before }
func replyRef(channel, message string) string { return "reply|" + channel + "|" + message }

// ReadEarlier implements adapters.HistoryReader.
func (a *Adapter) ReadEarlier(ctx context.Context, ref string, max int) ([]adapters.Earlier, error) {
	p := strings.Split(ref, "|")
	if len(p) != 3 || p[1] == "" || p[2] == "" || max <= 0 {
		return nil, nil
	}
	switch p[0] {
	case "thread":
		return a.threadBefore(ctx, p[1], p[2], max)
	case "reply":
		return a.replyChain(ctx, p[1], p[2], max)
	}
	return nil, nil
}

func (a *Adapter) threadBefore(ctx context.Context, channel, before string, max int) ([]adapters.Earlier, error) {
	msgs, err := a.rest.ChannelMessages(channel, min(max, maxPage), before, "", "", discordgo.WithContext(ctx))
	if err != nil {
		return nil, link.Err("read thread", "", err)
	}
	slices.Reverse(msgs) // oldest first
	out := make([]adapters.Earlier, 0, len(msgs))
	for _, m := range msgs {
		if m.Type == discordgo.MessageTypeThreadStarterMessage && m.ReferencedMessage != nil {
			m = m.ReferencedMessage // the message the thread was started from
		}
		if e, ok := a.earlierOf(m); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

func (a *Adapter) replyChain(ctx context.Context, channel, id string, max int) ([]adapters.Earlier, error) {
	var out []adapters.Earlier
	seen := map[string]bool{}
	for steps := 0; id != "" && !seen[id] && steps < max; steps++ {
		seen[id] = true
		m, err := a.rest.ChannelMessage(channel, id, discordgo.WithContext(ctx))
		if err != nil {
			if len(out) > 0 || link.Code(err) == discordgo.ErrCodeUnknownMessage {
				break // what was read is context enough; a deleted message ends the chain
			}
			return nil, link.Err("read replied message", "", err)
		}
		if e, ok := a.earlierOf(m); ok {
			out = append(out, e)
		}
		id = ""
		if r := m.MessageReference; r != nil && (r.ChannelID == "" || r.ChannelID == channel) {
			id = r.MessageID
		}
	}
	slices.Reverse(out)
	return out, nil
}

// SetAccess implements adapters.AccessFilter.
func (a *Adapter) SetAccess(mayTalk func(user string) bool) {
	if mayTalk == nil {
		a.mayTalk.Store(nil)
		return
	}
	a.mayTalk.Store(&mayTalk)
}

// refused reports whether m is, or was posted for, someone access.users
// refuses (H4, T5): its author, or for a bot's answer to a command the person
// who gave the command (interaction_metadata.user, or the older interaction.user).
// Discord does not say who posted through a webhook (anyone holding its URL
// may), so with access.users set a webhook's message is left out; a bot's own
// message, for nobody, is kept like the router keeps it (H2 marks it a bot's).
func (a *Adapter) refused(m *discordgo.Message) bool {
	p := a.mayTalk.Load()
	if p == nil || *p == nil {
		return false
	}
	may := *p
	switch {
	case m.InteractionMetadata != nil && m.InteractionMetadata.User != nil:
		return !may("discord:" + m.InteractionMetadata.User.ID)
	case m.Interaction != nil && m.Interaction.User != nil:
		return !may("discord:" + m.Interaction.User.ID)
	case m.WebhookID != "":
		return true
	case m.Author.Bot:
		return false
	}
	return !may("discord:" + m.Author.ID)
}

// earlierOf maps one message; false for the bot's own, for system messages
// and for those of people access.users refuses (refused).
func (a *Adapter) earlierOf(m *discordgo.Message) (adapters.Earlier, bool) {
	if m == nil || m.Author == nil || m.Author.ID == a.link.BotID() || !written(m) || a.refused(m) {
		return adapters.Earlier{}, false
	}
	e := adapters.Earlier{User: "discord:" + m.Author.ID, Name: cmp.Or(m.Author.GlobalName, m.Author.Username), Bot: m.Author.Bot,
		At: m.Timestamp}
	e.Text, _ = mention(m, a.link.BotID())
	for _, f := range filesOf(m.Attachments) {
		e.Files = append(e.Files, f.Name)
	}
	return e, true
}

// filesOf maps a message's attachments (I1-I4): name, type, size and a signed
// CDN URL (https://discord.com/developers/docs/resources/message#attachment-object,
// expiring: https://discord.com/developers/docs/reference#signed-attachment-cdn-urls).
func filesOf(ats []*discordgo.MessageAttachment) []adapters.File {
	var out []adapters.File
	for _, at := range ats {
		if at != nil {
			out = append(out, adapters.File{Name: at.Filename, MIME: at.ContentType, Size: int64(at.Size), Ref: at.URL})
		}
	}
	return out
}

// fileClient downloads attachments, 2 minutes at most each, following same-host
// redirects only (I3).
var fileClient = adapters.NewDownloadClient(2*time.Minute, nil)

// ReadFile implements adapters.FileReader.
func (a *Adapter) ReadFile(ctx context.Context, f adapters.File, max int64) ([]byte, error) {
	if !adapters.OnFileHost(f.Ref, a.cfg.APIURL, cdnHost) {
		return nil, errors.New("discord: the attachment is not on Discord's CDN; it is not downloaded")
	}
	b, _, err := adapters.Download(ctx, fileClient, f.Ref, nil, max) // the CDN takes no token: it goes to the API only
	return b, err
}

// cdnHost: Discord's CDN is cdn.discordapp.com and media.discordapp.net.
func cdnHost(h string) bool { return h == "cdn.discordapp.com" || h == "media.discordapp.net" }
