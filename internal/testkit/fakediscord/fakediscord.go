// Package fakediscord is a local fake of the Discord REST API and gateway, strict
// enough that a client passing against it behaves in a real guild: the bot's
// Discord adapter (discordgo's REST client, and its own gateway reader) runs
// against it end to end on 127.0.0.1.
//
// It serves the REST routes a bot uses (gateway discovery, messages and their
// edits and deletions, typing, threads started from a message, interaction
// callbacks and their webhooks, command registration, channel lookup) under
// /api/v9, and a gateway websocket (Hello, Identify, READY, heartbeats,
// dispatches, Reconnect, Resume with replay, Invalid Session). Everything the
// client sends is recorded for assertions (Messages in their latest version with
// every earlier one, Edits, Deletes, ThreadStarts, TypingCalls, Latest for what a
// person sees in a channel), and faults can be injected.
//
// Each rule below is Discord's, enforced as documented; a client that breaks one
// gets what Discord would answer.
//
//   - Heartbeat interval: Hello says 41.25 s (HeartbeatInterval), as Discord does;
//     a test shortens it only by setting the field.
//     https://discord.com/developers/docs/events/gateway#sending-heartbeats
//   - Close codes: a client close with 1000 or 1001 invalidates the session (a
//     later Resume gets op 9, not resumable); any other code, or a connection that
//     ends without a close frame, leaves it resumable. Closes() records each code.
//     https://discord.com/developers/docs/events/gateway#disconnecting
//   - Resume: only a session that is still valid resumes (missed events are
//     replayed, then RESUMED); READY names resume_gateway_url (a path of its own
//     here, /gw-resume), and ResumePaths() records where each Resume arrived.
//     https://discord.com/developers/docs/events/gateway#resuming
//   - Zombie connections: StopAcking stops the heartbeat ACKs and the dispatches on
//     the current connection, as a dead network path would; events wait for a
//     Resume. https://discord.com/developers/docs/events/gateway#heartbeat-interval-example-heartbeat-ack
//   - Invalid Session (op 9): sent for a Resume that cannot be honoured, by
//     SendInvalidSession, and after READY while InvalidateAfterReady > 0.
//     https://discord.com/developers/docs/events/gateway-events#invalid-session
//   - Identify budget: GET /gateway/bot reports session_start_limit (total,
//     remaining, reset_after) from the identifies counted in the current window
//     (SessionStartTotal per SessionStartReset, on the Now clock). An identify with
//     nothing remaining resets the token, as Discord does: the connection closes
//     with 4004 and every later call is refused. OverIdentifies() counts them.
//     https://discord.com/developers/docs/events/gateway#session-start-limit-object
//   - Disallowed intents: an Identify asking for an intent in RefuseIntents is
//     closed with 4014. https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes
//   - Message content: a session identified without MESSAGE_CONTENT gets guild
//     messages that do not mention the bot with empty content (DMs and mentions keep
//     theirs). https://discord.com/developers/docs/events/gateway#message-content-intent
//   - Interaction deadline: the initial response must arrive within 3 s of the
//     dispatch (InteractionDeadline, real time); a late one, or one for an unknown
//     interaction, gets 404 with code 10062 "Unknown interaction"; a second one gets
//     400 with code 40060; the original response and follow-ups of an interaction
//     never acknowledged get 404 with code 10015 "Unknown Webhook". The token lives
//     15 minutes. https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction
//   - Rate limits: RateLimitNext answers a route with a per-route 429
//     (X-RateLimit-Scope: user, "global": false, bucket headers); GlobalRateLimitNext
//     with a global one (X-RateLimit-Global: true, X-RateLimit-Scope: global,
//     "global": true, no bucket headers). Either opens a window on the Now clock in
//     which every further request on that bucket (for the global limit: on every
//     route but the interaction endpoints, which Discord exempts) gets a 429 again;
//     DrainBucketNext answers normally with X-RateLimit-Remaining: 0 and opens the
//     same window. https://discord.com/developers/docs/topics/rate-limits
//   - Invalid requests: every 401, 403 and 429 (but scope shared) counts toward
//     InvalidRequests(); past InvalidRequestLimit in 10 minutes every request gets a
//     403, like Discord's temporary ban.
//     https://discord.com/developers/docs/topics/rate-limits#invalid-request-limit-aka-cloudflare-bans
//   - Mentions: each posted text is scanned for @everyone, @here, <@user>,
//     <@!user>, <@&role>, and the reply's author; Message.LiveMentions lists those
//     that would ping under the request's allowed_mentions (none given: all do; the
//     replied-to author unless replied_user is false).
//     https://discord.com/developers/docs/resources/message#allowed-mentions-object
//   - Replies: a message_reference to a message the fake does not know is refused
//     (400, code 50035) unless fail_if_not_exists is false; content past 2,000
//     characters is refused (50035), and a message with neither content nor
//     components gets 400 code 50006. https://discord.com/developers/docs/resources/message#create-message
//   - Edits: PATCH /channels/{c}/messages/{m} edits only the bot's own messages
//     (another author's: 403, code 50005); an unknown or deleted message, or one in
//     another channel, gets 404 code 10008; absent fields stay as they were,
//     "components": [] removes them; the 2,000-character limit holds; with
//     EchoOwnMessages, MESSAGE_UPDATE is dispatched.
//     https://discord.com/developers/docs/resources/message#edit-message
//   - Deletes: the bot may delete its own messages (another author's needs
//     MANAGE_MESSAGES, which the fake's bot lacks: 403, code 50013); a second
//     delete gets 404 code 10008; MESSAGE_DELETE is dispatched.
//     https://discord.com/developers/docs/resources/message#delete-message
//   - Permissions: after Forbid(c) every request on channel c gets 403 code 50013
//     "Missing Permissions", and counts toward the invalid-request limit.
//     https://discord.com/developers/docs/topics/permissions
//   - Autocomplete: at most 25 choices, names and values of 1 to 100 characters
//     (else 50035). https://discord.com/developers/docs/interactions/application-commands#autocomplete
//   - Typing: POST /channels/{c}/typing answers 204; TypingCalls records when.
//     https://discord.com/developers/docs/resources/channel#trigger-typing-indicator
//   - Threads from a message: only in a guild text or announcement channel (a DM
//     or a thread: 400, code 50024), once per message (400, code 160004), name 1 to
//     100 characters, auto_archive_duration one of 60, 1440, 4320, 10080 (else
//     50035); the thread gets the message's id, GET /channels/{thread} reports it,
//     and THREAD_CREATE is dispatched with the bot as owner.
//     https://discord.com/developers/docs/resources/channel#start-thread-from-message
//   - Components: at most 5 action rows of 1 to 5 components; a string select
//     (type 3) alone in its row, custom_id 1 to 100 characters and unique in the
//     message, 1 to 25 options, label and value 1 to 100 characters, values unique,
//     placeholder at most 150; else 400 code 50035.
//     https://discord.com/developers/docs/components/reference#string-select
//   - Component interactions: SendComponent dispatches a pick (type 3) only as
//     Discord's client can make one: on a message and menu that exist, with
//     values among the options. Callback types are checked per interaction type
//     (6 deferred update and 7 update message for components only, 8 for
//     autocomplete only; else 50035); after 6, @original is the menu's message.
//     https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type
//   - Route buckets: Limit gives a route n requests per window per channel (on the
//     Now clock), with X-RateLimit-Limit, -Remaining, -Reset, -Reset-After and
//     -Bucket on every answer and a per-route 429 past n, as Discord's headers
//     describe. https://discord.com/developers/docs/topics/rate-limits#header-format
package fakediscord

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Defaults for the identities and limits the fake hands out.
const (
	DefaultBotID = "900000000000000001"
	DefaultAppID = "900000000000000002"
	// DefaultHeartbeatInterval is what Discord's Hello says.
	DefaultHeartbeatInterval = 41250 * time.Millisecond
	// DefaultInteractionDeadline is Discord's limit for an interaction's first response.
	DefaultInteractionDeadline = 3 * time.Second
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
	// RepliedUser is allowed_mentions.replied_user (false when absent).
	RepliedUser bool
	// Reference is the message_reference's message id ("" = not a reply), and
	// FailIfNotExists its flag (nil = absent, which Discord takes as true).
	Reference       string
	FailIfNotExists *bool
	// LiveMentions lists the mentions that would ping ("@everyone", "@here",
	// "user:123", "role:456", "replied:789"); empty means nobody is pinged.
	LiveMentions     []string
	Via              string // "channel", "edit-original", "edit-followup", "followup", "callback"
	InteractionToken string // webhook posts only
	At               time.Time
	// Selects are the string select menus of the message's latest version.
	Selects []Select
	// Ephemeral: only the interaction's user sees it (flag 64 on the post or on
	// the deferral it replaces).
	Ephemeral bool
	// Versions holds every content the message had, the first post first; Content
	// is the latest. Deleted: it was deleted (Content stays the last version).
	Versions []string
	Deleted  bool
}

