// Package fakeslack is a local fake of the parts of Slack that detour uses: the Web API
// methods (auth.test, apps.connections.open, chat.postMessage, chat.postEphemeral,
// chat.update, chat.delete, chat.startStream, chat.appendStream, chat.stopStream,
// assistant.threads.setStatus, setSuggestedPrompts and setTitle, conversations.info,
// response_url targets) and the Socket Mode WebSocket (hello, ping frames, events_api,
// slash_commands and interactive envelopes, acks, disconnects). It lets the real
// slack-go client run end to end on 127.0.0.1.
//
// Usage:
//
//	srv := fakeslack.New()
//	srv.Start()
//	defer srv.Close()
//	api := slack.New("xoxb-…", slack.OptionAPIURL(srv.URL()), slack.OptionAppLevelToken("xapp-…"))
//
// Every post is recorded (Posts, WaitPost); every ack too (Acks, WaitAck); every Web
// API call with its arguments and how it was answered (CallLog, CallsOf, WaitCall);
// and every message as Slack shows it now, with the texts it showed before
// (Messages, AllMessages, WaitMessages). Faults are injected with RateLimitNext,
// FailNext, Slow, DropAcks, Disconnect, SendDisconnect, Redeliver, AppRateLimited and
// RefuseStreaming. AssistantThreadStarted and AssistantMessage act in Slack's AI app
// container; Pick chooses an option of a posted static select.
//
// # Strictness
//
// The fake holds a client to Slack's documented rules, so code that breaks one of
// them fails here and not in a customer's workspace:
//
//   - Posting pace. chat.postMessage allows about one message per second per
//     channel (https://docs.slack.dev/apis/web-api/rate-limits/, "Posting messages";
//     https://docs.slack.dev/reference/methods/chat.postMessage/, "Rate limiting").
//     A post to a channel sooner than PostInterval (1 s) after the previous accepted
//     one there is refused with HTTP 429, a Retry-After header (whole seconds) and
//     {"ok":false,"error":"ratelimited"}, and recorded in Throttles. The fake
//     grants no burst; Now is its clock (give it the client's clock when the
//     client's waits are virtual).
//   - Acknowledgement deadline. Slack expects every Socket Mode envelope to be
//     acknowledged within 3 seconds and otherwise retries the event
//     (https://docs.slack.dev/apis/events-api/using-socket-mode/,
//     https://docs.slack.dev/apis/events-api/#retries). An events_api envelope not
//     acked within AckTimeout (3 s, real time) is sent again in a new envelope with
//     retry_attempt n and retry_reason "timeout", up to MaxRetries (3) times, on any
//     open socket. An envelope pushed while no socket is open is not queued and
//     flushed on the next connection: it is delivered by that retry, AckTimeout
//     later. Slash commands are not retried: Slack shows the user a timeout instead.
//     DropAcks loses acks on the way, to provoke a retry.
//   - Disconnect reasons (https://docs.slack.dev/apis/events-api/using-socket-mode/,
//     "Disconnect events"): "warning" and "refresh_requested" leave the socket open
//     for DisconnectGrace (10 s) and then close it, so a client must reconnect by
//     itself; "link_disabled" (Socket Mode turned off for the app) closes the socket
//     and apps.connections.open answers {"ok":false,"error":"link_disabled"} until
//     EnableLink (Slack does not document that error code; it is the fake's);
//     "too_many_websockets" is sent, and the socket closed, to a connection beyond
//     MaxSockets (10) open sockets per app.
//   - Several sockets per app. Up to MaxSockets connections stay open at once and each
//     envelope goes to one of them, round robin, as Slack spreads events over an
//     app's connections (https://docs.slack.dev/apis/events-api/using-socket-mode/,
//     "Using multiple connections"). Mention, with OnlyMentions false, also sends the
//     message.channels twin of the app_mention (same channel and ts, its own event
//     id), which may land on another socket.
//   - Events budget. Slack delivers at most 30,000 events per hour per workspace to an
//     app; past it, events are dropped and an app_rate_limited event is sent
//     (https://docs.slack.dev/reference/events/app_rate_limited/,
//     https://docs.slack.dev/apis/web-api/rate-limits/, "Events API"). Past
//     HourlyEventLimit events within an hour of Now, an event is dropped (recorded in
//     Dropped) and one app_rate_limited envelope per minute is sent. AppRateLimited
//     sends one at will.
//   - Mention detection. Whatever Slack would render as a live mention or reference in
//     posted text is recorded in Post.Mentions (see LiveMentions): "<!…>" (@here,
//     @channel, @everyone, <!subteam^…> user groups), "<@U…>" users and "<#C…>"
//     channels in message text, mrkdwn and markdown blocks
//     (https://docs.slack.dev/messaging/formatting-message-text/); plain @here,
//     @channel, @everyone and @names when the post asks Slack to link names
//     (link_names, parse=full) and in mrkdwn text objects without verbatim: true
//     (https://docs.slack.dev/reference/block-kit/composition-objects/text-object/);
//     user, usergroup, broadcast and channel elements of rich_text blocks.
//
// # Scopes, membership and sizes
//
//   - Scopes. An app installed from a manifest (InstallManifest), or given Scopes,
//     has exactly those bot scopes; a method needing one it lacks is refused with
//     {"ok":false,"error":"missing_scope","needed":…,"provided":…}, as Slack answers
//     ("missing_scope" in every method's errors, e.g.
//     https://docs.slack.dev/reference/methods/chat.postMessage). Each
//     method's scopes are those of its reference page (rules.go); conversations.info
//     needs the read scope of the conversation's kind.
//   - Events. A manifest without message.channels gets mentions and DMs only.
//   - Membership. After Leave(channel) the bot is no member there: chat.postMessage,
//     chat.postEphemeral and chat.startStream answer not_in_channel
//     (https://docs.slack.dev/reference/methods/chat.postMessage, "Errors") and
//     conversations.info says is_member false.
//   - Sizes. Text past 40,000 characters is refused with msg_too_long, a message
//     of more than 50 blocks with invalid_blocks
//     (https://docs.slack.dev/reference/block-kit/blocks), markdown_text past
//     12,000 characters with msg_too_long (below).
//
// # Live replies
//
//   - Method tiers. Slack limits each Web API method per workspace per minute by its
//     tier (https://docs.slack.dev/apis/web-api/rate-limits/: Tier 2 20+, Tier 3 50+,
//     Tier 4 100+ per minute). The fake allows exactly the tier's number of accepted
//     calls in any 60 seconds of Now and answers the next with HTTP 429, Retry-After
//     (until a call leaves the minute) and "ratelimited", recorded in Throttles:
//     chat.startStream Tier 2 (https://docs.slack.dev/reference/methods/chat.startStream;
//     slack-morphism's client applies Tier 2 to it too), chat.appendStream
//     Tier 4 (https://docs.slack.dev/reference/methods/chat.appendStream),
//     chat.stopStream Tier 2 (https://api.slack.com/methods/chat.stopStream),
//     chat.update and chat.delete Tier 3
//     (https://docs.slack.dev/reference/methods/chat.update), setSuggestedPrompts
//     Tier 4 (https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts)
//     and setTitle, for which we found no published tier, Tier 4 too.
//     assistant.threads.setStatus has "special rate limits" with no published number
//     (https://docs.slack.dev/reference/methods/assistant.threads.setStatus): the fake
//     limits it only when MethodLimits says so; RateLimitNext provokes 429s.
//     MethodLimits overrides any of these.
//   - Streaming (https://docs.slack.dev/reference/methods/chat.startStream,
//     .../chat.appendStream, .../chat.stopStream). A stream is a reply: chat.startStream
//     without thread_ts is refused (invalid_arguments); outside a DM it needs
//     recipient_team_id and recipient_user_id (missing_recipient_team_id,
//     missing_recipient_user_id). markdown_text holds at most 12,000 characters
//     (msg_too_long); chat.appendStream needs text (no_text) and a message still
//     streaming (message_not_in_streaming_state after chat.stopStream). A streamed
//     message shows its Markdown as a markdown block and has no text of its own.
//     RefuseStreaming makes all three methods answer that error, like a workspace or
//     plan without them.
//   - Editing (https://docs.slack.dev/reference/methods/chat.update). chat.update
//     keeps a message's blocks unless the call sends blocks ("[]" removes them), so
//     editing a streamed message without replacing its blocks leaves the streamed
//     text showing. A message still streaming cannot be edited (cant_update_message):
//     Slack documents no answer for that case, so the fake takes the strict one and a
//     client stops the stream first. chat.delete removes a message.
//   - Assistant threads. setStatus needs channel_id and thread_ts (invalid_thread_ts);
//     the status shows until the bot posts a message in the thread, is set to "", or
//     two minutes of Now pass ("A two minute timeout applies, which will cause the
//     status to be removed if no message has been sent"). setSuggestedPrompts takes
//     one to four prompts, each with a title and a message (invalid_arguments).
//   - Pickers. A static select must fit Slack's sizes (at most 100 options, option
//     text 75 characters, value 150, block_id 255, a section's text 3,000;
//     https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element/),
//     else the post is refused with invalid_blocks. Pick sends the block_actions
//     payload Slack sends over Socket Mode (an "interactive" envelope, not retried)
//     for an option that post offers, and only for the person an ephemeral post was
//     shown to.
package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
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
	At        time.Time       // when the fake accepted it (the fake's clock)
	// Mentions lists every live mention Slack would render from this post: "<!here>",
	// "<@U123>", "@channel" (with link_names), "rich_text:user:U1", ...
	Mentions []string
}

