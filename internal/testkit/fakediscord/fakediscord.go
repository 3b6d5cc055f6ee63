// Package fakediscord is a local fake of the Discord REST API and gateway, good enough
// to drive the real discordgo client end to end on 127.0.0.1.
//
// It serves the REST routes a bot uses (gateway discovery, messages, typing, webhooks
// for interaction answers, interaction callbacks, command registration, channel lookup)
// under /api/v9, and a gateway websocket that speaks Hello, Identify, READY, heartbeat
// ACKs, dispatches, Reconnect (op 7) and Resume (op 6 → RESUMED, with replay of missed
// events). Everything the client posts is recorded for assertions, and faults can be
// injected: a 429 on the next matching request, a forced reconnect or a dropped socket.
package fakediscord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Defaults for the identities the fake hands out.
const (
	DefaultBotID = "900000000000000001"
	DefaultAppID = "900000000000000002"
)

// ReconnectMode says how ForceReconnect breaks the gateway connection.
type ReconnectMode int

const (
	// ReconnectOp7 sends op 7 Reconnect; the client closes and resumes.
	ReconnectOp7 ReconnectMode = iota
	// ReconnectDrop closes the TCP connection without a close frame.
	ReconnectDrop
)

// Message is one message the client posted, through a channel or an interaction webhook.
type Message struct {
	ID        string
	ChannelID string // channel messages only
	Content   string
	Flags     int
	// AllowedMentionsParse is nil when the request had no allowed_mentions, else its
	// parse list (empty = no mention may ping).
	AllowedMentionsParse *[]string
	Via                  string // "channel", "edit-original", "followup"
	InteractionToken     string // webhook posts only
	At                   time.Time
}

// Choice is one autocomplete choice in an interaction response.
type Choice struct {
	Name  string
	Value string
}

// InteractionResponse is one POST /interactions/{id}/{token}/callback.
type InteractionResponse struct {
	InteractionID string
	Token         string
	Type          int // 4 message, 5 deferred, 8 autocomplete result
	Flags         int
	Content       string
	Choices       []Choice
	At            time.Time
}

// CommandSet is one bulk overwrite of application commands.
type CommandSet struct {
	GuildID  string // "" for global registration
	Commands []*discordgo.ApplicationCommand
}

// Option is one option of a fake slash command or autocomplete interaction.
type Option struct {
	Name    string
	Value   string
	Focused bool
}

// Command describes an application command interaction to dispatch.
type Command struct {
	GuildID   string // "" for a DM
	ChannelID string
	UserID    string
	Name      string
	Options   []Option
}

// Msg describes a MESSAGE_CREATE to dispatch.
type Msg struct {
	GuildID    string // "" for a DM
	ChannelID  string
	AuthorID   string
	AuthorName string
	Bot        bool
	Content    string
	MentionBot bool // list the bot in mentions
}

type channelInfo struct {
	typ      int
	guildID  string
	parentID string
}

type event struct {
	seq  int64
	data []byte
}

type rateLimit struct {
	method     string
	segs       []string
	retryAfter time.Duration
	drain      bool // answer normally, with headers saying the bucket is now empty
}

type gwConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

