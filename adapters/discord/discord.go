// Package discord is the Discord channel: it turns mentions, thread messages,
// DMs, application commands and picks in its select menus into
// adapters.Inbound, and posts adapters.Outbound back as channel messages or
// interaction answers. It shows the typing indicator while a turn runs
// (adapters.Progress) and streams replies as one message edited as it grows
// (adapters.Streamer); with Config.Threads a question opens a thread.
//
// What runs where: the connection is a link.Link (discordgo's REST calls, the
// gateway read there). The gateway's reader runs the event handlers, which make
// no network call: an interaction gets its own goroutine, which answers Discord
// within its 3-second deadline; a message goes to its channel's lane
// (lanes.Lanes: one goroutine per busy channel, in order, bounded). A streamed
// reply and the typing indicator run on goroutines of the live kit.
package discord

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/discord/link"
	"github.com/detourbot/detour/lanes"
)

// Name is the adapter name used in Inbound.Channel and Outbound.Channel.
const Name = "discord"

// Intents the bot identifies with; message content is privileged (enable it in
// the developer portal).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// Config configures the adapter.
type Config struct {
	Token string // the bot token (secret; never logged); a leading "Bot " is accepted
	// GuildID, when set, registers application commands in that guild only
	// (instant propagation); otherwise they are registered globally.
	GuildID string
	// APIURL overrides https://discord.com (a fake's http://127.0.0.1:P, say),
	// which also gives the gateway URL (GET /api/v9/gateway/bot).
	APIURL string
	// NoMessageContent identifies without the privileged MESSAGE_CONTENT intent:
	// mention-only mode (channels.discord.message_content: false), which the bot
	// also falls back to when Discord refuses the intent (close code 4014).
	NoMessageContent bool
	// ShardID and ShardCount are sent in Identify when ShardCount > 1.
	ShardID, ShardCount int
	Log                 *slog.Logger    // default slog.Default()
	Models              func() []string // the model refs, for /model autocomplete
	Profiles            func() []string // the auth profile ids, for "model@profile"
	// Threads: a question that mentions the bot outside a thread starts a thread
	// from it, named from the question, where the answer and the rest of the
	// conversation go (config channels.discord.threads).
	Threads bool
	// EditEvery is the least time between two edits of a streamed reply (default
	// 1s, real time); Discord's rate-limit buckets are honoured besides.
	EditEvery   time.Duration
	TLS         *tls.Config // for REST and the gateway (tests trust a fake's certificate)
	link.Timing             // rate-limit waits, reconnects, REST and handshake timeouts, the clock
}

// Adapter is the Discord channel. It implements adapters.Adapter, Progress (the
// typing indicator), Streamer (a reply edited as it grows) and Connector.
type Adapter struct {
	cfg  Config // Token without "Bot "
	log  *slog.Logger
	link *link.Link
	rest *discordgo.Session // the link's REST session

	mu        sync.Mutex
	ctx       context.Context // Run's, ended when Run returns; nil before Run
	inbox     chan<- adapters.Inbound
	answering chan struct{}  // a slot per interaction goroutine running
	wg        sync.WaitGroup // every goroutine the adapter starts

	lanes       *lanes.Lanes[job] // each channel's inbound events, in order
	typers      sync.Map          // channel id -> its typing indicator (*live.Indicator)
	typingEvery time.Duration

	threads      *adapters.Recent             // thread ids the bot takes part in
	notThreads   *adapters.Recent             // channel ids known not to be threads
	noTyping     *adapters.Recent             // channels that refused the typing indicator
	seen         *adapters.Recent             // event ids already delivered (resume replays)
	interactions *lru.Cache[string, *pending] // by interaction id

	mayTalk atomic.Pointer[func(user string) bool] // access.users (SetAccess); unset = everyone
	status  status                                 // the health board's status message (board.go)
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Progress  = (*Adapter)(nil)
	_ adapters.Streamer  = (*Adapter)(nil)
	_ adapters.Connector = (*Adapter)(nil)

	_ adapters.AccessFilter = (*Adapter)(nil)
)