// Shown is what a reader sees of the post, as Message.Shown: its text and the
// text in its blocks.
func (p Post) Shown() string { return Message{Text: p.Text, Blocks: p.Blocks}.Shown() }

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
	// Twin is the message.channels event sent with a channel mention (Mention only).
	Twin *Sent
	// Dropped is true when the event was not delivered: over the hourly events
	// budget, or not subscribed (OnlyMentions).
	Dropped bool
}

// Throttle is one HTTP 429 the fake answered.
type Throttle struct {
	Method     string
	Channel    string
	RetryAfter int  // seconds
	Injected   bool // from RateLimitNext rather than the posting pace
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
	// Now is the clock of the posting pace and the events budget (default time.Now).
	Now func() time.Time
	// PostInterval is the per-channel chat.postMessage pace (default 1 s; < 0 = off).
	PostInterval time.Duration
	// AckTimeout is how long an events_api envelope may stay unacknowledged before it
	// is sent again (default 3 s; < 0 = never).
	AckTimeout time.Duration
	// MaxRetries is how often an unacknowledged event is sent again (default 3).
	MaxRetries int
	// MaxSockets is how many Socket Mode connections may be open at once (default 10).
	MaxSockets int
	// DisconnectGrace is how long a socket told "warning" or "refresh_requested"
	// stays open (default 10 s).
	DisconnectGrace time.Duration
	// HourlyEventLimit is the events budget per hour (default 30,000; < 0 = none).
	HourlyEventLimit int
	// OnlyMentions models an app subscribed to app_mention and message.im only
	// (slack-manifest-mentions.yaml): no message.channels/groups/mpim events.
	OnlyMentions bool
	// GroupDMs are the conversations that are group DMs (AddGroupDM).
	groupDMs map[string]bool
	// MethodLimits overrides DefaultMethodLimits: calls per minute per workspace
	// for a method (0 = unlimited).
	MethodLimits map[string]int
	// RefuseStreaming, when set, is the error chat.startStream, chat.appendStream
	// and chat.stopStream answer, as in a workspace without streaming (for
	// example "unknown_method" or "not_allowed").
	RefuseStreaming string
	// RepliesPageSize is the most replies a conversations.replies page holds
	// (default 1000, Slack's maximum limit; history.go).
	RepliesPageSize int
	// Scopes, when set, are the bot token's scopes (InstallManifest sets them
	// from a manifest); nil grants every scope.
	Scopes []string
	// HomeTabOff is an app whose manifest does not enable the Home tab
	// (features.app_home.home_tab_enabled): views.publish answers not_enabled
	// and app_home_opened is not delivered (home.go). InstallManifest sets it.
	HomeTabOff bool

	srv *httptest.Server
	// homes are the Home tab views published, by user (home.go).
	homes map[string][]HomeView

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every recorded change
	posts        []Post
	acks         []Ack
	throttles    []Throttle
	dropped      []Sent
	opens        int // apps.connections.open calls answered ok
	connects     int // WebSocket upgrades accepted
	refused      int // sockets refused with too_many_websockets
	calls        map[string]int
	conns        []*wsConn // open sockets, oldest first
	rr           int       // round-robin cursor over conns
	byEvent      map[string]map[string]any
	envs         map[string]*envelope // unacked events_api envelopes by envelope id
	rateLimit    map[string][]int
	failNext     map[string][]string
	slow         map[string]*slowGate
	lastPost     map[string]time.Time // channel → last accepted chat.postMessage
	eventTimes   []time.Time          // deliveries within the last hour (events budget)
	limitedMin   int64                // minute of the last app_rate_limited sent
	dropAcks     int
	linkOff      bool
	seq          int
	closed       bool
	connWG       sync.WaitGroup
	timerWG      sync.WaitGroup
	connCtx      context.Context
	connCancel   context.CancelFunc
	rateLimited  int            // app_rate_limited envelopes sent
	inflight     map[string]int // channel → chat.postMessage calls being answered
	retried      int            // envelopes sent again after a missed ack
	retriedAcked int            // of those, acked
	deliveries   map[int]int    // socket number → envelopes written
	callLog      []Call
	tierCalls    map[string][]time.Time // method → accepted calls within the last minute
	msgs         map[string]*Message    // channel/ts → latest version
	msgOrder     []string
	statuses     map[string]threadStatus // channel/thread_ts → assistant status
	notIn        map[string]bool         // channels the bot is not a member of
	connectedAt  []time.Time             // when each socket was accepted (Now)
	saidByKey    map[string]*said        // channel/ts → a person's message (history.go)
	hostedFiles  map[string]*hosted      // file id → file (files.go)
	downloads    []Download
	signin       signIn
}

