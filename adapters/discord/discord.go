// Package discord is the Discord channel: a discordgo gateway session that turns
// mentions, thread messages, DMs, application commands and picks in its select
// menus into adapters.Inbound, and posts adapters.Outbound back as channel messages
// or interaction answers. It shows the typing indicator while a turn runs
// (adapters.Progress) and streams replies as one message edited as it grows
// (adapters.Streamer), replaced in place when a failed attempt's text gives way
// to another model's answer; with Config.Threads a question opens a thread.
//
// What runs where:
//   - discordgo's gateway reader runs the event handlers and makes no network call:
//     it filters each event and hands it on. An interaction gets its own goroutine,
//     which defers it (or answers an autocomplete) at once, within Discord's
//     3-second deadline; a message goes to its channel's worker (one goroutine per
//     active channel, in order, bounded), which may look the channel up and then
//     delivers it to the router.
//   - Every REST call passes through one transport (ratelimit.go) that waits out
//     per-route buckets and one process-wide pause on a global 429, so discordgo's
//     own uncancellable sleeps never happen. Typing calls are dropped instead of
//     waiting (progress.go).
//   - A streamed reply has its own goroutine (stream.go), which shows the newest
//     text at most once per EditEvery; Update only hands it the text, so the
//     model's stream never waits for Discord.
//   - Run supervises the gateway (supervise.go): discordgo's connection is watched
//     through a tapped connection (gwconn.go) that closes a zombie connection with
//     4000 and turns an op 9 into a resume or a budgeted identify; Run backs off with
//     jitter, checks the identify budget of GET /gateway/bot before each identify,
//     resumes on resume_gateway_url, and falls back to mention-only mode when
//     Discord refuses the MESSAGE_CONTENT intent (close 4014).
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/redact"
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
	// fake); the gateway URL then comes from that server's GET /api/v9/gateway/bot.
	APIURL string
	// NoMessageContent identifies without the privileged MESSAGE_CONTENT intent:
	// mention-only mode (config channels.discord.message_content: false). The bot
	// also falls back to it when Discord refuses the intent (close code 4014).
	NoMessageContent bool
	// ShardID and ShardCount are sent in Identify when ShardCount > 1 (replicas
	// that split the guilds between them).
	ShardID, ShardCount int
	// HTTPTimeout bounds each REST request once it is sent (default 10s); waiting
	// out a rate limit before it does not count.
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
	// Sleep waits d or until ctx ends; Now tells the time. Rate-limit waits, the
	// reconnect backoff and the identify budget use them (default: timers and
	// time.Now). Tests inject a virtual clock: give both, from the same clock.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
	// Rand returns a number in [0, 1) for the jitter of waits (default math/rand).
	Rand func() float64
	// MaxRateLimitRetries is how many times one call is retried after a 429 (default 3).
	MaxRateLimitRetries int
	// MaxRateLimitWait is the longest rate-limit wait honoured; a longer one fails
	// the call at once (default 60s).
	MaxRateLimitWait time.Duration
	// ReconnectBackoff is the first wait when the gateway connection keeps failing
	// or dropping, doubled (with jitter) up to MaxReconnectBackoff (defaults 1s
	// and 2m). A single drop of a connection that was up resumes at once.
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration
	// Threads: a question that mentions the bot outside a thread starts a thread
	// from it, named from the question, where the answer and the rest of the
	// conversation go (config channels.discord.threads).
	Threads bool
	// EditEvery is the least time between two edits of a streamed reply (default
	// 1s, real time); Discord's rate-limit buckets are honoured besides.
	EditEvery time.Duration
}

// Adapter is the Discord channel. It implements adapters.Adapter, Progress (the
// typing indicator), Streamer (a reply edited as it grows) and Connector.
type Adapter struct {
	cfg       Config
	token     string
	log       *slog.Logger
	rest      *discordgo.Session // REST only, never opened; gateway sessions are made per identify
	transport *http.Transport
	lim       *limiter
	dialer    *gwDialer

	gwMu  sync.Mutex
	gwURL string // how discordgo's next gateway lookup is answered; "" = ask Discord

	mu          sync.Mutex
	botID       string
	appID       string
	ctx         context.Context
	inbox       chan<- adapters.Inbound
	started     bool
	stopping    bool
	typers      map[string]*typer      // channel id -> its typing refresher
	workers     map[string]*chanWorker // channel id -> its inbound worker
	answering   int                    // interaction goroutines running
	mentionOnly bool                   // identify without MESSAGE_CONTENT
	wg          sync.WaitGroup         // every goroutine the adapter starts

	typingEvery time.Duration

	threads      *adapters.Recent // thread ids the bot takes part in
	notThreads   *adapters.Recent // channel ids known not to be threads
	seen         *adapters.Recent // event ids already delivered (resume replays)
	interactions *interactionStore

	connected atomic.Bool // a gateway connection is up (adapters.Connector)
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Progress  = (*Adapter)(nil)
	_ adapters.Streamer  = (*Adapter)(nil)
	_ adapters.Connector = (*Adapter)(nil)
)

// Connected reports whether a gateway connection is up now.
func (a *Adapter) Connected() bool { return a.connected.Load() }

