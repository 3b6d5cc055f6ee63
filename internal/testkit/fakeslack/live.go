package fakeslack

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Live replies: the call log, the messages as Slack shows them now, the
// streaming methods, the assistant thread methods, tier limits and block_actions
// payloads. See the package doc ("Live replies") for the rules they hold a client to.

// Per-method limits of the Web API tiers, calls per minute per workspace
// (https://docs.slack.dev/apis/web-api/rate-limits/).
const (
	Tier2 = 20
	Tier3 = 50
	Tier4 = 100
)

// DefaultMethodLimits is the limit the fake applies per method unless
// Server.MethodLimits says otherwise. Methods not listed are not limited here
// (chat.postMessage has its own per-channel pace, see PostInterval).
var DefaultMethodLimits = map[string]int{
	"chat.startStream":                      Tier2, // https://docs.slack.dev/reference/methods/chat.startStream
	"chat.appendStream":                     Tier4, // https://docs.slack.dev/reference/methods/chat.appendStream
	"chat.stopStream":                       Tier2, // https://api.slack.com/methods/chat.stopStream
	"chat.update":                           Tier3, // https://docs.slack.dev/reference/methods/chat.update
	"chat.delete":                           Tier3, // https://docs.slack.dev/reference/methods/chat.delete
	"assistant.threads.setSuggestedPrompts": Tier4, // https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts
	"assistant.threads.setTitle":            Tier4, // assumed like setSuggestedPrompts
	"conversations.replies":                 Tier3, // https://docs.slack.dev/reference/methods/conversations.replies (internal apps)
	"views.publish":                         Tier4, // https://docs.slack.dev/reference/methods/views.publish
}

// Slack's documented sizes the fake checks.
const (
	// MaxMarkdownText is the markdown_text limit of the streaming methods.
	MaxMarkdownText = 12000
	// StatusTimeout is how long an assistant thread status shows without a reply.
	StatusTimeout = 2 * time.Minute
	// MaxSuggestedPrompts is how many prompts setSuggestedPrompts takes.
	MaxSuggestedPrompts = 4
)

// Call is one Web API call the fake answered, with its arguments.
type Call struct {
	Seq    int        // order of arrival, from 1
	Method string     // "chat.appendStream", "assistant.threads.setStatus", ...
	Args   url.Values // form arguments as sent, without the token
	At     time.Time  // the fake's clock
	Wall   time.Time  // real time (latency measurements)
	Error  string     // "" when answered ok, else the error code ("ratelimited", ...)
	// Answered is true once the answer was written: what the call changed is in
	// place.
	Answered bool
}

// Arg returns one argument of the call.
func (c Call) Arg(name string) string { return c.Args.Get(name) }

// Message is one message as Slack shows it now: its latest version.
type Message struct {
	Channel   string
	ThreadTS  string // "" for a top-level message
	TS        string
	Text      string
	Blocks    json.RawMessage // nil when none
	Ephemeral bool
	User      string // who sees an ephemeral message
	// Streamed is true for a message made by chat.startStream; Streaming while
	// it accepts chat.appendStream (until chat.stopStream).
	Streamed  bool
	Streaming bool
	// Versions holds every text the message showed, oldest first (text plus the
	// text of its blocks).
	Versions []string
	Deleted  bool

	streamed string // the Markdown streamed so far
	// derived: the message has no text of its own; Slack builds it from the
	// blocks ("do not include a top-level text field if the message has blocks,
	// and allow Slack attempt to build it for you by appending content from
	// supported blocks", https://docs.slack.dev/reference/methods/chat.postMessage).
	derived bool
}

// Shown is everything a reader sees in the message now: its text and the text
// in its blocks.
func (m Message) Shown() string {
	if m.derived {
		return blockText(m.Blocks)
	}
	bt := ""
	if len(m.Blocks) > 0 {
		bt = blockText(m.Blocks)
	}
	switch {
	case bt == "":
		return m.Text
	case m.Text == "":
		return bt
	}
	return m.Text + "\n" + bt
}

// blockText collects the "text" strings of a blocks payload.
func blockText(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				out = append(out, t)
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k])
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// streamBlocks is how the fake keeps a streamed message's content: a markdown
// block, so an update that does not replace the blocks leaves it showing.
func streamBlocks(md string) json.RawMessage {
	b, _ := json.Marshal([]map[string]any{{"type": "markdown", "text": md}})
	return b
}

func msgKey(channel, ts string) string { return channel + "/" + ts }