// envelope is an events_api delivery waiting for its ack.
type envelope struct {
	eventID string
	attempt int
	timer   *time.Timer
}

// acked records the ack of envelope envID; s.mu must be held.
func (s *Server) ackedLocked(envID string) {
	e, ok := s.envs[envID]
	if !ok {
		return
	}
	e.timer.Stop()
	delete(s.envs, envID)
	if e.attempt > 0 {
		s.retriedAcked++
	}
}

type wsConn struct {
	id   int // socket number, 1 = the first accepted
	c    *websocket.Conn
	wmu  sync.Mutex
	done chan struct{} // closed when the reader ends
}

func (w *wsConn) write(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return w.c.WriteMessage(websocket.TextMessage, b)
}

// New returns an unstarted fake with the default identities and Slack's limits.
func New() *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		TeamID:           DefaultTeamID,
		BotUserID:        DefaultBotUserID,
		BotID:            DefaultBotID,
		AppID:            DefaultAppID,
		PingInterval:     50 * time.Millisecond,
		Now:              time.Now,
		PostInterval:     time.Second,
		AckTimeout:       3 * time.Second,
		MaxRetries:       3,
		MaxSockets:       10,
		DisconnectGrace:  10 * time.Second,
		HourlyEventLimit: 30000,
		changed:          make(chan struct{}),
		calls:            map[string]int{},
		byEvent:          map[string]map[string]any{},
		envs:             map[string]*envelope{},
		rateLimit:        map[string][]int{},
		failNext:         map[string][]string{},
		slow:             map[string]*slowGate{},
		inflight:         map[string]int{},
		deliveries:       map[int]int{},
		lastPost:         map[string]time.Time{},
		tierCalls:        map[string][]time.Time{},
		groupDMs:         map[string]bool{},
		msgs:             map[string]*Message{},
		statuses:         map[string]threadStatus{},
		notIn:            map[string]bool{},
		connCtx:          ctx,
		connCancel:       cancel,
	}
}

