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
	"syscall"
	"time"

	"github.com/detourbot/detour/adapters/console"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/fakeprovider"
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

	sys, err := app.New(ctx, cfg, app.Options{Log: log, Stdin: stdin, Stdout: stdout})
	if err != nil {
		if app.IsConfigError(err) {
			fmt.Fprintf(stderr, "bot: %v\n", err)
			return exitUsage
		}
		log.Error("start failed", "err", err)
		return exitFailed
	}
	defer sys.Close()
	if src.demo {
		demoBanner(stderr, cfg)
	}
	log.Info("ready", "config", src.name(), "channels", sys.ChannelNames(), "startup", time.Since(start).Round(time.Microsecond))
	if err := serve(ctx, sys, log); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailed
	}
	return exitOK
}

// serve runs the system until its channels end (the console at end of input) or a
// signal arrives, then drains the queued turns: after end of input it answers
// everything that was typed, however long it takes; after a signal in-flight turns
// get drainGrace to finish (a second signal cuts it short) before they are
// cancelled.
func serve(ctx context.Context, sys *app.System, log *slog.Logger) error {
	runErr := sys.Serve(ctx)
	if ctx.Err() == nil {
		if err := sys.Drain(context.Background()); err != nil {
			return err
		}
		return runErr
	}
	log.Info("signal received: finishing in-flight turns", "grace", drainGrace)
	dctx, cancel := context.WithTimeout(context.Background(), drainGrace)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			cancel()
		case <-dctx.Done():
		}
	}()
	if err := sys.Drain(dctx); err != nil {
		log.Warn("in-flight turns did not finish in time; cancelling them", "err", err)
	}
	return runErr
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
