// Package app is the one place that turns a loaded configuration into a running
// detour: store → failover engine → LLM clients → session router → chat adapters,
// and closes them again in the reverse order. The bot, the drills and the
// end-to-end tests all start the system through it, so what a drill or a test
// exercises is exactly what the bot runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/console"
	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/opsserver"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/sessions"
)

// Options are what a caller adds to the configuration. Every field is optional.
type Options struct {
	// Log receives the system's logs; nil discards them.
	Log *slog.Logger
	// Clock drives the engine, the router and the LLM clients' reading of stated
	// waits; nil = the wall clock. Tests and drills pass a fake one.
	Clock failover.Clock
	// Stdin and Stdout are the console channel's streams (when it is enabled);
	// Interactive says a person types at a terminal (a prompt is shown).
	Stdin       io.Reader
	Stdout      io.Writer
	Interactive bool
	// Adapters are extra channels beside the configured ones (a drill's recorder,
	// a test's probe); each receives the Outbound messages addressed to its Name.
	Adapters []adapters.Adapter
	// Clients replaces the LLM client factory (tests with an in-process model);
	// nil = one go-openai client per provider and profile, from the configuration.
	Clients func(provider, profileID string) (sessions.LLM, error)
	// Policy adjusts the engine's policy after it is taken from the configuration
	// (a test turning jitter off).
	Policy func(*failover.Policy)
	// Version names the build in /readyz; "" = not shown.
	Version string
}

// closeGrace bounds how long Close waits for turns it has cancelled.
const closeGrace = 5 * time.Second

// ConfigError is a start-up failure caused by the configuration (the bot exits 2).
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// System is one wired detour. Build it with New, run it with Serve, finish with
// Drain and Close.
type System struct {
	Config   *config.Config
	DB       *gorm.DB
	Engine   *failover.Engine
	Router   *sessions.Router
	Adapters []adapters.Adapter

	log     *slog.Logger
	clients *clientCache

	// The operations endpoint (M5), when server.listen is set: listening from
	// New, serving from Serve until Close.
	metrics   *opsserver.Metrics
	ops       *opsserver.Server
	opsMu     sync.Mutex
	opsCancel context.CancelFunc // nil until Serve starts it
	opsDone   chan struct{}
	stopping  atomic.Bool // Serve has returned: /readyz says so

	board  *boardFeed         // the live health board (board.go), when a channel shows it
	alerts *alerts.Dispatcher // alerts.webhooks (issue 38); nil = none
}

