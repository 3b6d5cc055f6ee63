// Package fakeslack is a local fake of the parts of Slack that detour uses: the Web API
// methods (auth.test, apps.connections.open, chat.postMessage, chat.postEphemeral,
// conversations.info, response_url targets) and the Socket Mode WebSocket (hello, ping
// frames, events_api and slash_commands envelopes, acks, disconnects). It lets the real
// slack-go client run end to end on 127.0.0.1.
//
// Usage:
//
//	srv := fakeslack.New()
//	srv.Start()
//	defer srv.Close()
//	api := slack.New("xoxb-…", slack.OptionAPIURL(srv.URL()), slack.OptionAppLevelToken("xapp-…"))
//
// Every post is recorded (Posts, WaitPost); every ack too (Acks, WaitAck). Faults are
// injected with RateLimitNext, FailNext, Disconnect and Redeliver.
package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Default identities the fake reports from auth.test.
const (
	DefaultTeamID    = "T1"
	DefaultBotUserID = "UBOT"
	DefaultBotID     = "BBOT"
	DefaultAppID     = "A1"
)

// Post is one message the bot posted (chat.postMessage, chat.postEphemeral, chat.update
// or a response_url call).
type Post struct {
	Method    string          // "chat.postMessage", "chat.postEphemeral", "chat.update", "response_url"
	Channel   string          // channel id ("" for response_url)
	ThreadTS  string          // thread_ts sent with the post
	TS        string          // ts the fake assigned (or the updated ts)
	Text      string          // text / fallback text
	Blocks    json.RawMessage // blocks JSON as sent (nil when none)
	Ephemeral bool            // chat.postEphemeral, or response_url with response_type ephemeral
	User      string          // user of an ephemeral post
	Token     string          // the token the call carried (for auth checks in tests)
}

// Ack is one Socket Mode acknowledgement read from the client.
type Ack struct {
	EnvelopeID string
	Payload    json.RawMessage
}

// Sent describes an envelope the fake pushed.
type Sent struct {
	EnvelopeID  string
	EventID     string // events_api only
	TS          string // ts of the message (events_api only)
	TriggerID   string // slash commands only
	ResponseURL string // slash commands only
}

// Server is the fake. Configure the exported fields before Start.
type Server struct {
	TeamID    string
	BotUserID string
	BotID     string
	AppID     string
	// AppToken and BotToken, when set, are the only tokens accepted.
	AppToken string
	BotToken string
	// PingInterval is how often the fake sends WebSocket PING frames (default 50 ms);
	// keep it below the client's socketmode ping interval.
	PingInterval time.Duration
	// EchoPosts makes every chat.postMessage come back over the socket as a message
	// event from the bot, as real Slack does.
	EchoPosts bool

	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every recorded change
	posts      []Post
	acks       []Ack
	opens      int // apps.connections.open calls answered ok
	connects   int // WebSocket upgrades
	calls      map[string]int
	conn       *wsConn
	pending    [][]byte // envelopes waiting for a connection
	byEvent    map[string]map[string]any
	rateLimit  map[string][]int
	failNext   map[string][]string
	seq        int
	closed     bool
	connWG     sync.WaitGroup
	connCtx    context.Context
	connCancel context.CancelFunc
}

type wsConn struct {
	c   *websocket.Conn
	wmu sync.Mutex
}

func (w *wsConn) write(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return w.c.WriteMessage(websocket.TextMessage, b)
}

// New returns an unstarted fake with the default identities.
func New() *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		TeamID:       DefaultTeamID,
		BotUserID:    DefaultBotUserID,
		BotID:        DefaultBotID,
		AppID:        DefaultAppID,
		PingInterval: 50 * time.Millisecond,
		changed:      make(chan struct{}),
		calls:        map[string]int{},
		byEvent:      map[string]map[string]any{},
		rateLimit:    map[string][]int{},
		failNext:     map[string][]string{},
		connCtx:      ctx,
		connCancel:   cancel,
	}
}

// Start listens on 127.0.0.1 and serves.
func (s *Server) Start() {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/link/", s.handleSocket)
	mux.HandleFunc("/resp/", s.handleResponseURL)
	s.srv = httptest.NewServer(mux)
}

// URL is the Web API base for slack.OptionAPIURL: "http://127.0.0.1:P/api/".
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close drops the socket and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	s.connCancel()
	if c != nil {
		_ = c.c.Close()
	}
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
	s.connWG.Wait()
}

// notifyLocked wakes every waiter; s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) nextLocked() int {
	s.seq++
	return s.seq
}

// NewTS returns a fresh unique, sortable Slack timestamp.
func (s *Server) NewTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tsLocked()
}

func (s *Server) tsLocked() string {
	return fmt.Sprintf("1700000000.%06d", s.nextLocked())
}

