package discord

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
)

// defaultEditEvery is the least time between two edits of a growing reply: at
// most one per second, inside the five per five seconds Discord's message
// buckets usually hold; the transport still honours the bucket Discord reports.
const defaultEditEvery = time.Second

// StartStream prepares a reply that grows as the model writes it (L2): the first
// text is posted as a reply to the asking message, later text edits it at most
// once per EditEvery (the newest text wins; what came between is never sent), and
// past 2,000 characters the text continues in further messages. A text that does
// not extend what is shown replaces it in place (L3): messages are edited, and
// continuation messages no longer needed are deleted, so no earlier text is left
// in the latest version of any message. Answers to application commands are not
// streamed (they are answered as today).
func (a *Adapter) StartStream(_ context.Context, in adapters.Inbound) (adapters.Stream, error) {
	if strings.HasPrefix(in.ReplyTo, interactionPrefix) {
		return nil, errors.New("discord: answers to application commands are not streamed")
	}
	ch, ref := target(in.ReplyTo, in.SessionKey)
	if ch == "" {
		return nil, errors.New("discord: stream without a channel")
	}
	s := &stream{a: a, ch: ch, ref: ref, every: a.cfg.EditEvery, kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.abandon, s.cancel = context.WithCancel(context.Background())
	if !a.goOwned(s.loop) {
		s.cancel()
		return nil, errors.New("discord: not running")
	}
	return s, nil
}

// stream is one growing reply. Its loop goroutine (owned by Run) shows the newest
// text; Finish stops the loop and then shows the final message itself.
type stream struct {
	a     *Adapter
	ch    string // channel or thread
	ref   string // the asking message, referenced by the first part ("" = none)
	every time.Duration

	abandon context.Context // done once Finish is called
	cancel  context.CancelFunc
	kick    chan struct{} // the text changed
	done    chan struct{} // the loop has ended

	mu   sync.Mutex
	want string // the newest text
	err  error  // the loop failed: Update reports it and the router stops updating

	// parts is what is shown, one message per chunk, in order: the loop's until
	// done is closed, then Finish's.
	parts []part
}

type part struct{ id, text string }

// Update shows text as the reply so far, without waiting: the loop picks it up.
func (s *stream) Update(_ context.Context, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.want = text
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

func (s *stream) newest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// loop shows the newest text, at most once per s.every, until Finish or Run ends.
// Its waits for rate limits end when Finish is called (its requests already sent
// do not: Finish waits for them, so it knows every message posted).
func (s *stream) loop(ctx context.Context) {
	defer close(s.done)
	ctx = withWaitPolicy(ctx, waitPolicy{abandon: s.abandon})
	var last time.Time
	for {
		select {
		case <-s.kick:
		case <-s.abandon.Done():
			return
		case <-ctx.Done():
			return
		}
		if wait := s.every - time.Since(last); !last.IsZero() && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.abandon.Done():
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		last = time.Now()
		chunks := adapters.Split(s.newest(), MaxMessageLen, textLen)
		if len(chunks) == 0 {
			continue // nothing to show yet; never take down what is shown for blank text
		}
		if err := s.show(ctx, chunks); err != nil {
			if s.abandon.Err() == nil && ctx.Err() == nil {
				s.a.log.Warn("discord streamed reply not updated; the final answer replaces it", "channel_id", s.ch, "err", err)
				s.fail(err)
			}
			return
		}
	}
}

// show makes the messages shown hold chunks: it edits the parts that differ,
// deletes surplus parts, then posts the missing ones (the first referencing the
// asking message).
func (s *stream) show(ctx context.Context, chunks []string) error {
	for i := range min(len(chunks), len(s.parts)) {
		if s.parts[i].text == chunks[i] {
			continue
		}
		err := s.a.editMessage(ctx, s.ch, s.parts[i].id, chunks[i], nil)
		if isUnknownMessage(err) {
			// Deleted by someone meanwhile: show this part anew.
			s.a.log.Warn("discord streamed message was deleted; posting its part again", "channel_id", s.ch, "message_id", s.parts[i].id)
			var m *discordgo.Message
			if m, err = s.a.postOne(ctx, s.ch, "", chunks[i], 0, nil); err == nil {
				s.parts[i].id = m.ID
			}
		}
		if err != nil {
			return err
		}
		s.parts[i].text = chunks[i]
	}
	for len(s.parts) > len(chunks) {
		p := s.parts[len(s.parts)-1]
		if err := s.a.deleteMessage(ctx, s.ch, p.id); err != nil {
			return err
		}
		s.parts = s.parts[:len(s.parts)-1]
	}
	for i := len(s.parts); i < len(chunks); i++ {
		ref := ""
		if i == 0 {
			ref = s.ref
		}
		m, err := s.a.postOne(ctx, s.ch, ref, chunks[i], 0, nil)
		if err != nil {
			return err
		}
		s.parts = append(s.parts, part{id: m.ID, text: chunks[i]})
		if i == 0 {
			// The post cleared "is typing…"; renewed now, it would outlive the
			// answer, since edits do not clear it.
			s.a.stopTyping(s.ch, nil)
		}
	}
	return nil
}

// Finish replaces what was shown with final (the answer or the error, split as
// needed; a picker goes on its last part); with nothing shown yet it posts final
// as Send would. When it cannot, it takes down what was shown, so the router's
// whole post that follows is the only version.
func (s *stream) Finish(ctx context.Context, final adapters.Outbound) error {
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	text := final.Text
	if strings.TrimSpace(text) == "" {
		text = "(empty message)"
	}
	chunks := adapters.Split(text, MaxMessageLen, textLen)
	picker := pickerComponents(final.Choices, s.a.log)
	if len(s.parts) == 0 {
		return s.a.postChannel(ctx, s.ch, s.ref, chunks, 0, picker)
	}
	err := s.show(ctx, chunks)
	if err == nil && picker != nil {
		last := s.parts[len(s.parts)-1]
		err = s.a.editMessage(ctx, s.ch, last.id, last.text, &picker)
	}
	if err != nil {
		for len(s.parts) > 0 {
			p := s.parts[len(s.parts)-1]
			if derr := s.a.deleteMessage(ctx, s.ch, p.id); derr != nil {
				s.a.log.Warn("discord streamed message could not be taken down", "channel_id", s.ch, "message_id", p.id, "err", derr)
			}
			s.parts = s.parts[:len(s.parts)-1]
		}
		return err
	}
	return nil
}

// editMessage replaces a message's content (and its components, when given).
func (a *Adapter) editMessage(ctx context.Context, ch, id, content string, components *[]discordgo.MessageComponent) error {
	e := &discordgo.MessageEdit{ID: id, Channel: ch, Content: &content, Components: components, AllowedMentions: noMentions()}
	return a.call(ctx, "edit message", "", func(opts ...discordgo.RequestOption) error {
		_, err := a.rest.ChannelMessageEditComplex(e, opts...)
		return err
	})
}

// deleteMessage deletes one of the bot's messages; one already gone is no error.
func (a *Adapter) deleteMessage(ctx context.Context, ch, id string) error {
	err := a.call(ctx, "delete message", "", func(opts ...discordgo.RequestOption) error {
		return a.rest.ChannelMessageDelete(ch, id, opts...)
	})
	if isUnknownMessage(err) {
		return nil
	}
	return err
}

// isUnknownMessage reports Discord's 404 "Unknown Message" (code 10008).
func isUnknownMessage(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusNotFound &&
		re.Message != nil && re.Message.Code == discordgo.ErrCodeUnknownMessage
}