// New opens the store and wires the engine, the LLM clients, the router and the
// adapters. Nothing runs until Serve. On error everything opened so far is closed.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *System, err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := opts.Clock
	if clock == nil {
		clock = failover.WallClock{}
	}
	s := &System{Config: cfg, log: log}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	s.Adapters, err = buildAdapters(cfg, opts, log)
	if err != nil {
		return nil, err
	}
	s.Adapters = append(s.Adapters, opts.Adapters...)
	if len(s.Adapters) == 0 {
		return nil, &ConfigError{config.NoChannel}
	}

	if s.DB, err = database.Open(ctx, cfg.Storage.Driver, cfg.Storage.DSN, log); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	states, err := store.NewStateStore(s.DB)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	var stateStore failover.StateStore = states
	if s.alerts, err = newAlerts(ctx, cfg, s.DB, clock, log); err != nil {
		return nil, err
	}
	if s.alerts != nil {
		stateStore = alerts.WatchStates(states, clock.Now, s.alerts.Alert) // key_disabled
	}
	policy := cfg.Policy
	// The engine's own slices and map, so opts.Policy cannot change cfg's.
	policy.CooldownLadder = slices.Clone(policy.CooldownLadder)
	policy.BillingBackoffByProvider = maps.Clone(policy.BillingBackoffByProvider)
	if opts.Policy != nil {
		opts.Policy(&policy)
	}
	s.Engine = &failover.Engine{
		Store:  stateStore,
		Clock:  clock,
		Policy: policy,
		Guard:  failover.NewGuard(cfg.Limits.MaxPaidAttemptsPerMinute, clock),
		Log:    log,
	}

	clients := opts.Clients
	if clients == nil {
		s.clients = &clientCache{cfg: cfg, log: log, now: clock.Now, m: map[string]*llm.Client{}}
		clients = s.clients.get
	}
	var observer sessions.Observer
	if cfg.Server.Listen != "" {
		s.metrics = opsserver.NewMetrics(s.availability, metricNames(cfg), log)
		observer = s.metrics
	}
	observer = s.wireBoard(cfg, clock, observer) // issue 38: the live health board (board.go)
	scfg := SessionsConfig(cfg)
	if !opts.Interactive {
		// Live replies on the console are for a person at a terminal; scripts
		// and the jsonl contract get one answer per line.
		scfg.NoStream = setFlag(scfg.NoStream, console.Name)
		scfg.NoProgress = setFlag(scfg.NoProgress, console.Name)
	}
	ropts := sessions.Options{DB: s.DB, Engine: s.Engine, Clock: clock, Clients: clients, Log: log, Observer: observer}
	if s.alerts != nil {
		ropts.Alerter = s.alerts
		if s.metrics != nil {
			s.metrics.Registry().MustRegister(s.alerts.Collectors()...)
		}
		s.alerts.Start()
	}
	s.Router, err = sessions.NewRouter(scfg, ropts)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	mayTalk := MayTalk(cfg)
	for _, a := range s.Adapters {
		s.Router.AddAdapter(a)
		if l, ok := a.(adapters.SessionLookup); ok {
			l.SetSessionLookup(s.Router.Known)
		}
		if f, ok := a.(adapters.AccessFilter); ok {
			f.SetAccess(mayTalk)
		}
	}
	if s.metrics != nil {
		s.ops, err = opsserver.Listen(cfg.Server.Listen, s.metrics, opsserver.Checks{
			Ping: s.ping, Disconnected: s.disconnected, Stopping: s.stopping.Load, Version: opts.Version,
		}, log)
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// MayTalk is who access.users lets talk to the bot (T5): the users it lists
// and the admins (admin.users); nil when it lists none, so everyone may. The
// adapters that read earlier messages leave out those of anyone else (H4).
func MayTalk(cfg *config.Config) func(user string) bool {
	if len(cfg.Access.Users) == 0 {
		return nil
	}
	users, admins := slices.Clone(cfg.Access.Users), slices.Clone(cfg.Admin.Users)
	return func(user string) bool {
		return user != "" && (slices.Contains(users, user) || slices.Contains(admins, user))
	}
}

func setFlag(m map[string]bool, key string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[key] = true
	return m
}

// ChannelNames lists the running channels, comma-separated.
func (s *System) ChannelNames() string {
	names := make([]string, len(s.Adapters))
	for i, a := range s.Adapters {
		names[i] = a.Name()
	}
	return strings.Join(names, ",")
}

// Serve runs every adapter and the router until every adapter has ended (the
// console ends at end of input) or ctx ends. Turns already handed to the router
// keep running after ctx ends: call Drain to wait for them. An adapter that fails
// stops the others, and its error is returned.
func (s *System) Serve(ctx context.Context) error {
	s.startOps()
	defer s.stopping.Store(true)
	inbox := make(chan adapters.Inbound)
	actx, cancelAdapters := context.WithCancel(ctx)
	defer cancelAdapters()

	var wg sync.WaitGroup
	errs := make(chan error, len(s.Adapters))
	for _, a := range s.Adapters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := a.Run(actx, inbox)
			if err != nil && actx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", a.Name(), err)
				cancelAdapters() // one channel failing stops the bot
			}
		}()
	}
	routerDone := make(chan error, 1)
	go func() { routerDone <- s.Router.Run(context.WithoutCancel(ctx), inbox) }()

	wg.Wait()
	close(inbox) // every sender has returned; the router handles what was sent
	<-routerDone
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// Disconnected names the channels that hold a connection to their platform
// (adapters.Connector) and are not connected now.
func (s *System) disconnected() []string {
	var out []string
	for _, a := range s.Adapters {
		if c, ok := a.(adapters.Connector); ok && !c.Connected() {
			out = append(out, a.Name())
		}
	}
	return out
}

// Connected reports whether every channel that holds a connection to its
// platform (adapters.Connector) is connected now.
func (s *System) Connected() bool {
	for _, a := range s.Adapters {
		if c, ok := a.(adapters.Connector); ok && !c.Connected() {
			return false
		}
	}
	return true
}