func (c *gwConn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// Server is the fake. Set the exported fields before Start.
type Server struct {
	BotID   string
	AppID   string
	BotName string
	// Token, when set, is required as "Authorization: Bot <Token>" on every REST call
	// and in Identify/Resume.
	Token string
	// HeartbeatInterval sent in Hello (default 250ms).
	HeartbeatInterval time.Duration
	// EchoOwnMessages dispatches MESSAGE_CREATE for every message the bot posts to a
	// channel, as Discord does (default true from New).
	EchoOwnMessages bool

	srv      *httptest.Server
	upgrader websocket.Upgrader

	mu         sync.Mutex
	seq        int64
	events     []event
	conn       *gwConn
	conns      map[*gwConn]struct{}
	sessionID  string
	sessions   int
	identifies []int // intents of each Identify
	resumes    int
	authFails  int
	messages   []Message
	responses  []InteractionResponse
	commands   []CommandSet
	typings    []string
	rateLimits []rateLimit
	limited    int
	channels   map[string]channelInfo
	nextID     int64
	wg         sync.WaitGroup
	closed     bool
}

// New returns a fake with default identities; call Start.
func New() *Server {
	return &Server{
		BotID:             DefaultBotID,
		AppID:             DefaultAppID,
		BotName:           "detour",
		HeartbeatInterval: 250 * time.Millisecond,
		EchoOwnMessages:   true,
		channels:          map[string]channelInfo{},
		conns:             map[*gwConn]struct{}{},
		nextID:            1_000_000_000_000_000_000,
	}
}

// Start listens on 127.0.0.1 on a free port.
func (s *Server) Start() {
	mux := http.NewServeMux()
	p := "/api/v9"
	mux.HandleFunc("GET "+p+"/gateway", s.handleGateway)
	mux.HandleFunc("GET "+p+"/gateway/bot", s.handleGateway)
	mux.HandleFunc("GET "+p+"/users/@me", s.handleMe)
	mux.HandleFunc("GET "+p+"/channels/{id}", s.handleChannel)
	mux.HandleFunc("POST "+p+"/channels/{id}/messages", s.handleChannelMessage)
	mux.HandleFunc("POST "+p+"/channels/{id}/typing", s.handleTyping)
	mux.HandleFunc("PATCH "+p+"/webhooks/{app}/{token}/messages/{mid}", s.handleWebhookEdit)
	mux.HandleFunc("POST "+p+"/webhooks/{app}/{token}", s.handleFollowup)
	mux.HandleFunc("POST "+p+"/interactions/{id}/{token}/callback", s.handleCallback)
	mux.HandleFunc("PUT "+p+"/applications/{app}/commands", s.handleCommands)
	mux.HandleFunc("PUT "+p+"/applications/{app}/guilds/{guild}/commands", s.handleCommands)
	mux.HandleFunc("GET /gw/", s.handleWS)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 0, "message": "404: Not Found"})
	})
	s.srv = httptest.NewServer(s.middleware(mux))
}

// URL is the base URL (http://127.0.0.1:P) to give the adapter as its API URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server and drops every gateway connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.ws.Close()
	}
	s.conn = nil
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.wg.Wait()
}

func (s *Server) newID() string {
	s.nextID++
	return strconv.FormatInt(s.nextID, 10)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func splitRoute(path string) []string {
	return strings.Split(strings.Trim(path, "/"), "/")
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if s.Token != "" && r.Header.Get("Authorization") != "Bot "+s.Token {
				s.mu.Lock()
				s.authFails++
				s.mu.Unlock()
				writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 0, "message": "401: Unauthorized"})
				return
			}
			if rl, ok := s.takeRateLimit(r); ok && rl.drain {
				h := w.Header()
				h.Set("X-RateLimit-Limit", "5")
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(rl.retryAfter.Seconds(), 'f', 3, 64))
				h.Set("X-RateLimit-Bucket", "fake-bucket")
			} else if ok {
				secs := rl.retryAfter.Seconds()
				f := strconv.FormatFloat(secs, 'f', 3, 64)
				h := w.Header()
				h.Set("Retry-After", strconv.Itoa(int(secs+0.999)))
				h.Set("X-RateLimit-Limit", "5")
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset-After", f)
				h.Set("X-RateLimit-Bucket", "fake-bucket")
				h.Set("X-RateLimit-Scope", "user")
				writeJSON(w, http.StatusTooManyRequests, map[string]any{
					"message": "You are being rate limited.", "retry_after": secs, "global": false,
				})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) takeRateLimit(r *http.Request) (rateLimit, bool) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v9")
	segs := splitRoute(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, rl := range s.rateLimits {
		if rl.method != r.Method || len(rl.segs) != len(segs) {
			continue
		}
		match := true
		for j, p := range rl.segs {
			if p == "*" || (strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}")) {
				continue
			}
			if p != segs[j] {
				match = false
				break
			}
		}
		if match {
			s.rateLimits = append(s.rateLimits[:i], s.rateLimits[i+1:]...)
			if !rl.drain {
				s.limited++
			}
			return rl, true
		}
	}
	return rateLimit{}, false
}

