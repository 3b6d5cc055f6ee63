// Package discord is the Discord channel: a discordgo gateway session that turns
// mentions, thread messages, DMs and application commands into adapters.Inbound, and
// posts adapters.Outbound back as channel messages or interaction answers.
//
// Reliability choices: discordgo's own reconnect loop and rate-limit sleeps are
// switched off. Run owns reconnection (discordgo resumes with op 6 on the next Open,
// since the session id and sequence survive Close), every gateway handshake has a
// deadline, and every REST call goes through one ctx-aware retry that honours a 429's
// retry_after with an injectable sleep.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/detourbot/detour/adapters"
)

// Name is the adapter name used in Inbound.Channel and Outbound.Channel.
const Name = "discord"

// Intents the bot identifies with: guild events (thread create), guild messages, DMs
// and message content (privileged: enable it in the developer portal).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// Config configures the adapter.
type Config struct {
	// Token is the bot token (secret; never logged). A leading "Bot " is accepted.
	Token string
	// GuildID, when set, registers application commands in that guild only
	// (instant propagation); otherwise they are registered globally.
	GuildID string
	// APIURL overrides https://discord.com (for example http://127.0.0.1:P for a
	// fake); the gateway URL then comes from that server's GET /api/v9/gateway.
	APIURL string
	// HTTPTimeout bounds each REST call (default 10s).
	HTTPTimeout time.Duration
	// OpenTimeout bounds one gateway handshake: dial, Hello, Identify/Resume and
	// READY/RESUMED (default 20s).
	OpenTimeout time.Duration
	// Log receives the adapter's logs (default slog.Default()).
	Log *slog.Logger
	// Models lists the configured model refs, for /model autocomplete.
	Models func() []string
	// Profiles lists the auth profile ids, for "model@profile" completion.
	Profiles func() []string
	// Sleep waits d or until ctx ends; used before retrying a rate-limited call
	// (default: a timer). Tests inject a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRateLimitRetries is how many times one call is retried after a 429 (default 3).
	MaxRateLimitRetries int
	// MaxRateLimitWait is the longest retry_after honoured; a longer one fails the
	// call at once (default 60s).
	MaxRateLimitWait time.Duration
	// ReconnectBackoff is the first wait after a failed gateway open, doubled up to
	// 30s (default 1s).
	ReconnectBackoff time.Duration
}

// Adapter is the Discord channel. It implements adapters.Adapter and adapters.Typer.
type Adapter struct {
	cfg       Config
	log       *slog.Logger
	s         *discordgo.Session
	transport *http.Transport
	gw        *gatewayDialer

	mu       sync.Mutex
	botID    string
	appID    string
	ctx      context.Context
	inbox    chan<- adapters.Inbound
	started  bool
	stopping bool
	typers   map[string]chan struct{} // channel id -> typing refresher's stop
	wg       sync.WaitGroup           // typing refreshers

	typingEvery time.Duration

	threads      *adapters.Recent // thread ids the bot takes part in
	notThreads   *adapters.Recent // channel ids known not to be threads
	seen         *adapters.Recent // message ids already delivered (resume replays)
	interactions *interactionStore

	disconnected chan struct{}
}

var (
	_ adapters.Adapter = (*Adapter)(nil)
	_ adapters.Typer   = (*Adapter)(nil)
)

// New builds the adapter; nothing connects until Run.
func New(cfg Config) (*Adapter, error) {
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot "))
	if tok == "" {
		return nil, errors.New("discord: token is empty")
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = 10 * time.Second
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 20 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Models == nil {
		cfg.Models = func() []string { return nil }
	}
	if cfg.Profiles == nil {
		cfg.Profiles = func() []string { return nil }
	}
	if cfg.Sleep == nil {
		cfg.Sleep = adapters.Sleep
	}
	if cfg.MaxRateLimitRetries <= 0 {
		cfg.MaxRateLimitRetries = 3
	}
	if cfg.MaxRateLimitWait <= 0 {
		cfg.MaxRateLimitWait = 60 * time.Second
	}
	if cfg.ReconnectBackoff <= 0 {
		cfg.ReconnectBackoff = time.Second
	}
	var target *url.URL
	if cfg.APIURL != "" {
		u, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discord: api_url %q must be an http(s) base URL", cfg.APIURL)
		}
		target = u
	}

	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	a := &Adapter{
		cfg:          cfg,
		log:          cfg.Log.With("channel", Name),
		s:            s,
		transport:    base,
		gw:           &gatewayDialer{timeout: cfg.OpenTimeout},
		threads:      adapters.NewRecent(4096, 0, nil),
		notThreads:   adapters.NewRecent(4096, 0, nil),
		seen:         adapters.NewRecent(2048, 0, nil),
		interactions: newInteractionStore(512),
		disconnected: make(chan struct{}, 1),
		typers:       map[string]chan struct{}{},
		typingEvery:  typingEvery,
	}
	s.Client = &http.Client{Timeout: cfg.HTTPTimeout, Transport: &rewriteTransport{base: base, target: target}}
	s.Dialer = &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: cfg.OpenTimeout,
		NetDialContext:   a.gw.dial,
	}
	s.Identify.Intents = Intents
	s.ShouldReconnectOnError = false // Run owns reconnection
	s.ShouldRetryOnRateLimit = false // call() owns 429 retries
	s.MaxRestRetries = 0             // a 502 on message create may have posted: never repeat
	s.StateEnabled = false           // bounded memory: we track only what we need
	s.SyncEvents = true              // handlers run in order on the gateway reader
	s.LogLevel = -1                  // discordgo's logger is process-global; we log ourselves

	s.AddHandler(a.onReady)
	s.AddHandler(a.onResumed)
	s.AddHandler(a.onDisconnect)
	s.AddHandler(a.onMessage)
	s.AddHandler(a.onThreadCreate)
	s.AddHandler(a.onInteraction)
	return a, nil
}

