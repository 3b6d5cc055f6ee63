package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/console"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/drills"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/sessions"
)

// drainGrace bounds how long a signalled shutdown waits for in-flight turns
// before it cancels them.
const drainGrace = 30 * time.Second

// runFlags are the flags of `bot run`.
type runFlags struct {
	config   string
	format   string
	db       string
	logLevel string
}

// runBot is `bot run`: it loads the configuration (or the embedded demo), wires
// store, engine, LLM clients, router and adapters, and serves until every adapter
// has ended (the console at end of input) or a signal arrives. In both cases the
// queued turns are drained before exit. Exit 2 on a bad configuration.
func runBot(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file (default ./config.yaml if it exists, else the embedded demo)")
	fs.StringVar(&f.format, "format", "", "console format: text or jsonl (overrides channels.console.format)")
	fs.StringVar(&f.db, "db", "", "SQLite database file (overrides storage.dsn)")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: debug, info, warn or error (default info; warn in the demo)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bot run: unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}

	start := time.Now()
	src, err := resolveConfig(f.config)
	if err != nil {
		fmt.Fprintf(stderr, "bot: %v\n", err)
		return exitUsage
	}
	var demo *fakeprovider.Server
	if src.demo {
		demo, err = startDemoLLM()
		if err != nil {
			fmt.Fprintf(stderr, "bot: demo: %v\n", err)
			return exitFailed
		}
		defer demo.Close()
		src.baseURL = demo.URL()
	}
	cfg, err := src.load()
	if err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}
	if err := applyRunFlags(cfg, f); err != nil {
		fmt.Fprintf(stderr, "bot: %v\n", err)
		return exitUsage
	}
	level := slog.LevelInfo
	if src.demo {
		level = slog.LevelWarn
	}
	if f.logLevel != "" {
		if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
			fmt.Fprintf(stderr, "bot: bad --log-level %q: want debug, info, warn or error\n", f.logLevel)
			return exitUsage
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	b, err := newBot(ctx, cfg, ioSet{stdin: stdin, stdout: stdout, stderr: stderr}, log)
	if err != nil {
		var ce *configProblem
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "bot: %v\n", err)
			return exitUsage
		}
		log.Error("start failed", "err", err)
		return exitFailed
	}
	defer b.close()
	if src.demo {
		demoBanner(stderr, cfg)
	}
	log.Info("ready", "config", src.name(), "channels", b.channelNames(), "startup", time.Since(start).Round(time.Microsecond))
	if err := b.serve(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailed
	}
	return exitOK
}

// applyRunFlags applies command-line overrides to the configuration.
func applyRunFlags(cfg *config.Config, f runFlags) error {
	switch f.format {
	case "":
	case console.FormatText, console.FormatJSONL:
		cfg.Channels.Console.Format = f.format
		cfg.Channels.Console.Enabled = true
	default:
		return fmt.Errorf("bad --format %q: want text or jsonl", f.format)
	}
	if f.db != "" {
		cfg.Storage.DSN = f.db
	}
	return nil
}

// ioSet is the process's standard streams.
type ioSet struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// configProblem is a start-up failure caused by the configuration (exit 2).
type configProblem struct{ msg string }

func (e *configProblem) Error() string { return e.msg }

// bot is one wired, running instance.
type bot struct {
	cfg      *config.Config
	log      *slog.Logger
	db       *gorm.DB
	router   *sessions.Router
	adapters []adapters.Adapter
	clients  *clientCache
}