// Start listens on 127.0.0.1 and serves.
func (s *Server) Start() {
	if s.Now == nil {
		s.Now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/link/", s.handleSocket)
	mux.HandleFunc("/resp/", s.handleResponseURL)
	mux.HandleFunc("GET /files-pri/", s.handleFile)
	s.srv = httptest.NewServer(mux)
}

// URL is the Web API base for slack.OptionAPIURL: "http://127.0.0.1:P/api/".
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close drops every socket, stops the retry timers and the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	for _, e := range s.envs {
		e.timer.Stop()
	}
	s.mu.Unlock()
	s.connCancel()
	for _, c := range conns {
		_ = c.c.Close()
	}
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
	s.connWG.Wait()
	s.timerWG.Wait()
	s.closeSignIn()
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

// slowGate delays the posts of one channel until d passes or release closes.
type slowGate struct {
	d       time.Duration
	release chan struct{}
}

// Slow makes every chat.postMessage to channel take d (real time) before it is
// answered. Slow(channel, 0) ends it and releases the posts waiting; a client that
// gives up, or Close, ends a wait too.
func (s *Server) Slow(channel string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.slow[channel]; g != nil {
		close(g.release)
		delete(s.slow, channel)
	}
	if d > 0 {
		s.slow[channel] = &slowGate{d: d, release: make(chan struct{})}
	}
}

// InFlight is how many chat.postMessage calls to channel are being answered now.
func (s *Server) InFlight(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[channel]
}

// WaitInFlight waits until n chat.postMessage calls to channel are in flight.
func (s *Server) WaitInFlight(channel string, n int, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.inflight[channel] >= n }) {
		return fmt.Errorf("fakeslack: want %d posts in flight to %s, have %d", n, channel, s.InFlight(channel))
	}
	return nil
}

// Retried is how many envelopes were sent again because their ack did not come.
func (s *Server) Retried() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retried
}

// WaitRetried waits until at least n envelopes were sent again and acked.
func (s *Server) WaitRetried(n int, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return s.retriedAcked >= n }) {
		return fmt.Errorf("fakeslack: want %d retried envelopes acked, have %d (sent %d)", n, s.retriedAcked, s.Retried())
	}
	return nil
}

// Deliveries counts the envelopes written to each socket, by socket number (1 =
// the first accepted).
func (s *Server) Deliveries() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for k, v := range s.deliveries {
		out[k] = v
	}
	return out
}

// DropAcks makes the fake lose the next n acks, as if they never arrived: their
// envelopes are retried after AckTimeout.
func (s *Server) DropAcks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAcks += n
}

// EnableLink turns Socket Mode back on after a link_disabled disconnect.
func (s *Server) EnableLink() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkOff = false
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

// Throttles returns every HTTP 429 answered, in order.
func (s *Server) Throttles() []Throttle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Throttle(nil), s.throttles...)
}

// Dropped returns the events that were not delivered (events budget, subscriptions).
func (s *Server) Dropped() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.dropped...)
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

// ConnectTimes is when each Socket Mode WebSocket was accepted, on Now.
func (s *Server) ConnectTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.connectedAt...)
}

// Refused is how many sockets were turned away with too_many_websockets.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// OpenSockets is how many Socket Mode connections are open now.
func (s *Server) OpenSockets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
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
	if !s.waitFor(timeout, func() bool { return s.connects >= n && len(s.conns) > 0 }) {
		return fmt.Errorf("fakeslack: want %d connections, have %d after %s", n, s.Connects(), timeout)
	}
	return nil
}

// WaitOpen waits until n sockets are open at once.
func (s *Server) WaitOpen(n int, timeout time.Duration) error {
	if !s.waitFor(timeout, func() bool { return len(s.conns) >= n }) {
		return fmt.Errorf("fakeslack: want %d open sockets, have %d after %s", n, s.OpenSockets(), timeout)
	}
	return nil
}

// Disconnect drops every WebSocket without a goodbye (a network failure); the
// clients must call apps.connections.open again and redial.
func (s *Server) Disconnect() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.c.Close()
	}
}

// RequestDisconnect sends Slack's {"type":"disconnect","reason":"refresh_requested"}.
func (s *Server) RequestDisconnect() error { return s.SendDisconnect("refresh_requested") }