// logCallLocked records an incoming call and returns its index; s.mu must be held.
func (s *Server) logCallLocked(method string, form url.Values) int {
	args := url.Values{}
	for k, v := range form {
		if k != "token" {
			args[k] = append([]string(nil), v...)
		}
	}
	s.callLog = append(s.callLog, Call{Seq: len(s.callLog) + 1, Method: method, Args: args, At: s.Now(), Wall: time.Now()})
	s.notifyLocked()
	return len(s.callLog) - 1
}

// answered marks call i answered.
func (s *Server) answered(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= 0 && i < len(s.callLog) {
		s.callLog[i].Answered = true
		s.notifyLocked()
	}
}

// outcome records how call i was answered.
func (s *Server) outcome(i int, errCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomeLocked(i, errCode)
}

func (s *Server) outcomeLocked(i int, errCode string) {
	if i >= 0 && i < len(s.callLog) {
		s.callLog[i].Error = errCode
		s.notifyLocked()
	}
}

// fail answers {"ok":false,"error":code} and records it on call i.
func (s *Server) fail(w http.ResponseWriter, i int, code string) {
	s.outcome(i, code)
	writeJSON(w, map[string]any{"ok": false, "error": code})
}

// overTierLocked reports the Retry-After (seconds) when method is over its
// per-minute limit, or 0, and counts the call when it is not; s.mu must be held.
func (s *Server) overTierLocked(method string) int {
	limit, ok := s.MethodLimits[method]
	if !ok {
		limit = DefaultMethodLimits[method]
	}
	if limit <= 0 {
		return 0
	}
	now := s.Now()
	keep := s.tierCalls[method][:0]
	for _, t := range s.tierCalls[method] {
		if now.Sub(t) < time.Minute {
			keep = append(keep, t)
		}
	}
	s.tierCalls[method] = keep
	if len(keep) >= limit {
		wait := keep[0].Add(time.Minute).Sub(now)
		return max(1, int(math.Ceil(wait.Seconds())))
	}
	s.tierCalls[method] = append(keep, now)
	return 0
}

// CallLog returns every Web API call answered, in order.
func (s *Server) CallLog() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.callLog...)
}

// CallsOf returns the calls of method, in order.
func (s *Server) CallsOf(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.callLog {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCall waits for an answered call matching pred and returns the first
// match. pred runs under the server's lock: it must not call the Server.
func (s *Server) WaitCall(timeout time.Duration, pred func(Call) bool) (Call, error) {
	var found Call
	ok := s.waitFor(timeout, func() bool {
		for _, c := range s.callLog {
			if c.Answered && pred(c) {
				found = c
				return true
			}
		}
		return false
	})
	if !ok {
		return Call{}, fmt.Errorf("fakeslack: no matching call after %s (%d calls)", timeout, len(s.CallLog()))
	}
	return found, nil
}

// Messages returns the latest version of every message in channel's thread
// threadTS ("" = top level) that is neither deleted nor ephemeral, oldest
// first; a thread's root message is not part of it.
func (s *Server) Messages(channel, threadTS string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messagesLocked(channel, threadTS)
}

func (s *Server) messagesLocked(channel, threadTS string) []Message {
	var out []Message
	for _, k := range s.msgOrder {
		m := s.msgs[k]
		if m.Channel == channel && m.ThreadTS == threadTS && !m.Deleted && !m.Ephemeral {
			out = append(out, cloneMessage(m))
		}
	}
	return out
}

// WaitMessages waits until channel's thread threadTS holds at least n messages
// (not ephemeral, not deleted) and returns them.
func (s *Server) WaitMessages(channel, threadTS string, n int, timeout time.Duration) ([]Message, error) {
	if !s.waitFor(timeout, func() bool { return len(s.messagesLocked(channel, threadTS)) >= n }) {
		got := s.Messages(channel, threadTS)
		return got, fmt.Errorf("fakeslack: want %d messages in %s/%s, have %d after %s", n, channel, threadTS, len(got), timeout)
	}
	return s.Messages(channel, threadTS), nil
}

// AllMessages returns the latest version of every message, deleted ones
// included, oldest first.
func (s *Server) AllMessages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, 0, len(s.msgOrder))
	for _, k := range s.msgOrder {
		out = append(out, cloneMessage(s.msgs[k]))
	}
	return out
}

func cloneMessage(m *Message) Message {
	c := *m
	c.Versions = append([]string(nil), m.Versions...)
	return c
}