// Choice is one autocomplete choice in an interaction response.
type Choice struct {
	Name  string
	Value string
}

// InteractionResponse is one accepted POST /interactions/{id}/{token}/callback.
type InteractionResponse struct {
	InteractionID string
	Token         string
	Type          int // 4 message, 5 deferred, 8 autocomplete result
	Flags         int
	Content       string
	Choices       []Choice
	At            time.Time
	// Latency is how long after the interaction's dispatch the response arrived.
	Latency time.Duration
}

// Request is one REST request the fake received, with the status it answered.
type Request struct {
	Method string
	Path   string // without /api/v9
	Status int
	Code   int // Discord's JSON error code, 0 = none
	At     time.Time
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
	// ReplyTo is the message it replies to (type 19, message_reference); ""
	// = none. Attachments are attachment objects from AddAttachment.
	ReplyTo     string
	Attachments []map[string]any
	// WebhookID posts it through that webhook (webhook_id; the author is the
	// webhook: give Bot and an AuthorID of its own). InteractionUser makes it a
	// bot's answer to that person's command (interaction_metadata.user).
	WebhookID, InteractionUser string
}

type channelInfo struct {
	typ      int
	guildID  string
	parentID string
}

type interaction struct {
	id, token  string
	dispatched time.Time // real time
	issued     time.Time // Now clock, for the 15-minute token
	acked      bool
	typ        int    // 2 command, 3 component, 4 autocomplete
	message    string // component interactions: the message the component is on
	ephemeral  bool   // acknowledged with flag 64
	original   string // the message @original names once it exists
}

