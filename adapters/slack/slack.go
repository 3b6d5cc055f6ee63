// Package slack is detour's Slack channel: it receives mentions, thread follow-ups,
// direct messages and slash commands over Socket Mode (slack-go) and posts replies,
// notices, errors and admin reports through the Web API.
//
// Sessions: a channel thread is one session, "slack:<team>:<channel>:<thread_ts>"
// (a top-level mention starts a thread under itself); a direct-message conversation
// is one, "slack:<team>:<channel>", and so is each chat of Slack's AI app container
// (assistant.go). Slack refuses slash commands in threads, so /model, /new and
// /reset typed in a channel act on the channel's session "slack:<team>:<channel>",
// whose model choice each new thread copies (Inbound.DefaultsFor), and are answered
// ephemerally; in a thread, "!model x" or "@bot /model x" reach the router as plain
// messages and change that thread only.
//
// Slack's limits are kept: every envelope is acknowledged before any work, and one
// the work queue has no room for is answered "busy"; posts keep one per second per
// channel and wait out 429s (send.go); app_rate_limited is logged; MentionsOnly
// reads only mentions and direct messages, for workspaces near 30,000 events an
// hour; a Socket Mode link that keeps closing right after it opens is asked for
// again with a growing wait. EventID is the same for every delivery of one
// message, so replicas on several sockets answer it once.
//
// Live replies (L1-L5, A5; live.go): the thread shows Slack's assistant status
// while a turn runs; the answer grows through chat.startStream / appendStream /
// stopStream, and a failed attempt's stream is deleted and the fallback's started
// below its notice; an answer with choices is an ephemeral select whose pick comes
// back as the chosen command (picker.go).
package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
)

// Name is the adapter (channel) name used in Inbound.Channel and Outbound.Channel.
const Name = "slack"

// Config configures the adapter. AppToken and BotToken are secrets: they are never
// logged and never appear in errors.
type Config struct {
	AppToken            string        // xapp-… app-level token with connections:write (Socket Mode)
	BotToken            string        // xoxb-… bot token
	APIURL              string        // the Web API base (default https://slack.com/api/; tests use a local fake)
	HTTPTimeout         time.Duration // bounds every Web API call (default 10s)
	PingInterval        time.Duration // the most time without a ping from Slack before a redial (default 30s)
	MaxRateLimitRetries int           // most retries of one post after a 429 (0: until Slack takes it or ctx ends)
	MaxRetryWait        time.Duration // caps a single Retry-After wait (default 60s)
	// MentionsOnly (channels.slack.events: mentions) reads only app_mention events
	// and direct messages, so thread follow-ups need a mention too; pair it with
	// slack-manifest-mentions.yaml.
	MentionsOnly bool
	// Memory, when set, is shared by the adapters of one process holding sockets
	// of the same app, so an event handed to any of them is answered once.
	Memory           *Memory
	SuggestedPrompts []string      // offered in a new AI app container chat (channels.slack.suggested_prompts; Slack shows 4)
	StatusRefresh    time.Duration // how often "is thinking…" is set again (default 90s; Slack drops it after 2 minutes)

	Log    *slog.Logger                                     // default slog.Default()
	Models func() []string                                  // when set, the configured models, for the /model help text
	Now    func() time.Time                                 // the clock of the de-duplication caches (default time.Now)
	Sleep  func(ctx context.Context, d time.Duration) error // waits out a Retry-After (default: a timer honouring ctx)
}

const (
	threadMemory = 10000            // threads remembered
	dedupeTTL    = 30 * time.Minute // how long event ids are
	postInterval = time.Second      // chat.postMessage's pace per channel (pacer)
)

// Memory is what an adapter remembers about events and threads.
type Memory struct {
	seen      *adapters.Recent // event ids, trigger ids
	seenMsg   *adapters.Recent // channel/ts of handled messages (app_mention + message twins)
	threads   *adapters.Recent // channel/thread_ts where the bot takes part
	assistant *adapters.Recent // channel/thread_ts of AI app container chats (and "title:" + the titled ones)
	kinds     *adapters.Recent // channel id → its conversation kind (T5)
}