// New builds the adapter; nothing connects until Run.
func New(cfg Config) (*Adapter, error) {
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot "))
	if tok == "" {
		return nil, errors.New("discord: token is empty")
	}
	if cfg.ShardCount < 0 || cfg.ShardID < 0 || (cfg.ShardCount > 0 && cfg.ShardID >= cfg.ShardCount) || (cfg.ShardCount == 0 && cfg.ShardID > 0) {
		return nil, fmt.Errorf("discord: shard %d of %d: want 0 <= shard_id < shard_count", cfg.ShardID, cfg.ShardCount)
	}
	var api *url.URL
	if cfg.APIURL != "" {
		u, err := url.Parse(strings.TrimRight(cfg.APIURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discord: api_url %q must be an http(s) base URL", cfg.APIURL)
		}
		api = u
	}
	cfg.Token, cfg.Timing = tok, cfg.Timing.WithDefaults()
	if cfg.EditEvery <= 0 {
		cfg.EditEvery = defaultEditEvery
	}
	cfg.Log = cmp.Or(cfg.Log, slog.Default())
	if cfg.Models == nil {
		cfg.Models = func() []string { return nil }
	}
	if cfg.Profiles == nil {
		cfg.Profiles = func() []string { return nil }
	}
	log := cfg.Log.With("channel", Name)
	a := &Adapter{
		cfg:         cfg,
		log:         log,
		threads:     adapters.NewRecent(4096, 0, nil),
		notThreads:  adapters.NewRecent(4096, 0, nil),
		noTyping:    adapters.NewRecent(4096, noTypingFor, cfg.Now),
		seen:        adapters.NewRecent(2048, 0, nil),
		answering:   make(chan struct{}, maxAnswering),
		typingEvery: typingEvery,
	}
	a.interactions, _ = lru.New[string, *pending](512) // only a size < 1 errs
	a.lanes = lanes.New(a.handle, workerQueue, maxWorkers, 0)
	a.link = link.New(link.Config{Token: tok, API: api, TLS: cfg.TLS, Shard: [2]int{cfg.ShardID, cfg.ShardCount},
		Intent: Intents, MentionOnly: cfg.NoMessageContent, Log: log, Timing: cfg.Timing,
		Dispatch: a.onEvent,
		Identified: func(ctx context.Context) {
			if err := a.registerCommands(ctx); err != nil {
				a.log.Error("discord command registration failed", "err", err)
			}
		}})
	a.rest = a.link.REST()
	return a, nil
}

// Name returns "discord".
func (a *Adapter) Name() string { return Name }

// Connected reports whether a gateway connection is up now.
func (a *Adapter) Connected() bool { return a.link.Connected() }

// Run connects to the gateway, registers the application commands and delivers
// messages to inbox until ctx ends; it reconnects (resuming the session where
// Discord allows) whenever the connection drops. It returns nil when ctx ends, an
// error when Discord refuses the token, the shard or the intents for good; what
// it started (lanes, interactions, streams, typing) has ended by then.
func (a *Adapter) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	ctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	if a.ctx != nil {
		a.mu.Unlock()
		cancel()
		return errors.New("discord: Run called twice")
	}
	a.ctx, a.inbox = ctx, inbox
	a.mu.Unlock()
	defer a.link.Close()
	defer func() {
		a.mu.Lock()
		cancel() // under mu: nothing starts once StartProgress or goOwned has seen it
		a.mu.Unlock()
		a.lanes.Close()
		_ = a.lanes.Wait(context.Background()) // the lanes see ctx ended and skip their work
		a.wg.Wait()
	}()
	return a.link.Run(ctx)
}

// goOwned starts f on a goroutine Run waits for, unless Run is ending; it reports
// whether f was started.
func (a *Adapter) goOwned(f func(ctx context.Context)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.ctx.Err() != nil {
		return false
	}
	ctx := a.ctx
	a.wg.Go(func() { f(ctx) })
	return true
}

// Probe checks the bot token (GET /users/@me) and, when target names a channel
// id, that the channel exists and the bot may see it (GET /channels/{id}).
// Nothing is posted and no gateway connection is opened.
func (a *Adapter) Probe(ctx context.Context, target string) []adapters.ProbeResult {
	me, err := a.rest.User("@me", discordgo.WithContext(ctx))
	out := []adapters.ProbeResult{adapters.Checked("discord bot token (GET /users/@me)", link.Err("GET /users/@me", a.cfg.Token, err),
		func() string { return "bot user " + me.Username + " (" + me.ID + ")" })}
	if target == "" {
		return out
	}
	ch, err := a.rest.Channel(target, discordgo.WithContext(ctx))
	return append(out, adapters.Checked("discord admin channel "+target+" (GET /channels)", link.Err("GET /channels/"+target, a.cfg.Token, err),
		func() string {
			if ch.Name == "" {
				return "reachable"
			}
			return "#" + ch.Name
		}))
}
