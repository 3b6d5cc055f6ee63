package sessions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
)

// Earlier messages (H1-H4): a conversation that began without the bot (a Slack
// thread it did not start, a Discord thread or reply chain) is read once, when
// the bot is first addressed in it, so the model knows what the people in it
// said. The lines are stored on the session (a restart does not read them
// again) and sent at the head of every prompt of the conversation.

// Bounds of the earlier messages beside thread_context.max_messages.
const (
	earlierTimeout  = 10 * time.Second
	maxEarlierRunes = 2000     // one message's text
	maxEarlierBytes = 48 << 10 // all of them
)

// readEarlier reads and stores the earlier messages of ts's conversation when
// this is the bot's first turn in it (H1, H3). A failure to read is logged and
// the turn goes on without them; they are not tried again.
func (t *turn) readEarlier(ctx context.Context) {
	r := t.r
	in, e := t.in, t.entry
	if in.Earlier == "" || e.ThreadRead || r.cfg.ThreadMessages <= 0 {
		return
	}
	if len(t.parts.hist) > 0 || e.PaidCalls > 0 {
		// The bot took part before (a session older than this rule, found
		// again after a restart): its history has what it needs.
		if err := r.st.patch(ctx, e.Key, map[string]any{"thread_read": true}); err != nil {
			r.log.Warn("store earlier messages", "session", e.Key, "err", err)
		}
		e.ThreadRead = true
		return
	}
	// earlier logs a failure to read; what was read is stored all the same.
	text, ok, _ := r.earlier(ctx, in, in.Earlier, r.cfg.window(t.sel.requested)/2, "earlier messages")
	if !ok {
		return
	}
	if err := r.st.patch(ctx, e.Key, map[string]any{"thread_context": text, "thread_read": true}); err != nil {
		r.log.Warn("store earlier messages", "session", e.Key, "err", err)
		return
	}
	e.ThreadContext, e.ThreadRead = text, true
}

// earlier reads the messages before from (a thread, or a message a reply
// chain ends in) through in's channel, within earlierTimeout, and renders
// them within maxTokens (H1, H2, H4); what names them in the log, where a
// failure to read is logged (the turn goes on without them). ok is false when
// the channel cannot read them.
func (r *Router) earlier(ctx context.Context, in adapters.Inbound, from string, maxTokens int, what string) (text string, ok bool, err error) {
	hr, ok := r.adapter(in.Channel).(adapters.HistoryReader)
	if !ok {
		return "", false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, earlierTimeout)
	msgs, err := hr.ReadEarlier(rctx, from, r.cfg.ThreadMessages)
	cancel()
	text, left := r.renderEarlier(msgs, maxTokens)
	if left > 0 {
		r.log.Info(what+" of people the bot does not serve were left out", "session", in.SessionKey, "count", left)
	}
	if err != nil {
		r.log.Warn(what+" not read; answering without them", "session", in.SessionKey, "err", err)
	}
	return text, true, err
}

// renderEarlier writes msgs as one line each, attributed to its speaker ("Ann
// (slack:U1): ..."), leaving out the messages of people access.users refuses
// (H4) and keeping the newest that fit maxTokens (0 = no token bound) and
// maxEarlierBytes (H2). left counts the refused people's messages.
func (r *Router) renderEarlier(msgs []adapters.Earlier, maxTokens int) (text string, left int) {
	lines := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if !m.Bot && !r.mayTalk(m.User) {
			left++
			continue
		}
		body := strings.TrimSpace(m.Text)
		if len(m.Files) > 0 {
			body = strings.TrimSpace(body + " [files: " + strings.Join(m.Files, ", ") + "]")
		}
		if body == "" {
			continue
		}
		if rs := []rune(body); len(rs) > maxEarlierRunes {
			body = string(rs[:maxEarlierRunes-1]) + "…"
		}
		who := m.User
		if m.Bot {
			who = "bot " + who
		}
		if name := strings.Join(strings.Fields(m.Name), " "); name != "" {
			who = name + " (" + who + ")"
		}
		lines = append(lines, fmt.Sprintf("- %s: %s", who, strings.ReplaceAll(body, "\n", "\n  ")))
	}
	// The newest lines are the closest to the question: keep those.
	tokens, bytes, start := 0, 0, len(lines)
	for start > 0 {
		l := lines[start-1]
		t := EstimateTokens(l) + 1
		if (maxTokens > 0 && tokens+t > maxTokens) || bytes+len(l)+1 > maxEarlierBytes {
			break
		}
		tokens, bytes, start = tokens+t, bytes+len(l)+1, start-1
	}
	return strings.Join(lines[start:], "\n"), left
}

// mayTalk reports whether access.users lets user talk to the bot (T5), so
// their earlier messages may go to a model (H4).
func (r *Router) mayTalk(user string) bool {
	a := r.cfg.Access
	return len(a.Users) == 0 || slices.Contains(a.Users, user) || r.cfg.isConfiguredAdmin(user)
}

// readRepliedTo puts the chain of messages in answers (a Discord reply chain)
// into m, for this message only: it is stored with it, so a restart does not
// read it again (H1-H4).
func (r *Router) readRepliedTo(ctx context.Context, in adapters.Inbound, m *message) {
	if in.RepliesTo == "" || r.cfg.ThreadMessages <= 0 {
		return
	}
	text, ok, err := r.earlier(ctx, in, in.RepliesTo, r.cfg.window(r.cfg.Primary)/2, "replied-to messages")
	if !ok || err != nil || text == "" {
		return
	}
	m.text = repliedIntro + text + "\n\n" + m.text
}

// repliedIntro introduces the messages a message answers.
const repliedIntro = "(This message replies to these earlier messages of the channel, oldest first:)\n"