// SendDisconnect sends {"type":"disconnect","reason":reason} on every open socket
// and applies the reason's consequence (see the package doc): "warning" and
// "refresh_requested" close the sockets DisconnectGrace later, "link_disabled"
// closes them now and refuses new ones until EnableLink.
func (s *Server) SendDisconnect(reason string) error {
	s.mu.Lock()
	conns := append([]*wsConn(nil), s.conns...)
	if reason == "link_disabled" {
		s.linkOff = true
	}
	s.mu.Unlock()
	b := disconnectFrame(reason)
	var errs []error
	for _, c := range conns {
		if err := c.write(b); err != nil {
			errs = append(errs, err)
		}
		switch reason {
		case "link_disabled", "too_many_websockets":
			s.drop(c)
		default:
			s.closeAfter(c, s.DisconnectGrace)
		}
	}
	return errors.Join(errs...)
}

func disconnectFrame(reason string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "fakeslack"}})
	return b
}

// closeAfter closes c after d unless it ends first.
func (s *Server) closeAfter(c *wsConn, d time.Duration) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.timerWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.timerWG.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			s.drop(c)
		case <-c.done:
		case <-s.connCtx.Done():
		}
	}()
}

// drop forgets c and closes it.
func (s *Server) drop(c *wsConn) {
	s.mu.Lock()
	s.removeLocked(c)
	s.mu.Unlock()
	_ = c.c.Close()
}

func (s *Server) removeLocked(c *wsConn) {
	for i, x := range s.conns {
		if x == c {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			s.notifyLocked()
			return
		}
	}
}

// deliver writes one frame to one open socket, round robin; false when none is
// open (or every write failed).
func (s *Server) deliver(b []byte) bool {
	s.mu.Lock()
	n := len(s.conns)
	order := make([]*wsConn, 0, n)
	for i := range n {
		order = append(order, s.conns[(s.rr+i)%n])
	}
	s.rr++
	s.mu.Unlock()
	for _, c := range order {
		if c.write(b) == nil {
			s.mu.Lock()
			s.deliveries[c.id]++
			s.mu.Unlock()
			return true
		}
	}
	return false
}

// budgetLocked reports whether one more event fits the hourly budget, and
// records it when it does; when it does not, it reports whether an
// app_rate_limited event is due (once per minute).
func (s *Server) budgetLocked() (ok, notify bool, minute int64) {
	if s.HourlyEventLimit < 0 {
		return true, false, 0
	}
	now := s.Now()
	keep := s.eventTimes[:0]
	for _, t := range s.eventTimes {
		if now.Sub(t) < time.Hour {
			keep = append(keep, t)
		}
	}
	s.eventTimes = keep
	if len(s.eventTimes) < s.HourlyEventLimit {
		s.eventTimes = append(s.eventTimes, now)
		return true, false, 0
	}
	minute = now.Unix() / 60 * 60
	if minute != s.limitedMin {
		s.limitedMin = minute
		return false, true, minute
	}
	return false, false, minute
}

// PushEvent sends an events_api envelope carrying the given inner event; it fills
// event_id, team_id and envelope_id and returns them. Past the events budget the
// event is dropped (Sent.Dropped).
func (s *Server) PushEvent(event map[string]any) Sent {
	ts, _ := event["ts"].(string)
	s.mu.Lock()
	n := s.nextLocked()
	eventID := fmt.Sprintf("Ev%06d", n)
	outer := map[string]any{
		"token": "verif", "team_id": s.TeamID, "api_app_id": s.AppID, "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000 + n, "event": event,
	}
	s.byEvent[eventID] = outer
	s.rememberLocked(event)
	ok, notify, minute := s.budgetLocked()
	if !ok {
		sent := Sent{EventID: eventID, TS: ts, Dropped: true}
		s.dropped = append(s.dropped, sent)
		s.notifyLocked()
		s.mu.Unlock()
		if notify {
			s.pushRateLimited(minute)
		}
		return sent
	}
	s.mu.Unlock()
	envID := s.send(eventID, 0)
	return Sent{EnvelopeID: envID, EventID: eventID, TS: ts}
}

// send delivers event eventID in a new envelope (attempt 0 = first delivery) and
// arms its ack deadline. It returns the envelope id.
func (s *Server) send(eventID string, attempt int) string {
	s.mu.Lock()
	outer := s.byEvent[eventID]
	envID := fmt.Sprintf("env-%06d", s.nextLocked())
	env := map[string]any{"envelope_id": envID, "type": "events_api", "accepts_response_payload": false,
		"retry_attempt": attempt, "payload": outer}
	if attempt > 0 {
		env["retry_reason"] = "timeout"
	}
	if s.AckTimeout >= 0 && !s.closed {
		e := &envelope{eventID: eventID, attempt: attempt}
		e.timer = time.AfterFunc(s.AckTimeout, func() { s.expire(envID) })
		s.envs[envID] = e
	}
	s.mu.Unlock()
	b, _ := json.Marshal(env)
	s.deliver(b) // undelivered: the ack deadline passes and Slack retries
	return envID
}