type fault struct {
	method string
	segs   []string
	d      time.Duration
	kind   faultKind
	status int
	code   int
}

type faultKind int

const (
	faultRateLimit faultKind = iota
	faultGlobal
	faultDrain
	faultSlow
	faultFail
)

// Server is the fake. Set the exported fields before Start.
type Server struct {
	BotID   string
	AppID   string
	BotName string
	// Token, when set, is required as "Authorization: Bot <Token>" on every REST call
	// (interaction endpoints excepted, as on Discord) and in Identify/Resume.
	Token string
	// HeartbeatInterval sent in Hello (default 41.25 s, Discord's).
	HeartbeatInterval time.Duration
	// InteractionDeadline is how long after its dispatch an interaction may get its
	// first response (default 3 s, real time).
	InteractionDeadline time.Duration
	// EchoOwnMessages dispatches MESSAGE_CREATE for every message the bot posts to a
	// channel, as Discord does (default true from New).
	EchoOwnMessages bool
	// Now is the clock of rate-limit windows, the identify budget and interaction
	// tokens (default time.Now); share a virtual one with the client under test.
	Now func() time.Time
	// SessionStartTotal identifies are allowed per SessionStartReset (defaults
	// 1000 per 24 h).
	SessionStartTotal int
	SessionStartReset time.Duration
	// InvalidRequestLimit 401/403/429 answers in 10 minutes trigger the ban
	// (default 10,000).
	InvalidRequestLimit int
	// RefuseIntents lists intents the application is not allowed (Identify closes
	// with 4014).
	RefuseIntents int
	// InvalidateAfterReady sends op 9 (not resumable) right after READY for that
	// many sessions, counting down.
	InvalidateAfterReady int
	// NoHistory lists the channels where the bot lacks Read Message History
	// (history.go).
	NoHistory map[string]bool

	srv      *httptest.Server
	upgrader websocket.Upgrader
	release  chan struct{} // closed by ReleaseSlow / Close

	mu           sync.Mutex
	seq          int64
	events       []event
	conn         *gwConn
	conns        map[*gwConn]struct{}
	sessionID    string
	sessions     int
	identifies   []int // intents of each Identify
	lastShard    *[2]int
	resumes      int
	resumePaths  []string
	closes       []int
	authFails    int
	tokenReset   bool
	overIdentify int
	budgetStart  time.Time
	budgetUsed   int
	messages     []Message
	byID         map[string]int         // message id -> index in messages (the bot's posts)
	known        map[string]string      // message id -> author id
	where        map[string]string      // message id -> channel id (channel messages)
	said         map[string]*said       // message id -> a person's message (history.go)
	cdn          map[string]*attachment // attachment id -> file (history.go)
	cdnLog       []CDNRequest
	edits        []Edit
	deletes      []Delete
	threadStarts []ThreadStart
	typingCalls  []Typing
	threadOf     map[string]string // message id -> thread started from it
	limits       []limit
	buckets      map[string]*bucket
	responses    []InteractionResponse
	interactions map[string]*interaction
	tokens       map[string]*interaction
	commands     []CommandSet
	typings      []string
	requests     []Request
	faults       []fault
	windows      map[string]time.Time // METHOD path -> bucket empty until (Now)
	globalUntil  time.Time
	limited      int
	invalid      []time.Time
	channels     map[string]channelInfo
	forbid       map[string]bool // channels where the bot lacks permissions
	nextID       int64
	held         int
	slowed       int
	wg           sync.WaitGroup
	closed       bool
}

// New returns a fake with default identities; call Start.
func New() *Server {
	return &Server{
		BotID:               DefaultBotID,
		AppID:               DefaultAppID,
		BotName:             "detour",
		HeartbeatInterval:   DefaultHeartbeatInterval,
		InteractionDeadline: DefaultInteractionDeadline,
		EchoOwnMessages:     true,
		Now:                 time.Now,
		SessionStartTotal:   1000,
		SessionStartReset:   24 * time.Hour,
		InvalidRequestLimit: 10_000,
		release:             make(chan struct{}),
		channels:            map[string]channelInfo{},
		forbid:              map[string]bool{},
		conns:               map[*gwConn]struct{}{},
		known:               map[string]string{},
		where:               map[string]string{},
		byID:                map[string]int{},
		threadOf:            map[string]string{},
		buckets:             map[string]*bucket{},
		interactions:        map[string]*interaction{},
		tokens:              map[string]*interaction{},
		windows:             map[string]time.Time{},
		nextID:              1_000_000_000_000_000_000,
	}
}