// New builds the adapter; nothing connects until Run.
func New(cfg Config) (*Adapter, error) {
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot "))
	if tok == "" {
		return nil, errors.New("discord: token is empty")
	}
	if cfg.ShardCount < 0 || cfg.ShardID < 0 || (cfg.ShardCount > 0 && cfg.ShardID >= cfg.ShardCount) || (cfg.ShardCount == 0 && cfg.ShardID > 0) {
		return nil, fmt.Errorf("discord: shard %d of %d: want 0 <= shard_id < shard_count", cfg.ShardID, cfg.ShardCount)
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
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
	if cfg.MaxReconnectBackoff <= 0 {
		cfg.MaxReconnectBackoff = 2 * time.Minute
	}
	if cfg.EditEvery <= 0 {
		cfg.EditEvery = defaultEditEvery
	}
	var target *url.URL
	if cfg.APIURL != "" {
		u, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discord: api_url %q must be an http(s) base URL", cfg.APIURL)
		}
		target = u
	}

	rest, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	log := cfg.Log.With("channel", Name)
	base := http.DefaultTransport.(*http.Transport).Clone()
	a := &Adapter{
		cfg:          cfg,
		token:        tok,
		log:          log,
		rest:         rest,
		transport:    base,
		lim:          newLimiter(cfg.Now, cfg.Sleep, cfg.MaxRateLimitWait, log),
		dialer:       &gwDialer{timeout: cfg.OpenTimeout},
		threads:      adapters.NewRecent(4096, 0, nil),
		notThreads:   adapters.NewRecent(4096, 0, nil),
		seen:         adapters.NewRecent(2048, 0, nil),
		interactions: newInteractionStore(512),
		typers:       map[string]*typer{},
		workers:      map[string]*chanWorker{},
		mentionOnly:  cfg.NoMessageContent,
		typingEvery:  typingEvery,
	}
	// No http.Client timeout: it would count rate-limit waits; the transport
	// times each request once it is sent.
	rest.Client = &http.Client{Transport: &transport{base: base, target: target, timeout: cfg.HTTPTimeout, lim: a.lim, gateway: a.gatewayAnswer}}
	rest.ShouldRetryOnRateLimit = false // call() retries, the transport waits
	rest.MaxRestRetries = 0             // a 502 on message create may have posted: never repeat
	rest.StateEnabled = false
	rest.LogLevel = -1 // discordgo's logger is process-global; we log ourselves
	return a, nil
}

// Name returns "discord".
func (a *Adapter) Name() string { return Name }

// Run connects to the gateway, registers the application commands and delivers
// messages to inbox until ctx ends; it reconnects (resuming the session where
// Discord allows) whenever the connection drops. It returns nil when ctx ends, an
// error when Discord refuses the token, the shard or the intents for good.
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
		for ch, t := range a.typers {
			t.cancel()
			delete(a.typers, ch)
		}
		a.mu.Unlock()
		a.wg.Wait()
	}()
	return a.supervise(ctx)
}

func (a *Adapter) gatewayAnswer() string {
	a.gwMu.Lock()
	defer a.gwMu.Unlock()
	return a.gwURL
}

func (a *Adapter) setGatewayAnswer(u string) {
	a.gwMu.Lock()
	a.gwURL = u
	a.gwMu.Unlock()
}

func (a *Adapter) setIDs(bot, app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if bot != "" {
		a.botID = bot
	}
	if app != "" {
		a.appID = app
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

// goOwned starts f on a goroutine Run waits for, unless Run is ending; it reports
// whether f was started.
func (a *Adapter) goOwned(f func(ctx context.Context)) bool {
	a.mu.Lock()
	if a.ctx == nil || a.stopping {
		a.mu.Unlock()
		return false
	}
	ctx := a.ctx
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		f(ctx)
	}()
	return true
}

func (a *Adapter) deliver(ctx context.Context, in adapters.Inbound) {
	_, inbox := a.runCtx()
	if inbox == nil {
		return
	}
	select {
	case inbox <- in:
	case <-ctx.Done():
	}
}

// call runs one REST call, retrying after a 429 at most MaxRateLimitRetries times;
// the transport waits the 429's retry_after (or the global pause) before the
// retry goes out. secret (an interaction token) is scrubbed from the error.
func (a *Adapter) call(ctx context.Context, what, secret string, f func(opts ...discordgo.RequestOption) error) error {
	for attempt := 0; ; attempt++ {
		err := f(discordgo.WithContext(ctx))
		if err == nil {
			return nil
		}
		var rl *discordgo.RateLimitError
		if !errors.As(err, &rl) || rl.RateLimit == nil || rl.TooManyRequests == nil {
			return scrub(fmt.Errorf("discord: %s: %w", what, err), secret)
		}
		if attempt >= a.cfg.MaxRateLimitRetries {
			return fmt.Errorf("discord: %s: rate limited, retry after %v (gave up after %d retries): %w",
				what, rl.RetryAfter, attempt, errRateLimited)
		}
		a.log.Warn("discord rate limited", "op", what, "retry_after", rl.RetryAfter, "attempt", attempt+1)
	}
}

// scrubbed hides one secret from an error's text while keeping it unwrappable.
type scrubbed struct {
	err    error
	secret string
}

func (e *scrubbed) Error() string { return redact.Known(e.err.Error(), e.secret) }
func (e *scrubbed) Unwrap() error { return e.err }

func scrub(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	return &scrubbed{err: err, secret: secret}
}