// NewMemory returns a Memory of up to 10,000 threads and of event ids for 30
// minutes, on the clock now (nil = time.Now).
func NewMemory(now func() time.Time) *Memory {
	return &Memory{
		seen:      adapters.NewRecent(50000, dedupeTTL, now),
		seenMsg:   adapters.NewRecent(50000, dedupeTTL, now),
		threads:   adapters.NewRecent(threadMemory, 0, nil),
		assistant: adapters.NewRecent(threadMemory, 0, nil),
		kinds:     adapters.NewRecent(threadMemory, 0, nil),
	}
}

// Adapter is the Slack channel. Create it with New; Run it once.
type Adapter struct {
	cfg Config
	api *slackgo.Client
	log *slog.Logger

	me     atomic.Pointer[self] // who the bot is, from Run's auth.test
	mem    *Memory
	pace   *pacer       // chat.postMessage per channel, and every method's 429 pause
	limits *live.Window // the live-reply methods' per-minute windows, on the same pauses
	// known asks whether a session exists (adapters.SessionLookup), for threads
	// the bot took part in before a restart.
	known atomic.Pointer[func(ctx context.Context, sessionKey string) bool]

	dialMu   sync.Mutex
	lastDial time.Time // when the last Socket Mode link was dialled
	flaps    int       // consecutive links that closed soon after they opened

	connected      atomic.Bool  // a Socket Mode link is up (adapters.Connector)
	warnedMessages atomic.Bool  // MentionsOnly, yet channel message events arrive
	limitedMinute  atomic.Int64 // minute of the last app_rate_limited logged

	queue      int              // events waiting for the dispatcher (256)
	busy       chan struct{}    // "busy" answers being sent (bounded)
	askers     *adapters.Recent // reply target → who last wrote there (ephemeral pickers)
	life       atomic.Pointer[context.Context]
	indicators sync.Map       // channel/thread_ts → *live.Indicator running there
	bg         sync.WaitGroup // calls and streams made for events; Run waits for them
	home       home           // the Home tab's board (home.go)
}

// New builds the adapter; it does not connect (Run does).
func New(cfg Config) (*Adapter, error) {
	if !strings.HasPrefix(cfg.AppToken, "xapp-") {
		return nil, errors.New("slack: app_token must be an app-level token (xapp-…) with connections:write")
	}
	if cfg.BotToken == "" {
		return nil, errors.New("slack: bot_token (xoxb-…) is required")
	}
	if cfg.APIURL != "" {
		u, err := url.Parse(cfg.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("slack: api_url must be an http(s) URL such as https://slack.com/api/")
		}
		if !strings.HasSuffix(cfg.APIURL, "/") {
			cfg.APIURL += "/"
		}
	}
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&cfg.HTTPTimeout, 10*time.Second)
	set(&cfg.PingInterval, 30*time.Second)
	set(&cfg.MaxRetryWait, 60*time.Second)
	set(&cfg.StatusRefresh, 90*time.Second)
	cfg.Log = cmp.Or(cfg.Log, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = adapters.Sleep
	}
	cfg.MaxRateLimitRetries = max(cfg.MaxRateLimitRetries, 0)
	log := cfg.Log.With("channel", Name)
	a := &Adapter{cfg: cfg, log: log, queue: 256, busy: make(chan struct{}, 8)}
	a.me.Store(&self{})
	// The transport times each request once sent: linkWait's wait does not count.
	client := &http.Client{Transport: &webTransport{a: a, base: adapters.Timed(http.DefaultTransport, cfg.HTTPTimeout)}}
	opts := []slackgo.Option{
		slackgo.OptionHTTPClient(client),
		slackgo.OptionAppLevelToken(cfg.AppToken),
		slackgo.OptionLog(slog.NewLogLogger(log.Handler(), slog.LevelDebug)),
	}
	if cfg.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(cfg.APIURL))
	}
	a.mem = cfg.Memory
	if a.mem == nil { // built only when not shared: five caches
		a.mem = NewMemory(cfg.Now)
	}
	a.askers = adapters.NewRecent(threadMemory, 0, nil)
	a.api = slackgo.New(cfg.BotToken, opts...)
	pauses := live.NewPauses(cfg.Now, cfg.Sleep)
	a.pace, a.limits = newPacer(postInterval, pauses), live.NewWindow(pauses, methodLimits)
	return a, nil
}