// Status returns the assistant thread status shown in channel/threadTS now: ""
// when none was set, a reply cleared it, or StatusTimeout passed on the fake's
// clock since it was set.
func (s *Server) Status(channel, threadTS string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.statuses[msgKey(channel, threadTS)]
	if !ok || s.Now().Sub(st.at) >= StatusTimeout {
		return ""
	}
	return st.text
}

type threadStatus struct {
	text string
	at   time.Time
}

// addMessageLocked stores a new message; s.mu must be held. A bot message in a
// thread clears the thread's status, as Slack does.
func (s *Server) addMessageLocked(m *Message) {
	m.Versions = append(m.Versions, m.Shown())
	k := msgKey(m.Channel, m.TS)
	s.msgs[k] = m
	s.msgOrder = append(s.msgOrder, k)
	if !m.Ephemeral {
		th := m.ThreadTS
		if th == "" {
			th = m.TS
		}
		delete(s.statuses, msgKey(m.Channel, th))
	}
}

// handleLive answers the methods of live replies; it reports false for any
// other method.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request, method, token string, i int) bool {
	switch method {
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
		s.handleStream(w, r, method, token, i)
	case "chat.delete":
		s.handleDelete(w, r, i)
	case "assistant.threads.setStatus", "assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle":
		s.handleAssistant(w, r, method, i)
	case "views.publish":
		s.handleViewsPublish(w, r, i) // home.go
	default:
		return false
	}
	return true
}

// handleStream answers chat.startStream, chat.appendStream and chat.stopStream.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, method, token string, i int) {
	if s.RefuseStreaming != "" {
		s.fail(w, i, s.RefuseStreaming)
		return
	}
	channel, md := r.Form.Get("channel"), r.Form.Get("markdown_text")
	if channel == "" {
		s.fail(w, i, "channel_not_found")
		return
	}
	if utf8.RuneCountInString(md) > MaxMarkdownText {
		s.fail(w, i, "msg_too_long")
		return
	}
	s.mu.Lock()
	var m *Message
	switch method {
	case "chat.startStream":
		thread := r.Form.Get("thread_ts")
		direct := strings.HasPrefix(channel, "D")
		switch {
		case thread == "":
			s.mu.Unlock()
			s.fail(w, i, "invalid_arguments") // streamed messages are always replies
			return
		case !direct && r.Form.Get("recipient_team_id") == "":
			s.mu.Unlock()
			s.fail(w, i, "missing_recipient_team_id")
			return
		case !direct && r.Form.Get("recipient_user_id") == "":
			s.mu.Unlock()
			s.fail(w, i, "missing_recipient_user_id")
			return
		}
		// The streamed Markdown shows as a markdown block; the message's text is
		// built from it until an update gives it one.
		m = &Message{Channel: channel, ThreadTS: thread, TS: s.tsLocked(), Streamed: true, Streaming: true,
			streamed: md, Text: md, derived: true}
		if md != "" {
			m.Blocks = streamBlocks(md)
		}
		s.addMessageLocked(m)
	default:
		m = s.msgs[msgKey(channel, r.Form.Get("ts"))]
		code := ""
		switch {
		case m == nil || m.Deleted:
			code = "message_not_found"
		case !m.Streaming:
			code = "message_not_in_streaming_state"
		case method == "chat.appendStream" && md == "":
			code = "no_text"
		}
		if code != "" {
			s.mu.Unlock()
			s.fail(w, i, code)
			return
		}
		if md != "" {
			m.streamed += md
			m.Blocks = streamBlocks(m.streamed)
			if m.derived {
				m.Text = m.streamed
			}
			m.Versions = append(m.Versions, m.Shown())
		}
		if method == "chat.stopStream" {
			m.Streaming = false
		}
	}
	p := Post{Method: method, Channel: channel, ThreadTS: m.ThreadTS, TS: m.TS, Text: md, Token: token, At: s.Now(),
		Mentions: LiveMentions(md, false)}
	s.posts = append(s.posts, p)
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": m.TS})
}

// updateLocked applies chat.update to a stored message; it returns an error
// code or "". s.mu must be held.
func (s *Server) updateLocked(p *Post, blocksSent bool) string {
	m := s.msgs[msgKey(p.Channel, p.TS)]
	switch {
	case m == nil || m.Deleted || m.Ephemeral:
		return "message_not_found"
	case m.Streaming:
		// The fake's assumption: a message still streaming is finished with
		// chat.stopStream before it is edited.
		return "cant_update_message"
	case p.Text == "" && !blocksSent:
		return "no_text"
	}
	m.Text, m.derived = p.Text, false
	if blocksSent {
		// chat.update keeps a message's blocks unless the call sends blocks
		// ("[]" removes them).
		m.Blocks = p.Blocks
		if string(p.Blocks) == "[]" {
			m.Blocks = nil
		}
	}
	m.Versions = append(m.Versions, m.Shown())
	p.ThreadTS = m.ThreadTS
	return ""
}

