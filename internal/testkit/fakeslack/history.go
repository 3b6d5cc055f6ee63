package fakeslack

// Threads as conversations.replies reads them
// (https://docs.slack.dev/reference/methods/conversations.replies).
//
//   - Every message the fake delivers as an event (Mention, ChannelMessage,
//     ThreadMessage, MentionFiles, ...) and every message the bot posts is
//     kept, so a thread read back holds what people and the bot wrote.
//   - channel and ts are required, and ts must be an existing message
//     (thread_not_found otherwise, channel_not_found without a channel).
//   - The thread comes oldest first, its parent message first. The parent
//     heads every page (the quirk clients see: it is not counted as new).
//   - latest and oldest bound the replies (exclusive unless inclusive=1); a
//     timestamp that is not one is invalid_ts_latest / invalid_ts_oldest.
//   - limit defaults to 1000 and is capped at 1000 ("internal customer-built
//     applications"); "fewer than the requested number of items may be
//     returned, even if the end of the list hasn't been reached": a page holds
//     at most RepliesPageSize replies, so a client must follow
//     response_metadata.next_cursor while has_more is true; a cursor the fake
//     did not issue is invalid_cursor.
//   - The method is Tier 3 (DefaultMethodLimits), and needs the history scope
//     of the conversation's type: channels:history (C…), groups:history (G…),
//     im:history (D…), mpim:history (a group DM); an app whose Scopes lack it
//     gets missing_scope with the needed scope named (rules.go's refuse).

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// said is one message as the thread keeps it.
type said struct {
	Channel, ThreadTS, TS string
	User, BotID           string
	Text                  string
	Files                 []map[string]any
}

// tsPattern is a Slack timestamp: seconds, a dot, six digits.
var tsPattern = regexp.MustCompile(`^\d{10}\.\d{6}$`)

// historyScope is the scope reading channel's history needs.
func historyScope(channel string, groupDM bool) string {
	switch {
	case groupDM || strings.HasPrefix(channel, "M"):
		return "mpim:history"
	case strings.HasPrefix(channel, "G"):
		return "groups:history"
	case strings.HasPrefix(channel, "D"):
		return "im:history"
	}
	return "channels:history"
}

// rememberLocked keeps a delivered message event for conversations.replies;
// s.mu must be held.
func (s *Server) rememberLocked(ev map[string]any) {
	typ, _ := ev["type"].(string)
	if typ != "message" && typ != "app_mention" {
		return
	}
	m := said{}
	m.Channel, _ = ev["channel"].(string)
	m.TS, _ = ev["ts"].(string)
	m.ThreadTS, _ = ev["thread_ts"].(string)
	m.User, _ = ev["user"].(string)
	m.BotID, _ = ev["bot_id"].(string)
	m.Text, _ = ev["text"].(string)
	if fs, ok := ev["files"].([]map[string]any); ok {
		m.Files = fs
	}
	if m.Channel == "" || m.TS == "" || m.BotID != "" {
		return // the bot's own echoes are kept from its posts
	}
	if s.saidByKey == nil {
		s.saidByKey = map[string]*said{}
	}
	if _, ok := s.saidByKey[msgKey(m.Channel, m.TS)]; ok {
		return // an app_mention and its message twin are one message
	}
	s.saidByKey[msgKey(m.Channel, m.TS)] = &m
}

// threadMessagesLocked returns channel's thread thread as Slack returns it: its
// messages, the people's and the bot's, oldest first; s.mu must be held.
func (s *Server) threadMessagesLocked(channel, thread string) []said {
	var out []said
	for _, m := range s.saidByKey {
		if m.Channel == channel && (m.TS == thread || m.ThreadTS == thread) {
			out = append(out, *m)
		}
	}
	for _, k := range s.msgOrder {
		m := s.msgs[k]
		if m.Channel != channel || m.Deleted || m.Ephemeral {
			continue
		}
		if m.TS == thread || m.ThreadTS == thread {
			out = append(out, said{Channel: m.Channel, ThreadTS: m.ThreadTS, TS: m.TS, User: s.BotUserID, BotID: s.BotID, Text: m.Shown()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TS < out[j].TS })
	return out
}

// defaultRepliesPage is a page's most replies without RepliesPageSize:
// Slack's maximum limit.
const defaultRepliesPage = 1000

func (s *Server) handleReplies(w http.ResponseWriter, r *http.Request, ci int) {
	f := r.Form
	channel, ts := f.Get("channel"), f.Get("ts")
	if channel == "" {
		s.fail(w, ci, "channel_not_found")
		return
	}
	latest, oldest := f.Get("latest"), f.Get("oldest")
	if latest != "" && !tsPattern.MatchString(latest) {
		s.fail(w, ci, "invalid_ts_latest")
		return
	}
	if oldest != "" && !tsPattern.MatchString(oldest) {
		s.fail(w, ci, "invalid_ts_oldest")
		return
	}
	inclusive := f.Get("inclusive") == "1" || f.Get("inclusive") == "true"
	limit := 1000
	if l := f.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.fail(w, ci, "invalid_limit")
			return
		}
		limit = min(n, 1000)
	}
	after := ""
	if c := f.Get("cursor"); c != "" {
		b, err := base64.StdEncoding.DecodeString(c)
		if err != nil || !strings.HasPrefix(string(b), "after:") {
			s.fail(w, ci, "invalid_cursor")
			return
		}
		after = strings.TrimPrefix(string(b), "after:")
	}
	s.mu.Lock()
	all := s.threadMessagesLocked(channel, ts)
	page := s.RepliesPageSize
	s.mu.Unlock()
	if ts == "" || len(all) == 0 || all[0].TS != ts {
		s.fail(w, ci, "thread_not_found")
		return
	}
	if page <= 0 {
		page = defaultRepliesPage
	}
	page = min(page, limit)
	in := func(m said) bool {
		switch {
		case latest != "" && (m.TS > latest || (!inclusive && m.TS == latest)):
			return false
		case oldest != "" && (m.TS < oldest || (!inclusive && m.TS == oldest)):
			return false
		}
		return m.TS > after
	}
	msgs := []map[string]any{messageJSON(all[0])}
	var last string
	more := false
	for _, m := range all[1:] {
		if !in(m) {
			continue
		}
		if len(msgs)-1 == page {
			more = true
			break
		}
		msgs = append(msgs, messageJSON(m))
		last = m.TS
	}
	out := map[string]any{"ok": true, "messages": msgs, "has_more": more}
	if more {
		out["response_metadata"] = map[string]any{"next_cursor": base64.StdEncoding.EncodeToString([]byte("after:" + last))}
	}
	writeJSON(w, out)
}

func messageJSON(m said) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
	}
	if len(m.Files) > 0 {
		out["files"] = m.Files
	}
	return out
}

// ThreadOf returns what conversations.replies holds of channel's thread thread
// (the people's messages and the bot's posts), oldest first.
func (s *Server) ThreadOf(channel, thread string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.threadMessagesLocked(channel, thread) {
		out = append(out, m.Text)
	}
	return out
}