// newBot opens the store and wires engine, clients, router and adapters. Nothing
// runs until serve. It is what start-up time measures (BENCHMARKS.md).
func newBot(ctx context.Context, cfg *config.Config, std ioSet, log *slog.Logger) (_ *bot, err error) {
	b := &bot{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	b.adapters, err = buildAdapters(cfg, std, log)
	if err != nil {
		return nil, err
	}
	if len(b.adapters) == 0 {
		return nil, &configProblem{"no channel is enabled: enable channels.console, channels.slack or channels.discord"}
	}
	if b.db, err = store.Open(ctx, cfg.Storage.DSN, log); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	states, err := store.NewStateStore(b.db)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	clock := failover.WallClock{}
	engine := &failover.Engine{
		Store:  states,
		Clock:  clock,
		Policy: cfg.Policy(),
		Guard:  failover.NewGuard(cfg.Limits.MaxPaidAttemptsPerMinute, clock),
		Log:    log,
	}
	b.clients = newClientCache(cfg, log)
	b.router, err = sessions.NewRouter(drills.SessionsConfig(cfg), sessions.Options{
		DB: b.db, Engine: engine, Clock: clock, Clients: b.clients.get, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	for _, a := range b.adapters {
		b.router.AddAdapter(a)
		if l, ok := a.(adapters.SessionLookup); ok {
			l.SetSessionLookup(b.router.Known)
		}
	}
	return b, nil
}

// channelNames lists the running adapters.
func (b *bot) channelNames() string {
	names := make([]string, len(b.adapters))
	for i, a := range b.adapters {
		names[i] = a.Name()
	}
	return strings.Join(names, ",")
}

// serve runs every adapter and the router until every adapter has ended (the
// console ends at end of input) or ctx ends, then drains the queued turns. After
// a signal, in-flight turns get drainGrace to finish before they are cancelled.
func (b *bot) serve(ctx context.Context) error {
	inbox := make(chan adapters.Inbound)
	actx, cancelAdapters := context.WithCancel(ctx)
	defer cancelAdapters()

	var wg sync.WaitGroup
	errs := make(chan error, len(b.adapters))
	for _, a := range b.adapters {
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
	go func() { routerDone <- b.router.Run(context.WithoutCancel(ctx), inbox) }()

	wg.Wait()
	close(inbox) // every sender has returned; the router handles what was sent
	<-routerDone

	var runErr error
	select {
	case runErr = <-errs:
	default:
	}
	if ctx.Err() != nil {
		b.log.Info("signal received: finishing in-flight turns", "grace", drainGrace)
		dctx, cancel := context.WithTimeout(context.Background(), drainGrace)
		// A second signal cuts the grace short.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case <-sig:
				cancel()
			case <-dctx.Done():
			}
		}()
		err := b.router.Drain(dctx)
		cancel()
		signal.Stop(sig)
		if err != nil {
			b.log.Warn("in-flight turns did not finish in time; cancelling them", "err", err)
		}
		return runErr
	}
	// End of input: answer everything that was typed, however long it takes.
	if err := b.router.Drain(context.Background()); err != nil {
		return err
	}
	return runErr
}

// close cancels whatever still runs and releases the database.
func (b *bot) close() {
	if b.router != nil {
		b.router.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.router.Drain(ctx)
		cancel()
		b.router = nil
	}
	if b.clients != nil {
		b.clients.closeIdle()
	}
	if b.db != nil {
		if err := store.Close(b.db); err != nil {
			b.log.Warn("closing the database", "err", err)
		}
		b.db = nil
	}
}

// adapterFactory builds one chat channel from the configuration.
type adapterFactory func(cfg *config.Config, log *slog.Logger) (adapters.Adapter, error)

// adapterFactories holds the Slack and Discord constructors. Each lives in its
// own file of this package (slack.go, discord.go) and registers itself here from
// an init function:
//
//	func init() { adapterFactories["slack"] = newSlackAdapter }
var adapterFactories = map[string]adapterFactory{}

// buildAdapters returns the enabled channels: the console here, and every other
// enabled channel through its registered factory.
func buildAdapters(cfg *config.Config, std ioSet, log *slog.Logger) ([]adapters.Adapter, error) {
	var out []adapters.Adapter
	if c := cfg.Channels.Console; c.Enabled {
		out = append(out, console.New(console.Options{
			Format:          c.Format,
			In:              std.stdin,
			Out:             std.stdout,
			Reports:         cfg.Admin.Channel == "console",
			MaxMessageBytes: cfg.Limits.MaxMessageBytes,
		}))
	}
	for _, ch := range []struct {
		name    string
		enabled bool
	}{
		{"slack", cfg.Channels.Slack.Enabled},
		{"discord", cfg.Channels.Discord.Enabled},
	} {
		if !ch.enabled {
			continue
		}
		factory := adapterFactories[ch.name]
		if factory == nil {
			return nil, &configProblem{fmt.Sprintf("channels.%s is enabled but this binary has no %s support", ch.name, ch.name)}
		}
		a, err := factory(cfg, log)
		if err != nil {
			return nil, &configProblem{fmt.Sprintf("channels.%s: %v", ch.name, err)}
		}
		out = append(out, a)
	}
	return out, nil
}

// clientCache builds one LLM client per provider and profile, on first use.
type clientCache struct {
	cfg *config.Config
	log *slog.Logger
	mu  sync.Mutex
	m   map[string]*llm.Client
}

func newClientCache(cfg *config.Config, log *slog.Logger) *clientCache {
	return &clientCache{cfg: cfg, log: log, m: map[string]*llm.Client{}}
}

// get returns the client of provider with profileID ("" = no credential).
func (c *clientCache) get(provider, profileID string) (sessions.LLM, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := provider + "\x00" + profileID
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	p, ok := c.cfg.Providers[provider]
	if !ok {
		return nil, fmt.Errorf("provider %q is not configured", provider)
	}
	var apiKey string
	if profileID != "" {
		prof, ok := c.cfg.Auth.Profiles[profileID]
		if !ok || prof.Provider != provider {
			return nil, fmt.Errorf("profile %q of provider %q is not configured", profileID, provider)
		}
		apiKey = prof.Key.Reveal()
	}
	cl, err := llm.New(llm.Config{
		Provider:    provider,
		BaseURL:     p.BaseURL,
		ProfileID:   profileID,
		APIKey:      apiKey,
		IdleTimeout: c.cfg.Agents.Defaults.Timeouts.Idle,
		Logger:      c.log,

		MaxResponseBytes: c.cfg.Limits.MaxResponseBytes, // T1
		MaxAnswerBytes:   c.cfg.Limits.MaxAnswerBytes,
	})
	if err != nil {
		return nil, err
	}
	c.m[key] = cl
	return cl, nil
}

func (c *clientCache) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.CloseIdleConnections()
	}
}

// configSource says where the configuration comes from.
type configSource struct {
	path    string // a file, or "" for the embedded demo
	demo    bool
	baseURL string // the demo fake's root URL (set once it runs)
}

func (s configSource) name() string {
	if s.demo {
		return demoConfigName
	}
	return s.path
}

// resolveConfig applies the rule: --config PATH, else ./config.yaml if it exists,
// else the embedded demo.
func resolveConfig(flagPath string) (configSource, error) {
	if flagPath != "" {
		return configSource{path: flagPath}, nil
	}
	if _, err := os.Stat("config.yaml"); err == nil {
		return configSource{path: "config.yaml"}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return configSource{}, fmt.Errorf("config.yaml: %w", err)
	}
	return configSource{demo: true}, nil
}

func (s configSource) load() (*config.Config, error) {
	if s.demo {
		return demoConfig(s.baseURL)
	}
	return config.Load(s.path)
}

// printConfigError prints every configuration problem on its own line.
func printConfigError(w io.Writer, err error) {
	if errs := config.Errors(err); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(w, e.Error())
		}
		fmt.Fprintf(w, "bot: the configuration has %d problem(s); nothing was started\n", len(errs))
		return
	}
	fmt.Fprintf(w, "bot: %v\n", err)
}