// RateLimitNext makes the next call of method answer HTTP 429 with Retry-After.
func (s *Server) RateLimitNext(method string, retryAfterSeconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit[method] = append(s.rateLimit[method], retryAfterSeconds)
}

// FailNext makes the next call of method answer {"ok":false,"error":errCode}.
func (s *Server) FailNext(method, errCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[method] = append(s.failNext[method], errCode)
}

// Calls reports how many times method was called (including rate-limited and failed calls).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Posts returns a copy of every recorded post, in order.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// Acks returns a copy of every ack read from the client, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// Opens is how many times apps.connections.open answered ok.
func (s *Server) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Connects is how many Socket Mode WebSockets were accepted.
func (s *Server) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// waitFor polls cond (under the lock) whenever the state changes, until it holds or
// the timeout passes.
func (s *Server) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.mu.Lock()
			ok = cond()
			s.mu.Unlock()
			return ok
		}
	}
}

// WaitPosts waits until at least n posts were recorded and returns them all.
func (s *Server) WaitPosts(n int, timeout time.Duration) ([]Post, error) {
	if !s.waitFor(timeout, func() bool { return len(s.posts) >= n }) {
		got := s.Posts()
		return got, fmt.Errorf("fakeslack: want %d posts, have %d after %s", n, len(got), timeout)
	}
	return s.Posts(), nil
}

// Thread returns the posts made in channel with thread_ts threadTS ("" = top level).
func (s *Server) Thread(channel, threadTS string) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threadLocked(channel, threadTS)
}

func (s *Server) threadLocked(channel, threadTS string) []Post {
	var out []Post
	for _, p := range s.posts {
		if p.Channel == channel && p.ThreadTS == threadTS {
			out = append(out, p)
		}
	}
	return out
}

// WaitThread waits until channel/threadTS holds at least n posts and returns them.
func (s *Server) WaitThread(channel, threadTS string, n int, timeout time.Duration) ([]Post, error) {
	if !s.waitFor(timeout, func() bool { return len(s.threadLocked(channel, threadTS)) >= n }) {
		got := s.Thread(channel, threadTS)
		return got, fmt.Errorf("fakeslack: want %d posts in %s/%s, have %d after %s", n, channel, threadTS, len(got), timeout)
	}
	return s.Thread(channel, threadTS), nil
}

// WaitPost waits for a post matching pred (pred nil = any) and returns the first match.
// pred runs under the server's lock: it must not call the Server.
func (s *Server) WaitPost(timeout time.Duration, pred func(Post) bool) (Post, error) {
	var found Post
	ok := s.waitFor(timeout, func() bool {
		for _, p := range s.posts {
			if pred == nil || pred(p) {
				found = p
				return true
			}
		}
		return false
	})
	if !ok {
		return Post{}, fmt.Errorf("fakeslack: no matching post after %s (have %d posts)", timeout, len(s.Posts()))
	}
	return found, nil
}

// WaitAck waits until the envelope was acknowledged.
func (s *Server) WaitAck(envelopeID string, timeout time.Duration) (Ack, error) {
	var found Ack
	ok := s.waitFor(timeout, func() bool {
		for _, a := range s.acks {
			if a.EnvelopeID == envelopeID {
				found = a
				return true
			}
		}
		return false
	})
	if !ok {
		return Ack{}, fmt.Errorf("fakeslack: envelope %s not acked after %s", envelopeID, timeout)
	}
	return found, nil
}

// WaitConnected waits until at least n WebSockets were accepted and one is open.
func (s *Server) WaitConnected(n int, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.connects >= n && s.conn != nil }) {
		return fmt.Errorf("fakeslack: want %d connections, have %d after %s", n, s.Connects(), timeout)
	}
	return nil
}

// Disconnect drops the current WebSocket without a goodbye (a network failure);
// the client must call apps.connections.open again and redial.
func (s *Server) Disconnect() {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.notifyLocked()
	s.mu.Unlock()
	if c != nil {
		_ = c.c.Close()
	}
}

// RequestDisconnect sends Slack's {"type":"disconnect"} message (refresh_requested).
func (s *Server) RequestDisconnect() error {
	b, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": map[string]any{"host": "fakeslack"}})
	return s.push(b)
}