// Start listens on 127.0.0.1 on a free port.
func (s *Server) Start() { s.start(false) }

// StartTLS is Start with HTTPS and wss (a test certificate: see Certificate).
func (s *Server) StartTLS() { s.start(true) }

// Certificate is the TLS certificate of a server started with StartTLS.
func (s *Server) Certificate() *x509.Certificate { return s.srv.Certificate() }

func (s *Server) start(secure bool) {
	mux := http.NewServeMux()
	p := "/api/v9"
	mux.HandleFunc("GET "+p+"/gateway", s.handleGateway)
	mux.HandleFunc("GET "+p+"/gateway/bot", s.handleGateway)
	mux.HandleFunc("GET "+p+"/users/@me", s.handleMe)
	mux.HandleFunc("GET "+p+"/channels/{id}", s.handleChannel)
	mux.HandleFunc("POST "+p+"/channels/{id}/messages", s.handleChannelMessage)
	mux.HandleFunc("GET "+p+"/channels/{id}/messages", s.handleGetMessages)
	mux.HandleFunc("GET "+p+"/channels/{id}/messages/{mid}", s.handleGetMessage)
	mux.HandleFunc("GET /attachments/{channel}/{id}/{name}", s.handleCDN)
	mux.HandleFunc("PATCH "+p+"/channels/{id}/messages/{mid}", s.handleMessageEdit)
	mux.HandleFunc("DELETE "+p+"/channels/{id}/messages/{mid}", s.handleMessageDelete)
	mux.HandleFunc("POST "+p+"/channels/{id}/messages/{mid}/threads", s.handleThreadFromMessage)
	mux.HandleFunc("POST "+p+"/channels/{id}/typing", s.handleTyping)
	mux.HandleFunc("PATCH "+p+"/webhooks/{app}/{token}/messages/{mid}", s.handleWebhookEdit)
	mux.HandleFunc("POST "+p+"/webhooks/{app}/{token}", s.handleFollowup)
	mux.HandleFunc("POST "+p+"/interactions/{id}/{token}/callback", s.handleCallback)
	mux.HandleFunc("PUT "+p+"/applications/{app}/commands", s.handleCommands)
	mux.HandleFunc("PUT "+p+"/applications/{app}/guilds/{guild}/commands", s.handleCommands)
	mux.HandleFunc("GET /gw/", s.handleWS)
	mux.HandleFunc("GET /gw-resume/", s.handleWS)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		discordError(w, http.StatusNotFound, 0, "404: Not Found")
	})
	s.srv = httptest.NewUnstartedServer(s.middleware(mux))
	if secure {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
}

// URL is the base URL (http://127.0.0.1:P, or https://) to give the adapter as its API URL.
func (s *Server) URL() string { return s.srv.URL }

// wsBase is ws://127.0.0.1:P (wss:// under TLS).
func (s *Server) wsBase() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

// Close stops the server and drops every gateway connection.
func (s *Server) Close() {
	s.ReleaseSlow()
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

// discordError answers with Discord's JSON error body.
func discordError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"code": code, "message": msg})
}

func splitRoute(path string) []string {
	return strings.Split(strings.Trim(path, "/"), "/")
}

// interactionRoute reports the endpoints Discord exempts from the global limit
// (and from the bot token).
func interactionRoute(path string) bool {
	return strings.HasPrefix(path, "/interactions/") || strings.HasPrefix(path, "/webhooks/")
}

// recorder keeps the status written, for the request log.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/api/v9")
		rec := &recorder{ResponseWriter: w}
		code := s.serveAPI(rec, r, path, next)
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: path, Status: rec.status, Code: code, At: time.Now()})
		if rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden ||
			(rec.status == http.StatusTooManyRequests && rec.Header().Get("X-RateLimit-Scope") != "shared") {
			s.invalid = append(s.invalid, s.Now())
		}
		s.mu.Unlock()
	})
}