// expire retries an envelope whose ack did not come in time.
func (s *Server) expire(envID string) {
	s.mu.Lock()
	e, ok := s.envs[envID]
	if !ok || s.closed {
		s.mu.Unlock()
		return
	}
	delete(s.envs, envID)
	retry := e.attempt < s.MaxRetries
	if retry {
		s.timerWG.Add(1)
	}
	s.mu.Unlock()
	if retry {
		defer s.timerWG.Done()
		s.mu.Lock()
		s.retried++
		s.mu.Unlock()
		s.send(e.eventID, e.attempt+1)
	}
}

// Redeliver sends the event with eventID again in a new envelope with retry_attempt 1,
// as Slack does when it believes an ack was missed.
func (s *Server) Redeliver(eventID string) (Sent, error) {
	s.mu.Lock()
	outer, ok := s.byEvent[eventID]
	s.mu.Unlock()
	if !ok {
		return Sent{}, errors.New("fakeslack: unknown event id " + eventID)
	}
	envID := s.send(eventID, 1)
	ev, _ := outer["event"].(map[string]any)
	ts, _ := ev["ts"].(string)
	return Sent{EnvelopeID: envID, EventID: eventID, TS: ts}, nil
}

// AppRateLimited sends the app_rate_limited event Slack sends when it drops an
// app's events for the workspace (no inner event).
func (s *Server) AppRateLimited() Sent {
	return s.pushRateLimited(s.Now().Unix() / 60 * 60)
}

func (s *Server) pushRateLimited(minute int64) Sent {
	s.mu.Lock()
	envID := fmt.Sprintf("env-%06d", s.nextLocked())
	s.rateLimited++
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"envelope_id": envID, "type": "events_api", "accepts_response_payload": false,
		"retry_attempt": 0, "payload": map[string]any{"token": "verif", "type": "app_rate_limited", "team_id": s.TeamID,
			"minute_rate_limited": minute, "api_app_id": s.AppID}})
	s.deliver(b)
	return Sent{EnvelopeID: envID}
}