// Name returns "discord".
func (a *Adapter) Name() string { return Name }

// Run connects to the gateway, registers the application commands and delivers
// messages to inbox until ctx ends; it reconnects (resuming the session) whenever the
// connection drops. It returns nil when ctx ends, an error when the token is refused.
func (a *Adapter) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("discord: Run called twice")
	}
	a.started, a.ctx, a.inbox = true, ctx, inbox
	a.mu.Unlock()
	defer a.transport.CloseIdleConnections()
	defer func() {
		a.mu.Lock()
		a.stopping = true
		a.mu.Unlock()
		a.wg.Wait()
	}()

	backoff := a.cfg.ReconnectBackoff
	registered := false
	for {
		err := a.open(ctx)
		if errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			err = nil // a stale disconnect signal: the session is up
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if fatalOpenError(err) {
				return fmt.Errorf("discord: gateway refused the bot token: %w", err)
			}
			a.log.Warn("discord gateway connect failed", "err", err, "retry_in", backoff)
			if adapters.Sleep(ctx, backoff) != nil {
				return nil
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = a.cfg.ReconnectBackoff
		if !registered {
			registered = true
			if err := a.registerCommands(ctx); err != nil {
				a.log.Error("discord command registration failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			if err := a.s.Close(); err != nil {
				a.log.Warn("discord close", "err", err)
			}
			return nil
		case <-a.disconnected:
			a.log.Warn("discord gateway disconnected; reconnecting")
		}
	}
}

// open runs one gateway handshake under OpenTimeout and ctx: discordgo's Open has no
// read deadline of its own, so the dialled connection carries one until Open returns.
func (a *Adapter) open(ctx context.Context) error {
	a.gw.arm()
	stop := context.AfterFunc(ctx, a.gw.expire)
	err := a.s.Open()
	stop()
	a.gw.disarm(err == nil)
	return err
}

// fatalOpenError reports errors that retrying cannot fix: a refused token.
func fatalOpenError(err error) bool {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4004, 4010, 4011, 4012, 4013, 4014: // auth failed, bad shard, bad version, bad/disallowed intents
			return true
		}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
		return true
	}
	return errors.Is(err, discordgo.ErrUnauthorized)
}

func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	a.mu.Lock()
	if r.User != nil {
		a.botID = r.User.ID
	}
	if r.Application != nil {
		a.appID = r.Application.ID
	}
	a.mu.Unlock()
	a.log.Info("discord gateway ready", "bot_user", a.bot())
}

func (a *Adapter) onResumed(_ *discordgo.Session, _ *discordgo.Resumed) {
	a.log.Info("discord gateway resumed")
}

func (a *Adapter) onDisconnect(_ *discordgo.Session, _ *discordgo.Disconnect) {
	select {
	case a.disconnected <- struct{}{}:
	default:
	}
}

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

func (a *Adapter) app() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.appID
}

// runCtx is Run's context (handlers only run while Run does).
func (a *Adapter) runCtx() (context.Context, chan<- adapters.Inbound) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil {
		return context.Background(), nil
	}
	return a.ctx, a.inbox
}

func (a *Adapter) deliver(in adapters.Inbound) {
	ctx, inbox := a.runCtx()
	if inbox == nil {
		return
	}
	select {
	case inbox <- in:
	case <-ctx.Done():
	}
}

// call runs one REST call, retrying after a 429 as the server asks, at most
// MaxRateLimitRetries times and never for longer than MaxRateLimitWait per wait.
// secret (an interaction token) is scrubbed from the returned error.
func (a *Adapter) call(ctx context.Context, what, secret string, f func(opts ...discordgo.RequestOption) error) error {
	return a.callBucket(ctx, what, secret, "", f)
}

