package discord

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Thread settings (channels.discord.threads). Discord allows names of 1 to 100
// characters and archives a thread after 60, 1440, 4320 or 10080 idle minutes.
// https://discord.com/developers/docs/resources/channel#start-thread-from-message
const (
	maxThreadName     = 100
	threadArchiveMins = 1440
	threadFallback    = "detour"
)

// moveToThread starts a public thread from j's message, named from the question,
// and points j at it: the answer and the rest of the conversation go there (the
// thread's own session). When Discord refuses (missing Create Public Threads
// permission, say), the question is answered in the channel as without threads.
func (a *Adapter) moveToThread(ctx context.Context, j *job) {
	ch := j.channel()
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var th *discordgo.Channel
	err := a.link.Call(ctx, "start thread", "", func(opts ...discordgo.RequestOption) error {
		var err error
		th, err = a.rest.MessageThreadStartComplex(ch, j.message, &discordgo.ThreadStart{
			Name: threadName(j.in.Text), AutoArchiveDuration: threadArchiveMins,
		}, opts...)
		return err
	})
	id := ""
	switch {
	case err == nil && th != nil && th.ID != "":
		id = th.ID
	case restCode(err) == discordgo.ErrCodeThreadAlreadyCreatedForThisMessage:
		id = j.message // started before (a replay): a thread has its message's id
	default:
		a.log.Warn("discord thread not started; answering in the channel", "channel_id", ch, "err", err)
		return
	}
	a.threads.Put(id, ch)
	j.in.SessionKey = sessionKey(j.guild, id)
	j.in.ReplyTo = id // the question is the thread's starter: nothing to reference
	// T5: the thread is where the question was asked.
	j.in.Parent = sessionKey(j.guild, ch)
}

// threadName is the question's first line, its spaces collapsed, cut at a word
// to fit Discord's 100 characters.
func threadName(question string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(question), "\n")
	name := strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(name) > maxThreadName {
		r := []rune(name)[:maxThreadName-1]
		cut := string(r)
		if i := strings.LastIndexByte(cut, ' '); i > maxThreadName/2 {
			cut = cut[:i]
		}
		name = cut + "…"
	}
	if name == "" {
		return threadFallback
	}
	return name
}

// restCode is Discord's JSON error code of a REST error, 0 for none.
func restCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}