// push writes one frame to the current connection, or queues it until the next one.
func (s *Server) push(b []byte) error {
	s.mu.Lock()
	c := s.conn
	if c == nil {
		s.pending = append(s.pending, b)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if err := c.write(b); err != nil {
		s.mu.Lock()
		s.pending = append(s.pending, b)
		s.mu.Unlock()
		return nil
	}
	return nil
}

// PushEvent sends an events_api envelope carrying the given inner event; it fills
// event_id, team_id and envelope_id and returns them.
func (s *Server) PushEvent(event map[string]any) Sent {
	s.mu.Lock()
	n := s.nextLocked()
	eventID := fmt.Sprintf("Ev%06d", n)
	outer := map[string]any{
		"token": "verif", "team_id": s.TeamID, "api_app_id": s.AppID, "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000 + n, "event": event,
	}
	s.byEvent[eventID] = outer
	envID := fmt.Sprintf("env-%06d", s.nextLocked())
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{
		"envelope_id": envID, "type": "events_api", "accepts_response_payload": false,
		"retry_attempt": 0, "payload": outer,
	})
	_ = s.push(b)
	ts, _ := event["ts"].(string)
	return Sent{EnvelopeID: envID, EventID: eventID, TS: ts}
}

// Redeliver sends the event with eventID again in a new envelope with retry_attempt 1,
// as Slack does when it believes an ack was missed.
func (s *Server) Redeliver(eventID string) (Sent, error) {
	s.mu.Lock()
	outer, ok := s.byEvent[eventID]
	envID := fmt.Sprintf("env-%06d", s.nextLocked())
	s.mu.Unlock()
	if !ok {
		return Sent{}, errors.New("fakeslack: unknown event id " + eventID)
	}
	b, _ := json.Marshal(map[string]any{
		"envelope_id": envID, "type": "events_api", "accepts_response_payload": false,
		"retry_attempt": 1, "retry_reason": "timeout", "payload": outer,
	})
	_ = s.push(b)
	ev, _ := outer["event"].(map[string]any)
	ts, _ := ev["ts"].(string)
	return Sent{EnvelopeID: envID, EventID: eventID, TS: ts}, nil
}