// callBucket is call for a request whose discordgo rate-limit bucket is known:
// when Discord said the bucket is empty, the wait happens here, logged and
// ctx-aware, instead of as a silent sleep inside discordgo.
func (a *Adapter) callBucket(ctx context.Context, what, secret, bucket string, f func(opts ...discordgo.RequestOption) error) error {
	for attempt := 0; ; attempt++ {
		if attempt == 0 { // a retry has just waited the 429's own retry_after
			if err := a.waitBucket(ctx, what, bucket); err != nil {
				return err
			}
		}
		err := f(discordgo.WithContext(ctx))
		if err == nil {
			return nil
		}
		var rl *discordgo.RateLimitError
		if !errors.As(err, &rl) || rl.RateLimit == nil || rl.TooManyRequests == nil {
			return scrub(fmt.Errorf("discord: %s: %w", what, err), secret)
		}
		wait := rl.RetryAfter
		if attempt >= a.cfg.MaxRateLimitRetries || wait > a.cfg.MaxRateLimitWait {
			return fmt.Errorf("discord: %s: rate limited, retry after %v (gave up after %d retries): %w",
				what, wait, attempt, errRateLimited)
		}
		a.log.Warn("discord rate limited", "op", what, "retry_after", wait, "attempt", attempt+1)
		if err := a.cfg.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("discord: %s: waiting out rate limit: %w", what, err)
		}
	}
}

// waitBucket waits until discordgo's limiter would let a request on bucket go
// without sleeping itself (X-RateLimit-Remaining 0 until the reset).
func (a *Adapter) waitBucket(ctx context.Context, what, bucket string) error {
	if bucket == "" || a.s == nil || a.s.Ratelimiter == nil {
		return nil
	}
	b := a.s.Ratelimiter.GetBucket(bucket)
	b.Lock() // held by discordgo while a request on this bucket is in flight
	wait := a.s.Ratelimiter.GetWaitTime(b, 1)
	b.Unlock()
	if wait <= 0 {
		return nil
	}
	if wait > a.cfg.MaxRateLimitWait {
		return fmt.Errorf("discord: %s: rate-limit bucket empty for %v: %w", what, wait, errRateLimited)
	}
	a.log.Info("discord rate-limit bucket empty, waiting", "op", what, "wait", wait)
	if err := a.cfg.Sleep(ctx, wait); err != nil {
		return fmt.Errorf("discord: %s: waiting for the rate-limit bucket: %w", what, err)
	}
	return nil
}

// errRateLimited marks a call that stayed rate limited.
var errRateLimited = errors.New("rate limited")

// scrubbed hides one secret from an error's text while keeping it unwrappable.
type scrubbed struct {
	err    error
	secret string
}

func (e *scrubbed) Error() string { return strings.ReplaceAll(e.err.Error(), e.secret, "[redacted]") }
func (e *scrubbed) Unwrap() error { return e.err }

func scrub(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	return &scrubbed{err: err, secret: secret}
}

// rewriteTransport sends requests for https://discord.com to target (a fake or proxy).
type rewriteTransport struct {
	base   http.RoundTripper
	target *url.URL
}

func (t *rewriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.target == nil || !strings.EqualFold(req.URL.Host, "discord.com") {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = t.target.Scheme
	r.URL.Host = t.target.Host
	if p := strings.TrimRight(t.target.Path, "/"); p != "" {
		r.URL.Path = p + r.URL.Path
		if r.URL.RawPath != "" {
			r.URL.RawPath = p + r.URL.RawPath
		}
	}
	r.Host = t.target.Host
	return t.base.RoundTrip(r)
}

// gatewayDialer dials gateway connections that carry a hard deadline for the length
// of the handshake. gorilla/websocket clears connection deadlines after its HTTP
// upgrade, so the deadline lives in a wrapper that clamps every later Set*Deadline.
type gatewayDialer struct {
	timeout time.Duration

	mu      sync.Mutex
	armed   bool
	pending []*deadlineConn
}

func (g *gatewayDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: g.timeout}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		_ = c.Close()
		return nil, errors.New("gateway dial outside a handshake")
	}
	dc := &deadlineConn{Conn: c}
	dc.setHard(time.Now().Add(g.timeout))
	g.pending = append(g.pending, dc)
	return dc, nil
}

func (g *gatewayDialer) arm() {
	g.mu.Lock()
	g.armed, g.pending = true, nil
	g.mu.Unlock()
}

// expire makes the handshake in progress fail now (ctx ended).
func (g *gatewayDialer) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	for _, c := range g.pending {
		c.setHard(time.Now())
	}
}

// disarm ends the handshake; on success the live connection loses its deadline.
func (g *gatewayDialer) disarm(ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok {
		for _, c := range g.pending {
			c.setHard(time.Time{})
		}
	}
	g.armed, g.pending = false, nil
}

// deadlineConn is a net.Conn whose deadlines never pass its hard deadline, if set.
type deadlineConn struct {
	net.Conn
	mu   sync.Mutex
	hard time.Time
}

func (c *deadlineConn) clamp(t time.Time) time.Time {
	if !c.hard.IsZero() && (t.IsZero() || t.After(c.hard)) {
		return c.hard
	}
	return t
}

func (c *deadlineConn) setHard(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hard = t
	_ = c.Conn.SetDeadline(t)
}

// SetDeadline sets both deadlines, clamped to the hard deadline.
func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetDeadline(c.clamp(t))
}

// SetReadDeadline sets the read deadline, clamped to the hard deadline.
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.clamp(t))
}

// SetWriteDeadline sets the write deadline, clamped to the hard deadline.
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.clamp(t))
}