// RateLimitNext makes the next request matching route answer 429 with Discord's body
// and headers. route is "METHOD /path" without the /api/v9 prefix; a segment in braces
// or "*" matches anything, e.g. "POST /channels/{id}/messages".
func (s *Server) RateLimitNext(route string, retryAfter time.Duration) {
	method, path, _ := strings.Cut(route, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimits = append(s.rateLimits, rateLimit{method: method, segs: splitRoute(path), retryAfter: retryAfter})
}

// DrainBucketNext makes the next request matching route succeed with headers
// saying its bucket is empty for resetAfter, as Discord does on the last request
// a bucket allows; the client should wait before its next request on that route.
func (s *Server) DrainBucketNext(route string, resetAfter time.Duration) {
	method, path, _ := strings.Cut(route, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimits = append(s.rateLimits, rateLimit{method: method, segs: splitRoute(path), retryAfter: resetAfter, drain: true})
}

// RateLimited is how many requests were answered with an injected 429.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	url := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gw"
	writeJSON(w, http.StatusOK, map[string]any{
		"url": url, "shards": 1,
		"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
	})
}

func (s *Server) botUser() map[string]any {
	return map[string]any{"id": s.BotID, "username": s.BotName, "discriminator": "0", "bot": true}
}

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.botUser())
}

func (s *Server) handleChannel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	ci, ok := s.channels[id]
	s.mu.Unlock()
	if !ok {
		ci = channelInfo{typ: 0}
	}
	body := map[string]any{"id": id, "type": ci.typ}
	if ci.guildID != "" {
		body["guild_id"] = ci.guildID
	}
	if ci.parentID != "" {
		body["parent_id"] = ci.parentID
	}
	writeJSON(w, http.StatusOK, body)
}

type postBody struct {
	Content         string `json:"content"`
	Flags           int    `json:"flags"`
	AllowedMentions *struct {
		Parse []string `json:"parse"`
	} `json:"allowed_mentions"`
}

func readPost(r *http.Request) (postBody, error) {
	var b postBody
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, err
	}
	return b, nil
}

func (b postBody) record(id, channel, via, token string) Message {
	m := Message{ID: id, ChannelID: channel, Content: b.Content, Flags: b.Flags, Via: via, InteractionToken: token, At: time.Now()}
	if b.AllowedMentions != nil {
		p := append([]string{}, b.AllowedMentions.Parse...)
		m.AllowedMentionsParse = &p
	}
	return m
}

func badRequest(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"code": 50109, "message": "The request body contains invalid JSON. " + err.Error()})
}

func (s *Server) messageJSON(m Message) map[string]any {
	return map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "flags": m.Flags,
		"author": s.botUser(), "timestamp": m.At.UTC().Format(time.RFC3339),
	}
}

func (s *Server) handleChannelMessage(w http.ResponseWriter, r *http.Request) {
	b, err := readPost(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	if len([]rune(b.Content)) > 2000 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 50035, "message": "Invalid Form Body: content must be 2000 or fewer in length."})
		return
	}
	ch := r.PathValue("id")
	s.mu.Lock()
	m := b.record(s.newID(), ch, "channel", "")
	s.messages = append(s.messages, m)
	echo := s.EchoOwnMessages
	guild := s.channels[ch].guildID
	s.mu.Unlock()
	body := s.messageJSON(m)
	writeJSON(w, http.StatusOK, body)
	if echo {
		if guild != "" {
			body["guild_id"] = guild
		}
		s.Dispatch("MESSAGE_CREATE", body)
	}
}