// serveAPI applies bans, auth, rate limits and faults, then the route; it returns
// the Discord error code it answered with, if any.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, path string, next http.Handler) int {
	inter := interactionRoute(path)
	s.mu.Lock()
	now := s.Now()
	banned := s.bannedLocked(now)
	reset := s.tokenReset
	s.mu.Unlock()
	if banned {
		discordError(w, http.StatusForbidden, 0, "You are being blocked from accessing our API temporarily due to exceeding our rate limits frequently.")
		return 0
	}
	if !inter && s.Token != "" && (reset || r.Header.Get("Authorization") != "Bot "+s.Token) {
		s.mu.Lock()
		s.authFails++
		s.mu.Unlock()
		discordError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return 0
	}
	if segs := splitRoute(path); len(segs) > 1 && segs[0] == "channels" && s.forbidden(segs[1]) {
		// The bot lacks a permission there (View Channel, Send Messages):
		// https://discord.com/developers/docs/topics/opcodes-and-status-codes#json (50013).
		discordError(w, http.StatusForbidden, 50013, "Missing Permissions")
		return 50013
	}
	f, ok := s.takeFault(r, path, inter)
	if ok && f.kind == faultSlow {
		s.mu.Lock()
		s.held++
		s.slowed++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.held--
			s.mu.Unlock()
		}()
		t := time.NewTimer(f.d)
		select {
		case <-t.C:
		case <-s.release:
		case <-r.Context().Done():
		}
		t.Stop()
		ok = false
	}
	key := r.Method + " " + path
	s.mu.Lock()
	now = s.Now()
	if ok {
		switch f.kind {
		case faultGlobal:
			s.globalUntil = now.Add(f.d)
		case faultRateLimit, faultDrain:
			s.windows[key] = now.Add(f.d)
		}
	}
	globalLeft := s.globalUntil.Sub(now)
	routeLeft := s.windows[key].Sub(now)
	s.mu.Unlock()

	switch {
	case ok && f.kind == faultFail:
		discordError(w, f.status, f.code, "injected failure")
		return f.code
	case !inter && globalLeft > 0:
		s.countLimited()
		secs := globalLeft.Seconds()
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(secs+0.999)))
		h.Set("X-RateLimit-Global", "true")
		h.Set("X-RateLimit-Scope", "global")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": true})
		return 0
	case routeLeft > 0 && !(ok && f.kind == faultDrain):
		s.countLimited()
		secs := routeLeft.Seconds()
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(secs+0.999)))
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(s.Now().Add(routeLeft).UnixMilli())/1000, 'f', 3, 64))
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", "fake-"+strings.ReplaceAll(strings.Trim(path, "/"), "/", "-"))
		h.Set("X-RateLimit-Scope", "user")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": false})
		return 0
	case ok && f.kind == faultDrain:
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(routeLeft.Seconds(), 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", "fake-"+strings.ReplaceAll(strings.Trim(path, "/"), "/", "-"))
	case !s.takeLimit(w, r.Method, path):
		return 0
	}
	next.ServeHTTP(w, r)
	return 0
}

func (s *Server) countLimited() {
	s.mu.Lock()
	s.limited++
	s.mu.Unlock()
}

func (s *Server) bannedLocked(now time.Time) bool {
	cut := now.Add(-10 * time.Minute)
	n := 0
	for _, t := range s.invalid {
		if t.After(cut) {
			n++
		}
	}
	return s.InvalidRequestLimit > 0 && n >= s.InvalidRequestLimit
}

func (s *Server) takeFault(r *http.Request, path string, inter bool) (fault, bool) {
	segs := splitRoute(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.kind == faultGlobal {
			if inter {
				continue
			}
		} else if !matchRoute(f, r.Method, segs) {
			continue
		}
		s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		return f, true
	}
	return fault{}, false
}

func matchRoute(f fault, method string, segs []string) bool {
	if f.method != method || len(f.segs) != len(segs) {
		return false
	}
	for j, p := range f.segs {
		if p == "*" || (strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}")) {
			continue
		}
		if p != segs[j] {
			return false
		}
	}
	return true
}

func (s *Server) addFault(route string, f fault) {
	method, path, _ := strings.Cut(route, " ")
	f.method, f.segs = method, splitRoute(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Forbid takes the bot's permissions in channel away: every request on it is
// answered 403, code 50013, and counts as an invalid request.
func (s *Server) Forbid(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbid[channel] = true
}

func (s *Server) forbidden(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forbid[channel]
}

// RateLimitNext makes the next request matching route answer a per-route 429
// with Discord's body and headers, and keeps that path's bucket empty for
// retryAfter (on the Now clock). route is "METHOD /path" without the /api/v9
// prefix; a segment in braces or "*" matches anything, e.g.
// "POST /channels/{id}/messages".
func (s *Server) RateLimitNext(route string, retryAfter time.Duration) {
	s.addFault(route, fault{kind: faultRateLimit, d: retryAfter})
}

// GlobalRateLimitNext makes the next request on any route but the interaction
// endpoints answer a global 429, and every such request for retryAfter after it.
func (s *Server) GlobalRateLimitNext(retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{kind: faultGlobal, d: retryAfter})
}

// DrainBucketNext makes the next request matching route succeed with headers
// saying its bucket is empty for resetAfter, as Discord does on the last request
// a bucket allows; a request on that path before then gets a 429.
func (s *Server) DrainBucketNext(route string, resetAfter time.Duration) {
	s.addFault(route, fault{kind: faultDrain, d: resetAfter})
}

// SlowNext holds the next request matching route for d (real time) before
// answering it, or until ReleaseSlow or Close.
func (s *Server) SlowNext(route string, d time.Duration) {
	s.addFault(route, fault{kind: faultSlow, d: d})
}

// FailNext answers the next request matching route with status and Discord error
// code.
func (s *Server) FailNext(route string, status, code int) {
	s.addFault(route, fault{kind: faultFail, status: status, code: code})
}

// ReleaseSlow lets every held request go now.
func (s *Server) ReleaseSlow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// Held is how many requests SlowNext is holding right now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// SlowStarted is how many requests SlowNext has started holding.
func (s *Server) SlowStarted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slowed
}