// Mention sends an app_mention "<@BOT> text" from user in channel (threadTS "" = top level).
func (s *Server) Mention(channel, user, text, threadTS string) Sent {
	ev := map[string]any{
		"type": "app_mention", "user": user, "channel": channel, "ts": s.NewTS(),
		"text": "<@" + s.BotUserID + "> " + text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	ev["event_ts"] = ev["ts"]
	return s.PushEvent(ev)
}

// ChannelMessage sends a plain message event (message.channels) in channel; threadTS ""
// means top level. The text is sent as is.
func (s *Server) ChannelMessage(channel, user, text, threadTS string) Sent {
	ev := map[string]any{
		"type": "message", "channel_type": "channel", "user": user, "channel": channel,
		"ts": s.NewTS(), "text": text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	ev["event_ts"] = ev["ts"]
	return s.PushEvent(ev)
}

// ThreadMessage sends a message in a thread without any mention.
func (s *Server) ThreadMessage(channel, user, text, threadTS string) Sent {
	return s.ChannelMessage(channel, user, text, threadTS)
}

// DM sends a direct message (message.im) from user in the IM channel.
func (s *Server) DM(channel, user, text string) Sent {
	ts := s.NewTS()
	return s.PushEvent(map[string]any{
		"type": "message", "channel_type": "im", "user": user, "channel": channel,
		"ts": ts, "event_ts": ts, "text": text,
	})
}

// BotMessage sends a message authored by the bot itself (as Slack echoes the bot's posts).
func (s *Server) BotMessage(channel, text, threadTS string) Sent {
	ts := s.NewTS()
	ev := map[string]any{
		"type": "message", "channel_type": "channel", "user": s.BotUserID, "bot_id": s.BotID,
		"channel": channel, "ts": ts, "event_ts": ts, "text": text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return s.PushEvent(ev)
}

// Slash sends a slash_commands envelope ("/model", "gpt-x") typed by user in channel.
func (s *Server) Slash(command, text, channel, user string) Sent {
	s.mu.Lock()
	n := s.nextLocked()
	envID := fmt.Sprintf("env-%06d", n)
	trigger := fmt.Sprintf("trig-%06d", n)
	s.mu.Unlock()
	respURL := fmt.Sprintf("%s/resp/%d", s.srv.URL, n)
	b, _ := json.Marshal(map[string]any{
		"envelope_id": envID, "type": "slash_commands", "accepts_response_payload": true,
		"payload": map[string]any{
			"token": "verif", "team_id": s.TeamID, "team_domain": "fake", "channel_id": channel,
			"channel_name": "general", "user_id": user, "user_name": "user", "command": command,
			"text": text, "response_url": respURL, "trigger_id": trigger, "api_app_id": s.AppID,
		},
	})
	_ = s.push(b)
	return Sent{EnvelopeID: envID, TriggerID: trigger, ResponseURL: respURL}
}

// ---- HTTP handlers ----

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	_ = r.ParseForm()

	s.mu.Lock()
	s.calls[method]++
	if q := s.rateLimit[method]; len(q) > 0 {
		s.rateLimit[method] = q[1:]
		s.notifyLocked()
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(q[0]))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
		return
	}
	if q := s.failNext[method]; len(q) > 0 {
		s.failNext[method] = q[1:]
		s.notifyLocked()
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": false, "error": q[0]})
		return
	}
	s.mu.Unlock()

	if method == "apps.connections.open" {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !strings.HasPrefix(tok, "xapp-") || (s.AppToken != "" && tok != s.AppToken) {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		s.mu.Lock()
		s.opens++
		n := s.nextLocked()
		s.notifyLocked()
		s.mu.Unlock()
		wsURL := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/link/?ticket=" + strconv.Itoa(n)
		writeJSON(w, map[string]any{"ok": true, "url": wsURL})
		return
	}

	token := r.Form.Get("token")
	if token == "" {
		token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if s.BotToken != "" && token != s.BotToken {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}

	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake",
			"user": "detour", "team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID})
	case "chat.postMessage", "chat.postEphemeral", "chat.update":
		s.recordPost(w, r, method, token)
	case "conversations.info":
		ch := r.Form.Get("channel")
		writeJSON(w, map[string]any{"ok": true, "channel": map[string]any{
			"id": ch, "name": "general", "is_channel": strings.HasPrefix(ch, "C"),
			"is_im": strings.HasPrefix(ch, "D"), "is_member": true}})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (s *Server) recordPost(w http.ResponseWriter, r *http.Request, method, token string) {
	p := Post{
		Method:   method,
		Channel:  r.Form.Get("channel"),
		ThreadTS: r.Form.Get("thread_ts"),
		Text:     r.Form.Get("text"),
		User:     r.Form.Get("user"),
		Token:    token,
	}
	if b := r.Form.Get("blocks"); b != "" {
		p.Blocks = json.RawMessage(b)
	}
	if p.Channel == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	s.mu.Lock()
	switch method {
	case "chat.update":
		p.TS = r.Form.Get("ts")
	default:
		p.TS = s.tsLocked()
	}
	p.Ephemeral = method == "chat.postEphemeral"
	s.posts = append(s.posts, p)
	s.notifyLocked()
	echo := s.EchoPosts && method == "chat.postMessage"
	s.mu.Unlock()

	switch method {
	case "chat.postEphemeral":
		writeJSON(w, map[string]any{"ok": true, "message_ts": p.TS})
	default:
		writeJSON(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS})
	}
	if echo {
		ev := map[string]any{
			"type": "message", "channel_type": "channel", "user": s.BotUserID, "bot_id": s.BotID,
			"channel": p.Channel, "ts": p.TS, "event_ts": p.TS, "text": p.Text,
		}
		if p.ThreadTS != "" {
			ev["thread_ts"] = p.ThreadTS
			ev["parent_user_id"] = "U1"
		}
		s.PushEvent(ev)
	}
}

func (s *Server) handleResponseURL(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text         string          `json:"text"`
		ThreadTS     string          `json:"thread_ts"`
		ResponseType string          `json:"response_type"`
		Blocks       json.RawMessage `json:"blocks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	p := Post{Method: "response_url", ThreadTS: body.ThreadTS, Text: body.Text,
		Ephemeral: body.ResponseType == "" || body.ResponseType == "ephemeral"}
	if len(body.Blocks) > 0 && string(body.Blocks) != "null" {
		p.Blocks = body.Blocks
	}
	s.mu.Lock()
	s.calls["response_url"]++
	p.TS = s.tsLocked()
	s.posts = append(s.posts, p)
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) handleSocket(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	wc := &wsConn{c: c}
	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": s.AppID},
		"debug_info":      map[string]any{"host": "fakeslack"}})
	if err := wc.write(hello); err != nil {
		_ = c.Close()
		return
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	old := s.conn
	s.conn = wc
	s.connects++
	pending := s.pending
	s.pending = nil
	s.connWG.Add(2)
	s.notifyLocked()
	s.mu.Unlock()
	if old != nil {
		_ = old.c.Close()
	}
	for _, b := range pending {
		_ = s.push(b)
	}

	done := make(chan struct{})
	// Pinger: control frames may be written concurrently with other writes.
	go func() {
		defer s.connWG.Done()
		t := time.NewTicker(s.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-s.connCtx.Done():
				return
			case <-t.C:
				if err := c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
					return
				}
			}
		}
	}()
	// Reader: every client frame is an ack.
	go func() {
		defer s.connWG.Done()
		defer close(done)
		defer func() {
			_ = c.Close()
			s.mu.Lock()
			if s.conn == wc {
				s.conn = nil
			}
			s.notifyLocked()
			s.mu.Unlock()
		}()
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var a struct {
				EnvelopeID string          `json:"envelope_id"`
				Payload    json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(data, &a) != nil {
				continue
			}
			s.mu.Lock()
			s.acks = append(s.acks, Ack(a))
			s.notifyLocked()
			s.mu.Unlock()
		}
	}()
}