func (s *Server) handleTyping(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.typings = append(s.typings, r.PathValue("id"))
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleWebhookEdit(w http.ResponseWriter, r *http.Request) {
	b, err := readPost(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	via := "edit-followup"
	if r.PathValue("mid") == "@original" {
		via = "edit-original"
	}
	s.mu.Lock()
	m := b.record(s.newID(), "", via, r.PathValue("token"))
	s.messages = append(s.messages, m)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.messageJSON(m))
}

func (s *Server) handleFollowup(w http.ResponseWriter, r *http.Request) {
	b, err := readPost(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	s.mu.Lock()
	m := b.record(s.newID(), "", "followup", r.PathValue("token"))
	s.messages = append(s.messages, m)
	s.mu.Unlock()
	if r.URL.Query().Get("wait") == "true" {
		writeJSON(w, http.StatusOK, s.messageJSON(m))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Type int `json:"type"`
		Data *struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
			Choices []struct {
				Name  string `json:"name"`
				Value any    `json:"value"`
			} `json:"choices"`
		} `json:"data"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &b)
	}
	if err != nil {
		badRequest(w, err)
		return
	}
	rec := InteractionResponse{InteractionID: r.PathValue("id"), Token: r.PathValue("token"), Type: b.Type, At: time.Now()}
	if b.Data != nil {
		rec.Content, rec.Flags = b.Data.Content, b.Data.Flags
		for _, c := range b.Data.Choices {
			rec.Choices = append(rec.Choices, Choice{Name: c.Name, Value: fmt.Sprint(c.Value)})
		}
	}
	s.mu.Lock()
	s.responses = append(s.responses, rec)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCommands(w http.ResponseWriter, r *http.Request) {
	var cmds []*discordgo.ApplicationCommand
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &cmds)
	}
	if err != nil {
		badRequest(w, err)
		return
	}
	s.mu.Lock()
	for _, c := range cmds {
		c.ID = s.newID()
		c.ApplicationID = r.PathValue("app")
	}
	s.commands = append(s.commands, CommandSet{GuildID: r.PathValue("guild"), Commands: cmds})
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, cmds)
}

// ---- gateway ----

type gwFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("v") != "9" || r.URL.Query().Get("encoding") != "json" {
		http.Error(w, "want v=9&encoding=json", http.StatusBadRequest)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
		_ = ws.Close()
	}()
	s.serveConn(c)
}

func (s *Server) serveConn(c *gwConn) {
	ms := s.HeartbeatInterval.Milliseconds()
	if ms <= 0 {
		ms = 250
	}
	if err := c.write(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": ms}}); err != nil {
		return
	}
	// Handshake: Identify, or Resume; a Resume that cannot be honoured gets op 9
	// (invalid session) and the client identifies on the same socket.
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
handshake:
	for {
		var f gwFrame
		if err := c.ws.ReadJSON(&f); err != nil {
			return
		}
		switch f.Op {
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			if json.Unmarshal(f.D, &id) != nil || !s.tokenOK(id.Token) {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."), time.Now().Add(time.Second))
				return
			}
			s.mu.Lock()
			s.sessions++
			s.sessionID = fmt.Sprintf("fake-session-%d", s.sessions)
			s.identifies = append(s.identifies, id.Intents)
			s.events = nil
			s.seq = 0
			ready := map[string]any{
				"v": 9, "session_id": s.sessionID, "user": s.botUser(),
				"resume_gateway_url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gw",
				"application":        map[string]any{"id": s.AppID, "flags": 0},
				"guilds":             []any{}, "private_channels": []any{},
			}
			err := s.dispatchLocked(c, "READY", ready)
			if err == nil {
				s.conn = c
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			break handshake
		case 6:
			var rs struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			s.mu.Lock()
			ok := json.Unmarshal(f.D, &rs) == nil && s.tokenOK(rs.Token) && rs.SessionID != "" && rs.SessionID == s.sessionID
			if !ok {
				s.mu.Unlock()
				if c.write(map[string]any{"op": 9, "d": false}) != nil {
					return
				}
				continue
			}
			s.resumes++
			var err error
			for _, e := range s.events {
				if e.seq > rs.Seq && err == nil {
					err = c.writeRaw(e.data)
				}
			}
			if err == nil {
				err = s.dispatchLocked(c, "RESUMED", map[string]any{})
			}
			if err == nil {
				s.conn = c
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			break handshake
		default:
			return
		}
	}
	_ = c.ws.SetReadDeadline(time.Time{})
	for {
		var f gwFrame
		if err := c.ws.ReadJSON(&f); err != nil {
			return
		}
		if f.Op == 1 {
			if err := c.write(map[string]any{"op": 11}); err != nil {
				return
			}
		}
	}
}

func (c *gwConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (s *Server) tokenOK(tok string) bool {
	return s.Token == "" || tok == "Bot "+s.Token
}

// dispatchLocked numbers, logs and writes one dispatch to c (or only logs it when c
// is nil, for replay on resume). s.mu must be held.
func (s *Server) dispatchLocked(c *gwConn, t string, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	s.seq++
	frame, err := json.Marshal(gwFrame{Op: 0, D: data, S: &s.seq, T: t})
	if err != nil {
		return err
	}
	s.events = append(s.events, event{seq: s.seq, data: frame})
	if c == nil {
		return nil
	}
	return c.writeRaw(frame)
}

// Dispatch sends one gateway event to the connected client; while no client is
// connected the event is kept and replayed on resume, as Discord does.
func (s *Server) Dispatch(t string, d any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conn
	if err := s.dispatchLocked(c, t, d); err != nil && s.conn == c {
		s.conn = nil
	}
}

// ForceReconnect makes the connected client reconnect: op 7, or a dropped socket.
func (s *Server) ForceReconnect(mode ReconnectMode) error {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c == nil {
		return errors.New("fakediscord: no gateway connection")
	}
	if mode == ReconnectOp7 {
		return c.write(map[string]any{"op": 7, "d": nil})
	}
	return c.ws.UnderlyingConn().Close()
}

// InvalidateSession forgets the gateway session, so the next Resume is answered with
// op 9 (invalid session) and the client must identify again.
func (s *Server) InvalidateSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionID = ""
}

// ---- dispatch helpers ----

// SendMessage dispatches MESSAGE_CREATE and returns the message id.
func (s *Server) SendMessage(m Msg) string {
	s.mu.Lock()
	id := s.newID()
	if m.GuildID == "" {
		if _, ok := s.channels[m.ChannelID]; !ok {
			s.channels[m.ChannelID] = channelInfo{typ: 1}
		}
	} else if _, ok := s.channels[m.ChannelID]; !ok {
		s.channels[m.ChannelID] = channelInfo{typ: 0, guildID: m.GuildID}
	}
	s.mu.Unlock()
	name := m.AuthorName
	if name == "" {
		name = "user-" + m.AuthorID
	}
	body := map[string]any{
		"id": id, "channel_id": m.ChannelID, "content": m.Content, "type": 0,
		"author":    map[string]any{"id": m.AuthorID, "username": name, "bot": m.Bot},
		"timestamp": time.Now().UTC().Format(time.RFC3339), "mentions": []any{},
	}
	if m.MentionBot {
		body["mentions"] = []any{s.botUser()}
	}
	if m.GuildID != "" {
		body["guild_id"] = m.GuildID
	}
	s.Dispatch("MESSAGE_CREATE", body)
	return id
}

// SendMention dispatches a guild message "<@bot> text" from user in channel.
func (s *Server) SendMention(guild, channel, user, text string) string {
	return s.SendMessage(Msg{GuildID: guild, ChannelID: channel, AuthorID: user, Content: "<@" + s.BotID + "> " + text, MentionBot: true})
}

// SendDM dispatches a direct message from user in DM channel.
func (s *Server) SendDM(channel, user, text string) string {
	return s.SendMessage(Msg{ChannelID: channel, AuthorID: user, Content: text})
}

// AddThread registers a public thread so GET /channels/{thread} reports it.
func (s *Server) AddThread(guild, parent, thread string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[thread] = channelInfo{typ: 11, guildID: guild, parentID: parent}
}

// CreateThread registers a thread and dispatches THREAD_CREATE with the given owner.
func (s *Server) CreateThread(guild, parent, thread, ownerID string) {
	s.AddThread(guild, parent, thread)
	s.Dispatch("THREAD_CREATE", map[string]any{
		"id": thread, "type": 11, "guild_id": guild, "parent_id": parent, "owner_id": ownerID,
		"name": "thread " + thread, "newly_created": true,
	})
}

func (s *Server) interaction(typ int, c Command) (id, token string) {
	s.mu.Lock()
	id = s.newID()
	token = "itok-" + id
	s.mu.Unlock()
	opts := []map[string]any{}
	for _, o := range c.Options {
		m := map[string]any{"name": o.Name, "type": 3, "value": o.Value}
		if o.Focused {
			m["focused"] = true
		}
		opts = append(opts, m)
	}
	user := map[string]any{"id": c.UserID, "username": "user-" + c.UserID}
	body := map[string]any{
		"id": id, "application_id": s.AppID, "type": typ, "token": token, "version": 1,
		"channel_id": c.ChannelID,
		"data":       map[string]any{"id": "cmd-" + c.Name, "name": c.Name, "type": 1, "options": opts},
	}
	if c.GuildID != "" {
		body["guild_id"] = c.GuildID
		body["member"] = map[string]any{"user": user}
	} else {
		body["user"] = user
	}
	s.Dispatch("INTERACTION_CREATE", body)
	return id, token
}

// SendCommand dispatches an application command interaction; it returns the
// interaction id and token.
func (s *Server) SendCommand(c Command) (id, token string) { return s.interaction(2, c) }

// SendAutocomplete dispatches an autocomplete interaction (mark the option being typed
// Focused); it returns the interaction id and token.
func (s *Server) SendAutocomplete(c Command) (id, token string) { return s.interaction(4, c) }

// ---- recordings ----

// Messages returns every message posted so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// InteractionResponses returns every interaction callback so far.
func (s *Server) InteractionResponses() []InteractionResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]InteractionResponse(nil), s.responses...)
}

// Commands returns every command registration so far.
func (s *Server) Commands() []CommandSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommandSet(nil), s.commands...)
}

// Typings returns the channel ids of every typing indicator so far.
func (s *Server) Typings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.typings...)
}

// Identifies returns the intents of every Identify received.
func (s *Server) Identifies() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.identifies...)
}

// Resumes is how many op 6 Resume were accepted.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// Connected reports whether a client is connected (after READY or RESUMED).
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}

// AuthFailures is how many REST calls had a wrong Authorization header.
func (s *Server) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFails
}

// WaitFor polls cond every 5ms until it holds or timeout passes.
func WaitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fakediscord: condition not met within %v", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitConnected waits until a client is connected and has done identifies Identify
// and resumes Resume in total (pass 1, 0 for the first connection).
func (s *Server) WaitConnected(timeout time.Duration, identifies, resumes int) error {
	return WaitFor(timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.conn != nil && len(s.identifies) >= identifies && s.resumes >= resumes
	})
}

// WaitMessages waits until at least n messages match pred (nil = all) and returns the
// matching ones.
func (s *Server) WaitMessages(timeout time.Duration, n int, pred func(Message) bool) ([]Message, error) {
	var got []Message
	err := WaitFor(timeout, func() bool {
		got = got[:0]
		for _, m := range s.Messages() {
			if pred == nil || pred(m) {
				got = append(got, m)
			}
		}
		return len(got) >= n
	})
	if err != nil {
		return got, fmt.Errorf("fakediscord: want %d messages, have %d: %w", n, len(got), err)
	}
	return got, nil
}

// WaitInteractionResponses waits until at least n interaction callbacks match pred.
func (s *Server) WaitInteractionResponses(timeout time.Duration, n int, pred func(InteractionResponse) bool) ([]InteractionResponse, error) {
	var got []InteractionResponse
	err := WaitFor(timeout, func() bool {
		got = got[:0]
		for _, r := range s.InteractionResponses() {
			if pred == nil || pred(r) {
				got = append(got, r)
			}
		}
		return len(got) >= n
	})
	if err != nil {
		return got, fmt.Errorf("fakediscord: want %d interaction responses, have %d: %w", n, len(got), err)
	}
	return got, nil
}

// InChannel is a WaitMessages predicate for channel messages in channel id.
func InChannel(id string) func(Message) bool {
	return func(m Message) bool { return m.Via == "channel" && m.ChannelID == id }
}

// ForInteraction is a WaitMessages predicate for webhook posts of one interaction token.
func ForInteraction(token string) func(Message) bool {
	return func(m Message) bool { return m.InteractionToken == token }
}