// WaitConnected waits until Connected, or ctx ends (its error is returned).
func (s *System) WaitConnected(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.Connected() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Drain waits until every queued and running turn has finished, or ctx ends (then
// the running turns are cancelled and ctx's error is returned).
func (s *System) Drain(ctx context.Context) error { return s.Router.Drain(ctx) }

// Close cancels whatever still runs and releases the clients and the database, in
// that order. It is safe to call more than once and on a partly built System.
func (s *System) Close() {
	s.stopOps()
	s.stopBoard()
	if s.Router != nil {
		s.Router.Close()
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		_ = s.Router.Drain(ctx)
		cancel()
		s.Router = nil
	}
	if s.alerts != nil {
		// After the router: the turns' last events are queued. Those still
		// queued get closeGrace, then are counted as dropped.
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		s.alerts.Close(ctx)
		cancel()
		s.alerts = nil
	}
	if s.clients != nil {
		s.clients.closeIdle()
	}
	if s.DB != nil {
		if err := database.Close(s.DB); err != nil {
			s.log.Warn("closing the database", "err", err)
		}
		s.DB = nil
	}
}

// Channels builds the configured chat channels without running them, for a
// caller that only probes them (`bot check --probe`).
func Channels(cfg *config.Config, log *slog.Logger) ([]adapters.Adapter, error) {
	return buildAdapters(cfg, Options{Log: log}, log)
}

// buildAdapters returns the configured channels.
func buildAdapters(cfg *config.Config, opts Options, log *slog.Logger) ([]adapters.Adapter, error) {
	var out []adapters.Adapter
	if c := cfg.Channels.Console; c.Enabled {
		out = append(out, console.New(console.Options{
			Format:          c.Format,
			In:              opts.Stdin,
			Out:             opts.Stdout,
			Reports:         cfg.Admin.Channel == "console",
			MaxMessageBytes: cfg.Limits.MaxMessageBytes,
			Interactive:     opts.Interactive,
		}))
	}
	models := modelStrings(cfg.ModelRefs())
	if s := cfg.Channels.Slack; s.Enabled {
		a, err := slack.New(slack.Config{
			AppToken:         s.AppToken.Reveal(),
			BotToken:         s.BotToken.Reveal(),
			APIURL:           s.APIURL,
			MentionsOnly:     s.Events == "mentions",
			Log:              log,
			Models:           func() []string { return models },
			SuggestedPrompts: append([]string(nil), s.SuggestedPrompts...),
		})
		if err != nil {
			return nil, &ConfigError{fmt.Sprintf("channels.slack: %v", err)}
		}
		out = append(out, a)
	}
	if d := cfg.Channels.Discord; d.Enabled {
		profiles := cfg.ProfileIDs()
		a, err := discord.New(discord.Config{
			Token:            d.Token.Reveal(),
			GuildID:          d.GuildID,
			APIURL:           d.APIURL,
			NoMessageContent: !d.MessageContent,
			ShardID:          d.ShardID,
			ShardCount:       d.ShardCount,
			Threads:          d.Threads,
			Log:              log,
			Models:           func() []string { return models },
			Profiles:         func() []string { return profiles },
		})
		if err != nil {
			return nil, &ConfigError{fmt.Sprintf("channels.discord: %v", err)}
		}
		out = append(out, a)
	}
	return out, nil
}

func modelStrings(refs []failover.ModelRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = string(r)
	}
	return out
}

// clientCache builds one LLM client per provider and profile, on first use.
type clientCache struct {
	cfg *config.Config
	log *slog.Logger
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*llm.Client
}

// get returns the client of provider with profileID ("" = no credential).
func (c *clientCache) get(provider, profileID string) (sessions.LLM, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := provider + "\x00" + profileID
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	cl, err := LLMClient(c.cfg, provider, profileID, c.log, c.now)
	if err != nil {
		return nil, err
	}
	c.m[key] = cl
	return cl, nil
}

// LLMClient builds the client of provider with profileID ("" = no credential)
// as the bot uses it: the configured protocol (api), base URL, api version,
// Azure deployments, key, idle timeout and input caps (T1). now reads stated waits; nil = the wall clock.
func LLMClient(cfg *config.Config, provider, profileID string, log *slog.Logger, now func() time.Time) (*llm.Client, error) {
	p, ok := cfg.Providers[provider]
	if !ok {
		return nil, fmt.Errorf("provider %q is not configured", provider)
	}
	var apiKey string
	if profileID != "" {
		prof, ok := cfg.Auth.Profiles[profileID]
		if !ok || prof.Provider != provider {
			return nil, fmt.Errorf("profile %q of provider %q is not configured", profileID, provider)
		}
		apiKey = prof.Key.Reveal()
	}
	return llm.New(llm.Config{
		Provider:         provider,
		API:              llm.API(p.API),
		BaseURL:          p.BaseURL,
		APIVersion:       p.APIVersion,
		Deployments:      cfg.Deployments(provider),
		ProfileID:        profileID,
		APIKey:           apiKey,
		IdleTimeout:      cfg.Agents.Defaults.IdleTimeout,
		MaxResponseBytes: cfg.Limits.MaxResponseBytes,
		MaxAnswerBytes:   cfg.Limits.MaxAnswerBytes,
		Logger:           log,
		Now:              now,
	})
}

func (c *clientCache) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.CloseIdleConnections()
	}
}

// IsConfigError reports whether err was caused by the configuration.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}