// Name returns "slack".
func (a *Adapter) Name() string { return Name }

// self is who the bot is in the workspace.
type self struct {
	user, botID, team string
	mention           *regexp.Regexp // a leading mention of the bot
}

// Run connects over Socket Mode and delivers messages to inbox until ctx ends
// (nil) or the connection fails for good (invalid tokens: an error).
func (a *Adapter) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	at, err := a.authTest(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.me.Store(&self{user: at.UserID, botID: at.BotID, team: at.TeamID,
		mention: regexp.MustCompile(`^\s*<@` + regexp.QuoteMeta(at.UserID) + `(?:\|[^>]*)?>[\s,:]*`)})
	a.log.Info("slack connected to workspace", "team", at.TeamID, "bot_user", at.UserID)

	sm := socketmode.New(a.api,
		socketmode.OptionPingInterval(a.cfg.PingInterval),
		socketmode.OptionDialer(&websocket.Dialer{
			Proxy:            http.ProxyFromEnvironment,
			HandshakeTimeout: a.cfg.HTTPTimeout,
			WriteBufferSize:  32 << 10, // acks fit in one frame (Slack drops fragmented ones)
			NetDialContext:   a.dial,
		}),
		socketmode.OptionLog(slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)),
	)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.life.Store(&runCtx)
	defer a.bg.Wait()
	defer a.connected.Store(false)
	work := make(chan socketmode.Event, a.queue)
	smErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := sm.RunContext(runCtx)
		smErr <- err
		cancel()
	})
	wg.Go(func() { a.dispatch(runCtx, work, inbox) })

	// Every envelope is acknowledged at once, whatever waits behind it: Slack
	// redelivers an unacked one and disables an app that keeps failing.
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case evt := <-sm.Events:
			full := len(work) == cap(work) // only this loop adds: room now stays room
			switch {
			case !a.ack(runCtx, sm, evt, full):
			case !full:
				work <- evt
			default:
				a.overflow(runCtx, evt)
			}
		}
	}
	cancel()
	wg.Wait()
	err = <-smErr
	if ctx.Err() != nil || err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("slack: socket mode: %w", safeErr(err))
}

const busyText = "the bot is too busy to take this message right now; please send it again in a minute"

// overflow tells the person behind an event the work queue has no room for that
// the bot is busy (a few answers at a time; past them the event is only logged).
func (a *Adapter) overflow(ctx context.Context, evt socketmode.Event) {
	select {
	case a.busy <- struct{}{}:
	default:
		a.log.Error("slack work queue full: an event was dropped after its ack", "type", evt.Type)
		return
	}
	a.log.Warn("slack work queue full: answering busy", "type", evt.Type, "queued", a.queue)
	a.background(ctx, func(ctx context.Context) {
		defer func() { <-a.busy }()
		var in *adapters.Inbound
		switch cb, _ := evt.Data.(slackgo.InteractionCallback); evt.Type {
		case socketmode.EventTypeEventsAPI:
			in = a.fromEvent(evt.Request)
		case socketmode.EventTypeInteractive:
			in = a.fromAction(cb)
		}
		if in != nil {
			_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindError, Channel: Name, ReplyTo: in.ReplyTo, Text: busyText})
		}
	})
}

// healthyLink is how long a Socket Mode link must last to count as working.
const healthyLink = 30 * time.Second

// webTransport carries the Web API calls. slack-go reopens Socket Mode at once
// whenever Slack says "disconnect"; when links keep closing right after they
// open (too_many_websockets: over 10 sockets for one app, or Socket Mode turned
// off) that would hammer Slack, so from the second short-lived link in a row
// apps.connections.open waits 1 s, 2 s, 4 s, ... up to 2 minutes: before the
// call, as the URL it returns is a short-lived ticket.
type webTransport struct {
	a    *Adapter
	base http.RoundTripper
}

func (t *webTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/apps.connections.open") {
		if err := t.a.linkWait(req.Context()); err != nil {
			return nil, err
		}
	}
	return t.base.RoundTrip(req)
}