// Mention sends an app_mention "<@BOT> text" from user in channel (threadTS "" = top
// level). Unless OnlyMentions, the message.channels twin Slack sends for the same
// message follows (Sent.Twin), as its own event.
func (s *Server) Mention(channel, user, text, threadTS string) Sent {
	ev := map[string]any{
		"type": "app_mention", "user": user, "channel": channel, "ts": s.NewTS(),
		"text": "<@" + s.BotUserID + "> " + text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	ev["event_ts"] = ev["ts"]
	sent := s.PushEvent(ev)
	if !s.OnlyMentions && !strings.HasPrefix(channel, "D") {
		twin := map[string]any{"type": "message", "channel_type": s.typeOf(channel)}
		for _, k := range []string{"user", "channel", "ts", "text", "thread_ts", "event_ts"} {
			if v, ok := ev[k]; ok {
				twin[k] = v
			}
		}
		t := s.PushEvent(twin)
		sent.Twin = &t
	}
	return sent
}

// AddGroupDM makes channel a group DM (a multi-person direct message, "mpim"):
// its message events say channel_type "mpim" and conversations.info says
// is_mpim, as Slack's do (https://api.slack.com/events/message.mpim,
// https://docs.slack.dev/reference/objects/conversation-object). Slack's ids of
// group DMs start with G, like those of older private channels.
func (s *Server) AddGroupDM(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupDMs[channel] = true
}

// typeOf is the channel_type of channel's message events.
func (s *Server) typeOf(channel string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groupDMs[channel] {
		return "mpim"
	}
	return channelType(channel)
}

func channelType(channel string) string {
	switch {
	case strings.HasPrefix(channel, "D"):
		return "im"
	case strings.HasPrefix(channel, "G"):
		return "group"
	default:
		return "channel"
	}
}

// ChannelMessage sends a plain message event (message.channels) in channel; threadTS ""
// means top level. The text is sent as is. With OnlyMentions nothing is delivered.
func (s *Server) ChannelMessage(channel, user, text, threadTS string) Sent {
	ev := map[string]any{
		"type": "message", "channel_type": s.typeOf(channel), "user": user, "channel": channel,
		"ts": s.NewTS(), "text": text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	ev["event_ts"] = ev["ts"]
	if s.OnlyMentions {
		sent := Sent{TS: ev["ts"].(string), Dropped: true}
		s.mu.Lock()
		s.dropped = append(s.dropped, sent)
		s.mu.Unlock()
		return sent
	}
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
		"type": "message", "channel_type": channelType(channel), "user": s.BotUserID, "bot_id": s.BotID,
		"channel": channel, "ts": ts, "event_ts": ts, "text": text,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return s.PushEvent(ev)
}

// Slash sends a slash_commands envelope ("/model", "gpt-x") typed by user in channel.
// With no socket open it is lost (Sent.Dropped), as Slack tells the user it failed.
func (s *Server) Slash(command, text, channel, user string) Sent {
	s.mu.Lock()
	n := s.nextLocked()
	envID := fmt.Sprintf("env-%06d", n)
	trigger := fmt.Sprintf("trig-%06d", n)
	s.mu.Unlock()
	respURL := fmt.Sprintf("%s/resp/%d", s.srv.URL, n)
	name := "general"
	if strings.HasPrefix(channel, "D") {
		name = "directmessage"
	}
	b, _ := json.Marshal(map[string]any{
		"envelope_id": envID, "type": "slash_commands", "accepts_response_payload": true,
		"payload": map[string]any{
			"token": "verif", "team_id": s.TeamID, "team_domain": "fake", "channel_id": channel,
			"channel_name": name, "user_id": user, "user_name": "user", "command": command,
			"text": text, "response_url": respURL, "trigger_id": trigger, "api_app_id": s.AppID,
		},
	})
	sent := Sent{EnvelopeID: envID, TriggerID: trigger, ResponseURL: respURL}
	if !s.deliver(b) {
		sent.Dropped = true
		s.mu.Lock()
		s.dropped = append(s.dropped, sent)
		s.mu.Unlock()
	}
	return sent
}

// ---- HTTP handlers ----

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) throttle(w http.ResponseWriter, t Throttle) {
	s.throttles = append(s.throttles, t)
	s.notifyLocked()
	s.mu.Unlock()
	w.Header().Set("Retry-After", strconv.Itoa(t.RetryAfter))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	_ = r.ParseForm()

	s.mu.Lock()
	s.calls[method]++
	ci := s.logCallLocked(method, r.Form)
	defer s.answered(ci)
	if q := s.rateLimit[method]; len(q) > 0 {
		s.rateLimit[method] = q[1:]
		s.outcomeLocked(ci, "ratelimited")
		s.throttle(w, Throttle{Method: method, Channel: channelArg(r.Form), RetryAfter: q[0], Injected: true})
		return
	}
	if q := s.failNext[method]; len(q) > 0 {
		s.failNext[method] = q[1:]
		s.outcomeLocked(ci, q[0])
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
		if s.linkOff {
			s.mu.Unlock()
			writeJSON(w, map[string]any{"ok": false, "error": "link_disabled"})
			return
		}
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
		s.fail(w, ci, "invalid_auth")
		return
	}
	if s.refuse(w, method, r.Form, ci) {
		return
	}
	s.mu.Lock()
	if ra := s.overTierLocked(method); ra > 0 {
		s.outcomeLocked(ci, "ratelimited")
		s.throttle(w, Throttle{Method: method, Channel: channelArg(r.Form), RetryAfter: ra})
		return
	}
	s.mu.Unlock()
	if s.handleLive(w, r, method, token, ci) {
		return
	}

	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake",
			"user": "detour", "team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID})
	case "chat.postMessage", "chat.postEphemeral", "chat.update":
		s.recordPost(w, r, method, token, ci)
	case "conversations.replies":
		s.handleReplies(w, r, ci)
	case "conversations.info":
		ch := r.Form.Get("channel")
		s.mu.Lock()
		mpim, member := s.groupDMs[ch], !s.notIn[ch]
		s.mu.Unlock()
		group := strings.HasPrefix(ch, "G") && !mpim // a private channel made before 2021
		writeJSON(w, map[string]any{"ok": true, "channel": map[string]any{
			"id": ch, "name": "general", "is_channel": strings.HasPrefix(ch, "C"), "is_group": group,
			"is_im": strings.HasPrefix(ch, "D"), "is_mpim": mpim, "is_private": group || mpim, "is_member": member}})
	default:
		s.fail(w, ci, "unknown_method")
	}
}

// channelArg is the channel a call names (channel, or channel_id for the
// assistant methods).
func channelArg(form url.Values) string {
	if c := form.Get("channel"); c != "" {
		return c
	}
	return form.Get("channel_id")
}