// handleDelete answers chat.delete.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, i int) {
	s.mu.Lock()
	m := s.msgs[msgKey(r.Form.Get("channel"), r.Form.Get("ts"))]
	if m == nil || m.Deleted || m.Ephemeral {
		s.mu.Unlock()
		s.fail(w, i, "message_not_found")
		return
	}
	m.Deleted, m.Streaming = true, false
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS})
}

// handleAssistant answers the assistant.threads methods.
func (s *Server) handleAssistant(w http.ResponseWriter, r *http.Request, method string, i int) {
	channel, thread := r.Form.Get("channel_id"), r.Form.Get("thread_ts")
	if channel == "" {
		s.fail(w, i, "channel_not_found")
		return
	}
	switch method {
	case "assistant.threads.setStatus":
		if thread == "" {
			s.fail(w, i, "invalid_thread_ts")
			return
		}
		if _, ok := r.Form["status"]; !ok {
			s.fail(w, i, "invalid_arguments")
			return
		}
		s.mu.Lock()
		if st := r.Form.Get("status"); st == "" {
			delete(s.statuses, msgKey(channel, thread))
		} else {
			s.statuses[msgKey(channel, thread)] = threadStatus{text: st, at: s.Now()}
		}
		s.notifyLocked()
		s.mu.Unlock()
	case "assistant.threads.setSuggestedPrompts":
		var prompts []struct {
			Title   string `json:"title"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(r.Form.Get("prompts")), &prompts); err != nil || len(prompts) == 0 || len(prompts) > MaxSuggestedPrompts {
			s.fail(w, i, "invalid_arguments")
			return
		}
		for _, p := range prompts {
			if p.Title == "" || p.Message == "" {
				s.fail(w, i, "invalid_arguments")
				return
			}
		}
	case "assistant.threads.setTitle":
		if thread == "" {
			s.fail(w, i, "invalid_thread_ts")
			return
		}
		if r.Form.Get("title") == "" {
			s.fail(w, i, "invalid_arguments")
			return
		}
	}
	writeJSON(w, map[string]any{"ok": true})
}

// Slack's sizes for a static select (https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element/,
// https://docs.slack.dev/reference/block-kit/composition-objects/option-object/).
const (
	maxSelectOptions = 100
	maxOptionText    = 75
	maxOptionValue   = 150
	maxBlockID       = 255
	maxSectionText   = 3000
)

// checkBlocks reports why Slack would refuse blocks (invalid_blocks), or "".
func checkBlocks(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var blocks []map[string]any
	if json.Unmarshal(raw, &blocks) != nil {
		return "invalid_blocks_format"
	}
	for _, b := range blocks {
		if id, _ := b["block_id"].(string); utf8.RuneCountInString(id) > maxBlockID {
			return "invalid_blocks"
		}
		if t, ok := b["text"].(map[string]any); ok {
			if s, _ := t["text"].(string); utf8.RuneCountInString(s) > maxSectionText {
				return "invalid_blocks"
			}
		}
		els, _ := b["elements"].([]any)
		if acc, ok := b["accessory"].(map[string]any); ok {
			els = append(els, acc)
		}
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["type"] != "static_select" {
				continue
			}
			opts, _ := el["options"].([]any)
			if len(opts) == 0 || len(opts) > maxSelectOptions {
				return "invalid_blocks"
			}
			for _, o := range opts {
				op, _ := o.(map[string]any)
				txt, _ := op["text"].(map[string]any)
				label, _ := txt["text"].(string)
				value, _ := op["value"].(string)
				if label == "" || utf8.RuneCountInString(label) > maxOptionText || utf8.RuneCountInString(value) > maxOptionValue {
					return "invalid_blocks"
				}
			}
		}
	}
	return ""
}

// selectOf finds the static select of a blocks payload offering value.
func selectOf(raw json.RawMessage, value string) (blockID, actionID, label string, ok bool) {
	var blocks []map[string]any
	if json.Unmarshal(raw, &blocks) != nil {
		return "", "", "", false
	}
	for _, b := range blocks {
		bid, _ := b["block_id"].(string)
		els, _ := b["elements"].([]any)
		if acc, ok := b["accessory"].(map[string]any); ok {
			els = append(els, acc)
		}
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["type"] != "static_select" {
				continue
			}
			aid, _ := el["action_id"].(string)
			opts, _ := el["options"].([]any)
			for _, o := range opts {
				op, _ := o.(map[string]any)
				if v, _ := op["value"].(string); v == value {
					txt, _ := op["text"].(map[string]any)
					l, _ := txt["text"].(string)
					return bid, aid, l, true
				}
			}
		}
	}
	return "", "", "", false
}

// Pick sends the block_actions payload of user choosing value in the static
// select of post p, as Slack does over Socket Mode (an "interactive" envelope).
// It fails when p offers no such option, or when p is an ephemeral message shown
// to someone else. Interactive envelopes are not retried: Slack shows the user
// an error when the ack does not come within 3 seconds.
func (s *Server) Pick(p Post, user, value string) (Sent, error) {
	blockID, actionID, label, ok := selectOf(p.Blocks, value)
	if !ok {
		return Sent{}, fmt.Errorf("fakeslack: post %s offers no option %q", p.TS, value)
	}
	if p.Ephemeral && p.User != user {
		return Sent{}, errors.New("fakeslack: only " + p.User + " sees that ephemeral message")
	}
	s.mu.Lock()
	n := s.nextLocked()
	envID := fmt.Sprintf("env-%06d", n)
	trigger := fmt.Sprintf("trig-%06d", n)
	actionTS := s.tsLocked()
	s.mu.Unlock()
	respURL := fmt.Sprintf("%s/resp/%d", s.srv.URL, n)
	name := "general"
	if strings.HasPrefix(p.Channel, "D") {
		name = "directmessage"
	}
	container := map[string]any{"type": "message", "message_ts": p.TS, "channel_id": p.Channel, "is_ephemeral": p.Ephemeral}
	if p.ThreadTS != "" {
		container["thread_ts"] = p.ThreadTS
	}
	payload := map[string]any{
		"type": "block_actions", "token": "verif", "api_app_id": s.AppID, "trigger_id": trigger,
		"response_url": respURL,
		"team":         map[string]any{"id": s.TeamID, "domain": "fake"},
		"user":         map[string]any{"id": user, "username": "user", "name": "user", "team_id": s.TeamID},
		"channel":      map[string]any{"id": p.Channel, "name": name},
		"container":    container,
		"actions": []any{map[string]any{
			"type": "static_select", "action_id": actionID, "block_id": blockID, "action_ts": actionTS,
			"selected_option": map[string]any{"text": map[string]any{"type": "plain_text", "text": label}, "value": value},
		}},
		"state": map[string]any{"values": map[string]any{}},
	}
	if !p.Ephemeral {
		payload["message"] = map[string]any{"type": "message", "ts": p.TS, "text": p.Text, "thread_ts": p.ThreadTS}
	}
	b, _ := json.Marshal(map[string]any{"envelope_id": envID, "type": "interactive", "accepts_response_payload": false,
		"payload": payload})
	sent := Sent{EnvelopeID: envID, TriggerID: trigger, ResponseURL: respURL}
	if !s.deliver(b) {
		sent.Dropped = true
		s.mu.Lock()
		s.dropped = append(s.dropped, sent)
		s.mu.Unlock()
	}
	return sent, nil
}

// AssistantThreadStarted sends assistant_thread_started: user opened a new
// thread with the app in Slack's AI app container (the app's DM channel,
// thread threadTS; "" = a new ts).
func (s *Server) AssistantThreadStarted(channel, user, threadTS string) Sent {
	if threadTS == "" {
		threadTS = s.NewTS()
	}
	sent := s.PushEvent(map[string]any{
		"type": "assistant_thread_started", "event_ts": s.NewTS(),
		"assistant_thread": map[string]any{
			"user_id": user, "channel_id": channel, "thread_ts": threadTS,
			"context": map[string]any{"channel_id": "", "team_id": s.TeamID, "enterprise_id": ""},
		},
	})
	sent.TS = threadTS
	return sent
}

// AssistantMessage sends what a person types in an assistant thread: a
// message.im event in the app's DM channel, in thread threadTS.
func (s *Server) AssistantMessage(channel, user, text, threadTS string) Sent {
	ts := s.NewTS()
	return s.PushEvent(map[string]any{
		"type": "message", "channel_type": "im", "user": user, "channel": channel,
		"ts": ts, "event_ts": ts, "text": text, "thread_ts": threadTS,
	})
}