// RateLimited is how many requests were answered with a 429.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// InvalidRequests is how many requests counted toward Discord's invalid-request
// limit (401, 403, and 429 but scope shared).
func (s *Server) InvalidRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.invalid)
}

// Requests returns every REST request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	now := s.Now()
	s.rollBudgetLocked(now)
	remaining := max(s.SessionStartTotal-s.budgetUsed, 0)
	resetAfter := s.SessionStartReset
	if !s.budgetStart.IsZero() {
		resetAfter = s.budgetStart.Add(s.SessionStartReset).Sub(now)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"url": s.wsBase() + "/gw", "shards": 1,
		"session_start_limit": map[string]any{"total": s.SessionStartTotal, "remaining": remaining,
			"reset_after": resetAfter.Milliseconds(), "max_concurrency": 1},
	})
}

// rollBudgetLocked starts a new identify window once the last one has passed.
func (s *Server) rollBudgetLocked(now time.Time) {
	if !s.budgetStart.IsZero() && !now.Before(s.budgetStart.Add(s.SessionStartReset)) {
		s.budgetStart, s.budgetUsed = time.Time{}, 0
	}
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

type allowedMentions struct {
	Parse       []string `json:"parse"`
	Users       []string `json:"users"`
	Roles       []string `json:"roles"`
	RepliedUser bool     `json:"replied_user"`
}

type postBody struct {
	Content          string           `json:"content"`
	Flags            int              `json:"flags"`
	AllowedMentions  *allowedMentions `json:"allowed_mentions"`
	MessageReference *struct {
		MessageID       string `json:"message_id"`
		FailIfNotExists *bool  `json:"fail_if_not_exists"`
	} `json:"message_reference"`
	// Components is kept raw: absent (nil) and empty ([]) differ on an edit.
	Components json.RawMessage `json:"components"`
}

func readBody(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// recordLocked turns a post into a Message (not yet stored); s.mu must be held.
func (s *Server) recordLocked(b postBody, selects []Select, channel, via, token string) Message {
	m := Message{ID: s.newID(), ChannelID: channel, Content: b.Content, Flags: b.Flags, Via: via, InteractionToken: token,
		At: time.Now(), Selects: selects, Versions: []string{b.Content}, Ephemeral: b.Flags&flagEphemeral != 0}
	if b.AllowedMentions != nil {
		p := append([]string{}, b.AllowedMentions.Parse...)
		m.AllowedMentionsParse = &p
		m.RepliedUser = b.AllowedMentions.RepliedUser
	}
	replied := ""
	if b.MessageReference != nil {
		m.Reference, m.FailIfNotExists = b.MessageReference.MessageID, b.MessageReference.FailIfNotExists
		replied = s.known[m.Reference]
	}
	m.LiveMentions = liveMentions(b.Content, b.AllowedMentions, m.Reference != "", replied)
	return m
}

// storeLocked keeps m as a message of the bot; s.mu must be held.
func (s *Server) storeLocked(m Message) {
	s.byID[m.ID] = len(s.messages)
	s.messages = append(s.messages, m)
	s.known[m.ID] = s.BotID
	if m.ChannelID != "" {
		s.where[m.ID] = m.ChannelID
	}
}

// flagEphemeral is message flag 64: only the interaction's user sees the message.
const flagEphemeral = 64

func badRequest(w http.ResponseWriter, err error) {
	discordError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON. "+err.Error())
}

// invalidForm answers 400 with code 50035, as Discord does for a field out of its limits.
func invalidForm(w http.ResponseWriter, err error) {
	discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body: "+err.Error())
}

func (s *Server) messageJSON(m Message) map[string]any {
	body := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "flags": m.Flags,
		"author": s.botUser(), "timestamp": m.At.UTC().Format(time.RFC3339),
	}
	if m.Ephemeral {
		body["flags"] = m.Flags | flagEphemeral
	}
	if len(m.Selects) > 0 {
		body["components"] = selectsJSON(m.Selects)
	}
	return body
}

// checkPost applies Discord's limits on a new message's content and components.
func checkPost(b postBody) ([]Select, error) {
	if n := len([]rune(b.Content)); n > maxContent {
		return nil, fmt.Errorf("content must be 2000 or fewer in length (%d)", n)
	}
	selects, err := parseComponents(b.Components)
	if err != nil {
		return nil, err
	}
	if b.Content == "" && len(selects) == 0 {
		return nil, errEmptyMessage
	}
	return selects, nil
}

func (s *Server) handleChannelMessage(w http.ResponseWriter, r *http.Request) {
	var b postBody
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	selects, err := checkPost(b)
	if err == errEmptyMessage {
		discordError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	if err != nil {
		invalidForm(w, err)
		return
	}
	ch := r.PathValue("id")
	s.mu.Lock()
	if ref := b.MessageReference; ref != nil && s.known[ref.MessageID] == "" && (ref.FailIfNotExists == nil || *ref.FailIfNotExists) {
		s.mu.Unlock()
		discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body: message_reference: Unknown message")
		return
	}
	m := s.recordLocked(b, selects, ch, "channel", "")
	s.storeLocked(m)
	echo := s.EchoOwnMessages
	guild := s.channels[ch].guildID
	s.mu.Unlock()
	s.answerMessage(w, m, "MESSAGE_CREATE", echo, guild)
}

// answerMessage answers a create or edit with the message, and, as Discord does
// to a bot that listens, dispatches it on the gateway as event when echo is set.
// The caller has released s.mu.
func (s *Server) answerMessage(w http.ResponseWriter, m Message, event string, echo bool, guild string) {
	body := s.messageJSON(m)
	writeJSON(w, http.StatusOK, body)
	if echo {
		if guild != "" {
			body["guild_id"] = guild
		}
		s.Dispatch(event, body)
	}
}

func (s *Server) handleTyping(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.typings = append(s.typings, r.PathValue("id"))
	s.typingCalls = append(s.typingCalls, Typing{ChannelID: r.PathValue("id"), At: time.Now()})
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// webhookInteraction finds the acknowledged interaction behind a webhook token.
func (s *Server) webhookInteraction(w http.ResponseWriter, r *http.Request) (*interaction, bool) {
	s.mu.Lock()
	in := s.tokens[r.PathValue("token")]
	ok := r.PathValue("app") == s.AppID && in != nil && in.acked && s.Now().Sub(in.issued) < 15*time.Minute
	s.mu.Unlock()
	if !ok {
		discordError(w, http.StatusNotFound, 10015, "Unknown Webhook")
	}
	return in, ok
}

// handleWebhookEdit edits an interaction's original response (@original) or one of
// its follow-ups. The original response of a command is created by its first edit
// (it was "thinking" until then) and edited in place after; that of a component
// interaction is the message the component is on.
func (s *Server) handleWebhookEdit(w http.ResponseWriter, r *http.Request) {
	in, ok := s.webhookInteraction(w, r)
	if !ok {
		return
	}
	var b editBody
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	mid := r.PathValue("mid")
	s.mu.Lock()
	target := mid
	if mid == "@original" {
		target = in.original
	}
	if i, ok := s.byID[target]; ok && target != "" {
		m := s.messages[i]
		s.mu.Unlock()
		if m.InteractionToken != in.token && m.ID != in.message {
			discordError(w, http.StatusNotFound, 10008, "Unknown Message")
			return
		}
		s.applyEdit(w, target, m.ChannelID, b, "webhook")
		return
	}
	if mid != "@original" {
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	pb := b.post()
	s.mu.Unlock()
	selects, err := checkPost(pb)
	if err == errEmptyMessage {
		discordError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	if err != nil {
		invalidForm(w, err)
		return
	}
	s.mu.Lock()
	m := s.recordLocked(pb, selects, "", "edit-original", in.token)
	m.Ephemeral = in.ephemeral
	s.storeLocked(m)
	in.original = m.ID
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.messageJSON(m))
}

func (s *Server) handleFollowup(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.webhookInteraction(w, r); !ok {
		return
	}
	var b postBody
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	selects, err := checkPost(b)
	if err == errEmptyMessage {
		discordError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	if err != nil {
		invalidForm(w, err)
		return
	}
	s.mu.Lock()
	m := s.recordLocked(b, selects, "", "followup", r.PathValue("token"))
	s.storeLocked(m)
	s.mu.Unlock()
	if r.URL.Query().Get("wait") == "true" {
		writeJSON(w, http.StatusOK, s.messageJSON(m))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Interaction types and the callback types Discord accepts for each.
// https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type
var callbackTypes = map[int][]int{
	2: {4, 5, 9},       // application command
	3: {4, 5, 6, 7, 9}, // message component: 6 deferred update, 7 update message
	4: {8},             // autocomplete
}

func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Type int `json:"type"`
		Data *struct {
			postBody
			Choices []struct {
				Name  string `json:"name"`
				Value any    `json:"value"`
			} `json:"choices"`
		} `json:"data"`
	}
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	now := time.Now()
	s.mu.Lock()
	in := s.interactions[r.PathValue("id")]
	switch {
	case in == nil || in.token != r.PathValue("token") || now.Sub(in.dispatched) > s.InteractionDeadline:
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10062, "Unknown interaction")
		return
	case in.acked:
		s.mu.Unlock()
		discordError(w, http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
		return
	case !slices.Contains(callbackTypes[in.typ], b.Type):
		s.mu.Unlock()
		invalidForm(w, fmt.Errorf("type: callback type %d is not valid for interaction type %d", b.Type, in.typ))
		return
	}
	if b.Data != nil && len(b.Data.Choices) > 0 {
		// Autocomplete: at most 25 choices, each name and value 1 to 100
		// characters (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-choice-structure).
		bad := len(b.Data.Choices) > maxSelectOptions
		for _, c := range b.Data.Choices {
			v := fmt.Sprint(c.Value)
			bad = bad || len([]rune(c.Name)) < 1 || len([]rune(c.Name)) > maxOptionText || len([]rune(v)) > maxOptionText
		}
		if bad {
			s.mu.Unlock()
			invalidForm(w, fmt.Errorf("data.choices: 1 to %d choices, names and values of 1 to %d characters", maxSelectOptions, maxOptionText))
			return
		}
	}
	var selects []Select
	if b.Data != nil && (b.Type == 4 || b.Type == 7) {
		var err error
		if selects, err = parseComponents(b.Data.Components); err != nil {
			s.mu.Unlock()
			invalidForm(w, err)
			return
		}
	}
	in.acked = true
	rec := InteractionResponse{InteractionID: in.id, Token: in.token, Type: b.Type, At: now, Latency: now.Sub(in.dispatched)}
	if b.Data != nil {
		rec.Content, rec.Flags = b.Data.Content, b.Data.Flags
		in.ephemeral = b.Data.Flags&flagEphemeral != 0
		for _, c := range b.Data.Choices {
			rec.Choices = append(rec.Choices, Choice{Name: c.Name, Value: fmt.Sprint(c.Value)})
		}
		if b.Type == 4 {
			m := s.recordLocked(b.Data.postBody, selects, "", "callback", in.token)
			s.storeLocked(m)
			in.original = m.ID
		}
	}
	if b.Type == 6 || b.Type == 7 {
		in.original = in.message // the component's message is the one to update
	}
	s.responses = append(s.responses, rec)
	s.mu.Unlock()
	if b.Type == 7 && b.Data != nil {
		eb := editBody{Content: &b.Data.Content, AllowedMentions: b.Data.AllowedMentions, Components: b.Data.Components}
		s.applyEdit(discardWriter{}, in.message, s.channelOf(in.message), eb, "callback")
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCommands(w http.ResponseWriter, r *http.Request) {
	var cmds []*discordgo.ApplicationCommand
	if err := readBody(r, &cmds); err != nil {
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

// ---- dispatch helpers ----

// SendMessage dispatches MESSAGE_CREATE and returns the message id.
func (s *Server) SendMessage(m Msg) string {
	s.mu.Lock()
	id := s.newID()
	s.known[id] = m.AuthorID
	s.where[id] = m.ChannelID
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
	author := map[string]any{"id": m.AuthorID, "username": name, "bot": m.Bot}
	s.mu.Lock()
	s.rememberLocked(id, m, author)
	body := s.saidJSONLocked(s.said[id], true)
	s.mu.Unlock()
	body["timestamp"] = time.Now().UTC().Format(time.RFC3339)
	if m.MentionBot {
		body["mentions"] = []any{s.botUser()}
	}
	if m.GuildID != "" {
		body["guild_id"] = m.GuildID
	}
	if s.contentWithheld(m) {
		body["content"], body["attachments"] = "", []any{} // no MESSAGE_CONTENT intent, no mention of the bot, not a DM
	}
	s.Dispatch("MESSAGE_CREATE", body)
	return id
}

// contentWithheld reports whether Discord would send m without its content: the
// session lacks MESSAGE_CONTENT and m is a guild message that does not mention the
// bot. https://discord.com/developers/docs/events/gateway#message-content-intent
func (s *Server) contentWithheld(m Msg) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.identifies) == 0 || m.GuildID == "" || m.MentionBot {
		return false
	}
	return s.identifies[len(s.identifies)-1]&int(discordgo.IntentsMessageContent) == 0
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
	in := &interaction{id: id, token: token, dispatched: time.Now(), issued: s.Now(), typ: typ}
	s.interactions[id], s.tokens[token] = in, in
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
// interaction id and token. The deadline for its first response starts now.
func (s *Server) SendCommand(c Command) (id, token string) { return s.interaction(2, c) }

// SendAutocomplete dispatches an autocomplete interaction (mark the option being typed
// Focused); it returns the interaction id and token.
func (s *Server) SendAutocomplete(c Command) (id, token string) { return s.interaction(4, c) }

// ---- recordings ----

// Messages returns every message posted so far, in order, each in its latest
// version (Versions holds the earlier ones; deleted ones are marked Deleted).
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = m.clone()
	}
	return out
}

// InteractionResponses returns every accepted interaction callback so far.
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

// Identifies returns the intents of every Identify received (refused ones too).
func (s *Server) Identifies() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.identifies...)
}

// LastShard is the shard of the last Identify (nil = none sent).
func (s *Server) LastShard() *[2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastShard
}

// OverIdentifies is how many identifies came with no budget left (each would have
// made Discord reset the token).
func (s *Server) OverIdentifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overIdentify
}

// Resumes is how many op 6 Resume were accepted.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// ResumePaths returns the path ("/gw/" or "/gw-resume/") of every Resume received.
func (s *Server) ResumePaths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.resumePaths...)
}

// Closes returns the close code of every close frame the client sent.
func (s *Server) Closes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.closes...)
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