func (s *Server) recordPost(w http.ResponseWriter, r *http.Request, method, token string, ci int) {
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
		s.fail(w, ci, "channel_not_found")
		return
	}
	if code := checkBlocks(p.Blocks); code != "" {
		s.fail(w, ci, code)
		return
	}
	_, blocksSent := r.Form["blocks"]
	linkNames := r.Form.Get("link_names") == "1" || r.Form.Get("link_names") == "true" || r.Form.Get("parse") == "full"
	p.Mentions = append(LiveMentions(p.Text, linkNames), blockMentions(p.Blocks)...)

	if method == "chat.postMessage" {
		s.mu.Lock()
		s.inflight[p.Channel]++
		g := s.slow[p.Channel]
		s.notifyLocked()
		s.mu.Unlock()
		if g != nil {
			t := time.NewTimer(g.d)
			select {
			case <-t.C:
			case <-g.release:
			case <-r.Context().Done():
			case <-s.connCtx.Done():
			}
			t.Stop()
		}
		defer func() {
			s.mu.Lock()
			s.inflight[p.Channel]--
			s.notifyLocked()
			s.mu.Unlock()
		}()
	}

	s.mu.Lock()
	now := s.Now()
	if method == "chat.postMessage" && s.PostInterval > 0 {
		if last, ok := s.lastPost[p.Channel]; ok && now.Sub(last) < s.PostInterval {
			wait := s.PostInterval - now.Sub(last)
			s.outcomeLocked(ci, "ratelimited")
			s.throttle(w, Throttle{Method: method, Channel: p.Channel, RetryAfter: int(math.Ceil(wait.Seconds()))})
			return
		}
		s.lastPost[p.Channel] = now
	}
	p.At = now
	p.Ephemeral = method == "chat.postEphemeral"
	switch method {
	case "chat.update":
		p.TS = r.Form.Get("ts")
		if code := s.updateLocked(&p, blocksSent); code != "" {
			s.mu.Unlock()
			s.fail(w, ci, code)
			return
		}
	default:
		p.TS = s.tsLocked()
		s.addMessageLocked(&Message{Channel: p.Channel, ThreadTS: p.ThreadTS, TS: p.TS, Text: p.Text, Blocks: p.Blocks,
			Ephemeral: p.Ephemeral, User: p.User})
	}
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
			"type": "message", "channel_type": channelType(p.Channel), "user": s.BotUserID, "bot_id": s.BotID,
			"channel": p.Channel, "ts": p.TS, "event_ts": p.TS, "text": p.Text,
		}
		if p.ThreadTS != "" {
			ev["thread_ts"] = p.ThreadTS
			ev["parent_user_id"] = "U1"
		}
		if !s.OnlyMentions || strings.HasPrefix(p.Channel, "D") {
			s.PushEvent(ev)
		}
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
	p.Mentions = append(LiveMentions(p.Text, false), blockMentions(p.Blocks)...)
	s.mu.Lock()
	s.calls["response_url"]++
	p.TS = s.tsLocked()
	p.At = s.Now()
	s.posts = append(s.posts, p)
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true})
}

var (
	// reControl finds Slack's control sequences that mention or reference: <!…>, <@…>, <#…>.
	reControl = regexp.MustCompile(`<[!@#][^>]*>`)
	// reNames finds the plain forms Slack links when asked to (link_names, parse=full).
	reNames = regexp.MustCompile(`(?:^|[^\w&])([@#][\w.\-]+)`)
	// reBroadcast finds the plain broadcast words Slack parses in non-verbatim mrkdwn.
	reBroadcast = regexp.MustCompile(`(?:^|[^\w&])(@(?:here|channel|everyone))\b`)
)

// LiveMentions returns what Slack would render as a live mention or reference in
// text: every "<!…>", "<@…>" and "<#…>" control sequence and, when linkNames
// (link_names or parse=full on the post), every plain "@name" and "#channel".
// Escaped text ("&lt;!here&gt;") renders literally and is not reported.
func LiveMentions(text string, linkNames bool) []string {
	out := reControl.FindAllString(text, -1)
	if linkNames {
		for _, m := range reNames.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// blockMentions walks a blocks payload for live mentions: text and mrkdwn
// objects (plain broadcasts count unless verbatim), markdown blocks, and rich_text
// user / usergroup / broadcast / channel elements.
func blockMentions(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return []string{"unreadable blocks"}
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
			typ, _ := x["type"].(string)
			text, _ := x["text"].(string)
			switch typ {
			case "mrkdwn":
				out = append(out, LiveMentions(text, false)...)
				if verbatim, _ := x["verbatim"].(bool); !verbatim {
					for _, m := range reBroadcast.FindAllStringSubmatch(text, -1) {
						out = append(out, m[1])
					}
				}
			case "markdown":
				out = append(out, LiveMentions(text, false)...)
			case "user":
				out = append(out, fmt.Sprint("rich_text:user:", x["user_id"]))
			case "usergroup":
				out = append(out, fmt.Sprint("rich_text:usergroup:", x["usergroup_id"]))
			case "broadcast":
				out = append(out, fmt.Sprint("rich_text:broadcast:", x["range"]))
			case "channel":
				out = append(out, fmt.Sprint("rich_text:channel:", x["channel_id"]))
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) handleSocket(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	wc := &wsConn{c: c, done: make(chan struct{})}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	if len(s.conns) >= s.MaxSockets {
		s.refused++
		s.notifyLocked()
		s.mu.Unlock()
		_ = wc.write(disconnectFrame("too_many_websockets"))
		_ = c.Close()
		return
	}
	s.conns = append(s.conns, wc)
	s.connects++
	s.connectedAt = append(s.connectedAt, s.Now())
	wc.id = s.connects
	open := len(s.conns)
	s.connWG.Add(2)
	s.notifyLocked()
	s.mu.Unlock()

	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": open,
		"connection_info": map[string]any{"app_id": s.AppID},
		"debug_info":      map[string]any{"host": "fakeslack"}})
	if err := wc.write(hello); err != nil {
		s.drop(wc)
	}

	// Pinger: control frames may be written concurrently with other writes.
	go func() {
		defer s.connWG.Done()
		t := time.NewTicker(s.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-wc.done:
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
		defer close(wc.done)
		defer s.drop(wc)
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
			if s.dropAcks > 0 {
				s.dropAcks--
				s.mu.Unlock()
				continue
			}
			s.ackedLocked(a.EnvelopeID)
			s.acks = append(s.acks, Ack(a))
			s.notifyLocked()
			s.mu.Unlock()
		}
	}()
}