func (a *Adapter) linkWait(ctx context.Context) error {
	a.dialMu.Lock()
	flaps := 0
	if !a.lastDial.IsZero() && a.cfg.Now().Sub(a.lastDial) < healthyLink {
		flaps = a.flaps + 1
	}
	a.flaps = flaps
	a.dialMu.Unlock()
	if flaps < 2 {
		return nil
	}
	wait := min(time.Second<<min(flaps-2, 10), 2*time.Minute)
	a.log.Warn("slack socket mode links keep closing right after they open; waiting before asking for the next "+
		"(too many sockets for this app, over 10 replicas, or Socket Mode turned off in the app's settings)",
		"wait", wait, "short_links", flaps)
	return a.cfg.Sleep(ctx, wait)
}

// dial opens a Socket Mode link's TCP connection, noting when.
func (a *Adapter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	a.dialMu.Lock()
	a.lastDial = a.cfg.Now()
	a.dialMu.Unlock()
	return conn, err
}

// fatalAuth are the auth.test answers no retry fixes.
var fatalAuth = map[string]bool{"invalid_auth": true, "not_authed": true, "account_inactive": true,
	"token_revoked": true, "token_expired": true, "no_permission": true, "missing_scope": true}

// authTest learns the bot's identity, retrying transient failures (network, 5xx,
// 429) so a Slack hiccup at start-up does not stop the bot.
func (a *Adapter) authTest(ctx context.Context) (*slackgo.AuthTestResponse, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		at, err := a.api.AuthTestContext(ctx)
		if err == nil {
			return at, nil
		}
		if ctx.Err() != nil || fatalAuth[slackCode(err)] || attempt >= 8 {
			return nil, fmt.Errorf("slack: auth.test: %w", safeErr(err))
		}
		wait := max(backoff, a.retryAfter(err))
		a.log.Warn("slack auth.test failed; retrying", "attempt", attempt, "wait", wait, "err", safeErr(err))
		if err := a.cfg.Sleep(ctx, wait); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// ack acknowledges an envelope and reports whether the event needs work; with
// full (no room in the work queue) a slash command is answered busy.
func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, evt socketmode.Event, full bool) bool {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
		if evt.Request == nil {
			return false
		}
		var payload any
		switch {
		case evt.Type == socketmode.EventTypeSlashCommand && full:
			payload = map[string]any{"response_type": "ephemeral", "text": busyText}
		case evt.Type == socketmode.EventTypeSlashCommand:
			payload = a.slashAckPayload(evt)
		}
		if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, payload); err != nil && ctx.Err() == nil {
			a.log.Warn("slack ack failed", "envelope", evt.Request.EnvelopeID, "err", err)
		}
		return true
	case socketmode.EventTypeErrorBadMessage:
		// One slack-go could not parse (an unknown event type): unacked, Slack
		// redelivers it forever.
		if bad, ok := evt.Data.(*socketmode.ErrorBadMessage); ok && bad != nil {
			var env struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
				_ = sm.AckCtx(ctx, env.EnvelopeID, nil)
			}
		}
		return false
	case socketmode.EventTypeConnecting, socketmode.EventTypeDisconnect:
		a.connected.Store(false)
	case socketmode.EventTypeConnected:
		a.connected.Store(true)
		if c, ok := evt.Data.(*socketmode.ConnectedEvent); ok && c != nil {
			a.log.Info("slack socket mode connected", "connection", c.ConnectionCount)
		}
	case socketmode.EventTypeHello:
		if evt.Request != nil {
			a.log.Debug("slack socket mode hello", "open_sockets", evt.Request.NumConnections)
		}
	case socketmode.EventTypeConnectionError:
		a.connected.Store(false)
		if c, ok := evt.Data.(*slackgo.ConnectionErrorEvent); ok && c != nil {
			a.log.Warn("slack socket mode connection error", "attempt", c.Attempt, "backoff", c.Backoff, "err", safeErr(c.ErrorObj))
		}
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack socket mode: invalid app token")
	case socketmode.EventTypeIncomingError:
		a.connected.Store(false)
		a.log.Debug("slack socket mode read error; reconnecting")
	}
	return false
}

// slashAckPayload is the immediate answer to a slash command: the model list
// for "/model" without arguments when Config.Models is set, else nothing.
func (a *Adapter) slashAckPayload(evt socketmode.Event) any {
	cmd, ok := evt.Data.(slackgo.SlashCommand)
	arg := strings.TrimSpace(cmd.Text)
	if !ok || a.cfg.Models == nil || cmd.Command != "/model" || (arg != "" && arg != "help" && arg != "list") {
		return nil
	}
	models := a.cfg.Models()
	if len(models) == 0 {
		return nil
	}
	text := escapeMrkdwn("Models: "+strings.Join(models, ", ")) +
		"\nUsage: `/model provider/model` sets the model new threads here start with (in a thread: `!model provider/model`)"
	// A section's text holds 3,000 characters (maxSectionText); cut whole
	// characters, never a byte sequence in half.
	return map[string]any{"response_type": "ephemeral", "text": truncateRunes(text, maxSectionText)}
}

// dispatch turns acknowledged events into Inbound messages, in arrival order.
func (a *Adapter) dispatch(ctx context.Context, work <-chan socketmode.Event, inbox chan<- adapters.Inbound) {
	for {
		select {
		case <-ctx.Done():
			return
		case evt := <-work:
			if in := a.inbound(ctx, evt); in != nil {
				select {
				case inbox <- *in:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// inbound maps one event to an Inbound, or nil; Slack's notices
// (app_rate_limited, assistant_thread_started) are acted on here.
func (a *Adapter) inbound(ctx context.Context, evt socketmode.Event) *adapters.Inbound {
	switch data := evt.Data.(type) {
	case slackevents.EventsAPIEvent:
		switch {
		case data.Type == slackevents.AppRateLimited:
			a.appRateLimited(data)
		case data.InnerEvent.Type == string(slackevents.AssistantThreadStarted):
			if evt.Request != nil {
				a.assistantStarted(ctx, evt.Request.Payload)
			}
		case data.InnerEvent.Type == string(slackevents.AppHomeOpened):
			if evt.Request != nil {
				a.homeOpened(ctx, evt.Request.Payload) // home.go
			}
		default:
			return a.fromEvent(evt.Request)
		}
	case slackgo.SlashCommand:
		return a.fromSlash(data)
	case slackgo.InteractionCallback:
		return a.fromAction(data)
	}
	return nil
}

// appRateLimited logs, once per minute Slack names, that it drops this app's
// events in a workspace (over 30,000 in an hour).
func (a *Adapter) appRateLimited(ev slackevents.EventsAPIEvent) {
	var minute int64
	if rl, ok := ev.Data.(*slackevents.EventsAPIAppRateLimited); ok && rl != nil {
		minute = int64(rl.MinuteRateLimited)
	}
	if a.limitedMinute.Swap(minute) == minute && minute != 0 {
		return
	}
	a.log.Error("slack is dropping this app's events in the workspace (over 30,000 events in an hour): mentions go unanswered; "+
		"set channels.slack.events: mentions and subscribe to app_mention and message.im only (slack-manifest-mentions.yaml)",
		"team", ev.TeamID, "since", time.Unix(minute, 0).UTC())
}

// innerEvent is the part of a message / app_mention event the adapter reads.
type innerEvent struct {
	Type         string `json:"type"`
	Subtype      string `json:"subtype"`
	User         string `json:"user"`
	BotID        string `json:"bot_id"`
	Text         string `json:"text"`
	TS           string `json:"ts"`
	ThreadTS     string `json:"thread_ts"`
	Channel      string `json:"channel"`
	ChannelType  string `json:"channel_type"`
	ParentUserID string `json:"parent_user_id"`
	// AssistantThread is set on messages of an AI app container chat.
	AssistantThread json.RawMessage `json:"assistant_thread"`
	Files           []slackFile     `json:"files"` // I1: history.go
}

// personSubtypes carry a person's new message; bot_message, message_changed,
// channel_join and the others are ignored.
var personSubtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true, "me_message": true}

func threadKey(channel, ts string) string { return channel + "/" + ts }

// SetSessionLookup implements adapters.SessionLookup.
func (a *Adapter) SetSessionLookup(known func(ctx context.Context, sessionKey string) bool) {
	a.known.Store(&known)
}

// knownThread asks the router whether ev's thread holds a session (answered
// before a restart), and remembers it in mem when it does.
func (a *Adapter) knownThread(ev innerEvent, team string, mem *adapters.Recent) bool {
	known := a.known.Load()
	if known == nil || *known == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !(*known)(ctx, "slack:"+team+":"+ev.Channel+":"+ev.ThreadTS) {
		return false
	}
	mem.Add(threadKey(ev.Channel, ev.ThreadTS))
	return true
}

// fromEvent maps one events_api envelope to an Inbound, or nil when it is not for the bot.
func (a *Adapter) fromEvent(req *socketmode.Request) *adapters.Inbound {
	if req == nil {
		return nil
	}
	var outer struct {
		TeamID  string     `json:"team_id"`
		EventID string     `json:"event_id"`
		Event   innerEvent `json:"event"`
	}
	if err := json.Unmarshal(req.Payload, &outer); err != nil {
		a.log.Debug("slack: unreadable event payload", "envelope", req.EnvelopeID)
		return nil
	}
	if a.mem.seen.Seen("ev:" + outer.EventID) {
		a.log.Debug("slack: duplicate event ignored", "event_id", outer.EventID, "retry_attempt", req.RetryAttempt)
		return nil
	}
	ev, me := outer.Event, a.me.Load()
	a.learnConversation(ev) // an app_mention's message twin says what its conversation is
	team := cmp.Or(outer.TeamID, me.team)
	person := ev.Type == "app_mention" || (ev.Type == "message" && personSubtypes[ev.Subtype])
	if !person || ev.Channel == "" || ev.TS == "" || ev.User == "" || ev.User == me.user || ev.BotID != "" {
		return nil
	}
	direct := ev.ChannelType == "im" || (ev.ChannelType == "" && strings.HasPrefix(ev.Channel, "D"))
	if a.cfg.MentionsOnly && !direct && ev.Type != "app_mention" {
		if !a.warnedMessages.Swap(true) {
			a.log.Warn("slack sends channel message events although channels.slack.events is mentions: they are ignored; " +
				"remove message.channels, message.groups and message.mpim from the app's event subscriptions " +
				"(slack-manifest-mentions.yaml) to keep them from counting against Slack's 30,000 events per hour")
		}
		return nil
	}
	mentioned := ev.Type == "app_mention" || strings.Contains(ev.Text, "<@"+me.user+">") || strings.Contains(ev.Text, "<@"+me.user+"|")
	// The bot's thread: one it started or answered in (remembered, or a session after a restart).
	inThread := ev.ThreadTS != "" && !direct && (a.mem.threads.Has(threadKey(ev.Channel, ev.ThreadTS)) ||
		ev.ParentUserID == me.user || a.knownThread(ev, team, a.mem.threads))
	if !direct && !mentioned && !inThread {
		return nil // channel chatter not addressed to the bot
	}
	// An app_mention and its message.channels twin share channel and ts: handle one.
	if a.mem.seenMsg.Seen(threadKey(ev.Channel, ev.TS)) {
		return nil
	}
	text := ev.Text
	if me.mention != nil {
		text = me.mention.ReplaceAllString(text, "")
	}
	in := &adapters.Inbound{Channel: Name, User: "slack:" + ev.User, Text: strings.TrimSpace(unescapeSlack(text)),
		EventID:      "slack:msg:" + ev.Channel + ":" + ev.TS, // whichever event (app_mention or message) carried it
		Conversation: a.conversation(context.Background(), ev), Files: filesOf(ev.Files), Direct: direct}
	if ev.ThreadTS != "" && ev.ThreadTS != ev.TS && !direct && !inThread {
		in.Earlier = earlierRef{ev.Channel, ev.ThreadTS, ev.TS}.encode() // H1: a thread it did not start
	}
	thread := cmp.Or(ev.ThreadTS, ev.TS)
	in.SessionKey = "slack:" + team + ":" + ev.Channel
	switch {
	case !direct:
		a.mem.threads.Add(threadKey(ev.Channel, thread))
		in.SessionKey += ":" + thread
	case a.isAssistantThread(ev, team): // each chat of the AI app container is its own session
		in.SessionKey += ":" + ev.ThreadTS
		a.titleOnce(ev.Channel, ev.ThreadTS, in.Text)
	default:
		thread = ev.ThreadTS
	}
	in.ReplyTo = target{Channel: ev.Channel, ThreadTS: thread}.encode()
	a.askers.Put(in.ReplyTo, ev.User)
	return in
}

// runCtx is the context of the running Run (nil before Run).
func (a *Adapter) runCtx() context.Context {
	if p := a.life.Load(); p != nil {
		return *p
	}
	return nil
}

// fromSlash maps a native slash command to an Inbound for the channel's session.
func (a *Adapter) fromSlash(cmd slackgo.SlashCommand) *adapters.Inbound {
	if a.mem.seen.Seen("trig:"+cmd.TriggerID) || cmd.ChannelID == "" || cmd.UserID == "" || cmd.Command == "" {
		return nil
	}
	team := cmp.Or(cmd.TeamID, a.me.Load().team)
	in := &adapters.Inbound{
		Channel:      Name,
		SessionKey:   "slack:" + team + ":" + cmd.ChannelID,
		User:         "slack:" + cmd.UserID,
		Text:         slashText(cmd.Command, cmd.Text),
		ReplyTo:      target{Channel: cmd.ChannelID, User: cmd.UserID, ResponseURL: cmd.ResponseURL}.encode(),
		Direct:       strings.HasPrefix(cmd.ChannelID, "D") || cmd.ChannelName == "directmessage",
		Native:       true,
		EventID:      "slack:cmd:" + cmd.TriggerID,
		Conversation: slashConversation(cmd),
	}
	if !in.Direct { // a channel holds no conversation of its own: its threads do
		in.DefaultsFor = "new threads in " + channelLabel(cmd.ChannelName)
	}
	return in
}

// channelLabel names a channel for an answer: "#general", or "this channel"
// without a usable name (private channels may come as "privategroup").
func channelLabel(name string) string {
	if name == "" || name == "privategroup" || len(name) > 80 || strings.ContainsAny(name, " \t\n<>&|") {
		return "this channel"
	}
	return "#" + name
}

// slashText turns a native command into the router's text form: besides the plain
// commands ("/model x"), the umbrella "/detour model x" ("/detour" alone is "/help")
// and prefixed names such as "/detour-status", for workspaces where a bare name is
// taken by Slack or another app.
func slashText(command, text string) string {
	command = strings.ToLower(strings.TrimSpace(command))
	text = strings.TrimSpace(text)
	switch {
	case command == "/detour":
		if text == "" {
			return "/help"
		}
		return "/" + strings.TrimLeft(text, "/!")
	case strings.HasPrefix(command, "/detour-") || strings.HasPrefix(command, "/detour_"):
		command = "/" + command[len("/detour-"):]
	}
	return strings.TrimSpace(command + " " + text)
}

// safeErr drops URLs from transport errors: a Socket Mode URL carries a ticket,
// a response_url is a capability.
func safeErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Probe checks the bot token (auth.test), the app-level token
// (apps.connections.open, no socket is opened) and, when target names a channel
// id, that the bot can post there (conversations.info). Nothing is posted.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	at, err := a.api.AuthTestContext(ctx)
	out := []adapters.ProbeResult{adapters.Checked("slack bot token (auth.test)", safeErr(err), func() string {
		return fmt.Sprintf("workspace %s (%s), bot user %s", at.Team, at.TeamID, at.UserID)
	})}
	_, _, err = a.api.StartSocketModeContext(ctx)
	out = append(out, adapters.Checked("slack app token (apps.connections.open)", safeErr(err),
		func() string { return "Socket Mode can connect" }))
	if target == "" {
		return out
	}
	ch, err := a.api.GetConversationInfoContext(ctx, &slackgo.GetConversationInfoInput{ChannelID: target})
	if err == nil && !ch.IsMember && !ch.IsIM {
		err = errors.New("#" + ch.Name + ": the bot is not a member; invite it (/invite @bot) or reports cannot be posted")
	}
	return append(out, adapters.Checked("slack admin channel "+target+" (conversations.info)", safeErr(err),
		func() string { return "#" + ch.Name }))
}

// Connected reports whether a Socket Mode link is up now (adapters.Connector);
// /readyz and the "ready" log line wait for it.
func (a *Adapter) Connected() bool { return a.connected.Load() }
