package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/detourbot/detour/adapters/console"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/logunits"
	"github.com/detourbot/detour/internal/termsafe"
)

// drainGrace bounds how long a signalled shutdown waits for in-flight turns
// before it cancels them.
const drainGrace = 30 * time.Second

// runFlags are the flags of `bot run`.
type runFlags struct {
	format    string
	db        string
	logLevel  string
	logFormat string
	logFile   string
}

// runBot is `bot run`: it loads the configuration (or the embedded demo), wires
// store, engine, LLM clients, router and adapters, and serves until every adapter
// has ended (the console at end of input) or a signal arrives. In both cases the
// queued turns are drained before exit. Exit 2 on a bad configuration.
func runBot(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var f runFlags
	fs, path, envFile := configFlags("run")
	fs.StringVar(&f.format, "format", "", "console format: text or jsonl (overrides channels.console.format)")
	fs.StringVar(&f.db, "db", "", "SQLite database file (overrides storage.dsn)")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: debug, info, warn or error (default info; warn in the demo)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json (one JSON object per line)")
	fs.StringVar(&f.logFile, "log-file", "", `write logs to this file instead of stderr (default: stderr; "detour.log" when chatting in the terminal, "detour-demo.log" in the demo)`)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	start := time.Now()
	if *path == "" {
		// config.yml beside no config.yaml: the demo would start and leave it unread.
		if e := config.MisnamedConfig("."); e != nil {
			fmt.Fprintln(stderr, "warning: "+e.Error())
		}
	}
	src, cfg, closeDemo, code := loadConfig("bot", *path, *envFile, true, stderr)
	if code != exitOK {
		return code
	}
	defer closeDemo()
	if err := applyRunFlags(cfg, f); err != nil {
		fmt.Fprintf(stderr, "bot: %v\n", err)
		return exitUsage
	}
	printWarnings(stderr, cfg, true)
	if refusedWithoutChannel(stderr, src, cfg) {
		return exitUsage
	}
	// A person chatting in the terminal should not see log lines in the chat:
	// when stdin and stderr are one terminal, logs go to a file.
	interactive := cfg.Channels.Console.Enabled && cfg.Channels.Console.Format != console.FormatJSONL && isTerminal(stdin)
	if f.logFile == "" && interactive && isTerminal(stderr) {
		f.logFile = "detour.log"
		if src.demo {
			f.logFile = "detour-demo.log"
		}
	}
	log, closeLog, err := newLogger(f, src.demo, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bot: %v\n", err)
		return exitUsage
	}
	defer closeLog()

	build := readBuildInfo()
	sys, err := app.New(ctx, cfg, app.Options{Log: log, Stdin: stdin, Stdout: stdout, Interactive: interactive, Version: build.Short()})
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
		demoBanner(stderr, cfg, f.logFile)
	} else if interactive && f.logFile != "" {
		fmt.Fprintf(stderr, "detour: chatting in the terminal; logs go to %s. Ctrl-D quits.\n", f.logFile)
	}
	// The run owns its two watchers: they end before the system closes and
	// the log file with it (a "ready" line written after would go nowhere).
	var watchers sync.WaitGroup
	wctx, stopWatchers := context.WithCancel(ctx)
	defer watchers.Wait()
	defer stopWatchers()
	watchers.Go(func() {
		// "ready" means every channel that holds a connection is connected.
		if sys.WaitConnected(wctx) == nil {
			log.Info("ready", "version", build.Short(), "config", src.name(), "channels", sys.ChannelNames(), "startup", time.Since(start).Round(time.Microsecond))
		}
	})
	rctx, restart := context.WithCancelCause(wctx)
	defer restart(nil)
	watchers.Go(func() { watchReload(rctx, hup, src, log, func() { restart(errReload) }) })
	if err := serve(rctx, sys, log, interactive, stderr); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailed
	}
	if errors.Is(context.Cause(rctx), errReload) {
		log.Info("reload: in-flight turns finished; exiting so the supervisor starts the bot on the new configuration", "exit", exitRestart)
		return exitRestart
	}
	return exitOK
}

// errReload is the cause of a run ended by a SIGHUP whose configuration is good.
var errReload = errors.New("reload requested (SIGHUP)")

// watchReload answers each SIGHUP until ctx ends: it reads the configuration
// again; a good one ends the run (reload), which drains the in-flight turns and
// exits with exitRestart so that the supervisor starts the bot on it. A
// configuration with problems is refused: they are logged, and the bot keeps
// running on the one it started with, so a typo never takes it down.
func watchReload(ctx context.Context, hup <-chan os.Signal, src configSource, log *slog.Logger, reload func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if !src.demo {
			if _, err := src.load(); err != nil {
				n := 0
				for _, e := range config.Errors(err) {
					log.Error("reload refused: configuration problem", "problem", e.Error())
					n++
				}
				if n == 0 {
					log.Error("reload refused: configuration problem", "problem", err.Error())
				}
				log.Warn("reload refused: the bot keeps running on the configuration it started with; fix the file and send SIGHUP again", "config", src.name())
				continue
			}
		}
		log.Info("reload: the configuration is good; finishing in-flight turns", "config", src.name())
		reload()
		return
	}
}

// serve runs the system until its channels end (the console at end of input) or a
// signal arrives, then drains the queued turns: after end of input it answers
// everything that was typed, however long it takes; after a signal in-flight turns
// get drainGrace to finish (a second signal cuts it short) before they are
// cancelled.
func serve(ctx context.Context, sys *app.System, log *slog.Logger, interactive bool, stderr io.Writer) error {
	runErr := sys.Serve(ctx)
	if ctx.Err() == nil {
		if err := sys.Drain(context.Background()); err != nil {
			return err
		}
		return runErr
	}
	if interactive {
		fmt.Fprintf(stderr, "\nfinishing the current turn… (Ctrl-C again stops at once)\n")
	}
	log.Info("signal received: finishing in-flight turns", "grace", drainGrace)
	dctx, cancel := context.WithTimeout(context.Background(), drainGrace)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, stopSignals...)
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

// newLogger builds the process's logger from the flags: level (info, warn in the
// demo), text or JSON, stderr or a file. close flushes and closes the file.
func newLogger(f runFlags, demo bool, stderr io.Writer) (_ *slog.Logger, closeLog func(), err error) {
	level := slog.LevelInfo
	if demo {
		level = slog.LevelWarn
	}
	if f.logLevel != "" {
		if level, err = parseLogLevel(f.logLevel); err != nil {
			return nil, nil, err
		}
	}
	w, closeLog := stderr, func() {}
	if f.logFile != "" {
		// logs/x.log in a fresh folder (issue 36): the folder is made, 0700 as
		// the bot makes the database's.
		if dir := filepath.Dir(f.logFile); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, nil, fmt.Errorf("--log-file: %w", err)
			}
		}
		file, err := os.OpenFile(f.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closeLog = file, func() { _ = file.Close() }
	}
	opts := logunits.Options(level) // durations in the contract's milliseconds
	switch f.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), closeLog, nil
	case "json":
		// T10: provider bodies reach log lines; C1 and bidi controls go escaped.
		return slog.New(slog.NewJSONHandler(termsafe.NewJSONWriter(w), opts)), closeLog, nil
	}
	closeLog()
	return nil, nil, fmt.Errorf("bad --log-format %q: want text or json", f.logFormat)
}

// parseLogLevel reads a --log-level value (bot run and bot drill).
func parseLogLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		return lv, fmt.Errorf("bad --log-level %q: want debug, info, warn or error", s)
	}
	return lv, nil
}

// isTerminal reports whether v is a terminal. A character device is not
// enough: /dev/null is one, and it is the stdin and stderr of a process
// started without them (systemd's StandardInput=null, exec.Cmd with nil
// Stdin), which must not get a prompt or have its logs moved to a file.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && isTTY(f)
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
		cfg.Storage.Driver, cfg.Storage.DSN = database.DriverSQLite, f.db
	}
	return nil
}

// configSource says where the configuration comes from.
type configSource struct {
	path    string // a file, or "" for the embedded demo
	demo    bool
	baseURL string // the demo fake's root URL (set once it runs)
	envFile string // KEY=value lines for ${VAR} references; "" = none
}

// defaultEnvFile is read when it exists and --env-file is not given; bot init
// writes the keys there.
const defaultEnvFile = "detour.env"

// withEnvFile sets the env file: the flag's, else ./detour.env when it exists.
// A file that others may read is allowed, with a warning.
func (s *configSource) withEnvFile(flag string, stderr io.Writer) error {
	path := flag
	if path == "" {
		if _, err := os.Stat(defaultEnvFile); err != nil {
			return nil
		}
		path = defaultEnvFile
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--env-file: %w", err)
	}
	if fi.IsDir() {
		// Before the mode warning, whose "chmod 600" a folder must not get.
		return fmt.Errorf("--env-file: %s is a folder: want a file of KEY=value lines", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "warning: %s holds secrets and other users may read it (mode %04o): chmod 600 %s\n", path, fi.Mode().Perm(), path)
	}
	s.envFile = path
	return nil
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
	if s.envFile == "" {
		return config.Load(s.path)
	}
	file, err := config.ReadEnvFile(s.envFile)
	if err != nil {
		return nil, err
	}
	return config.LoadWith(s.path, func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true // the environment wins over the file, as in systemd and docker
		}
		v, ok := file[k]
		return v, ok
	})
}

// loadConfig reads the configuration as run, check and history do: --config
// PATH, else ./config.yaml, else the embedded demo; then the env file (the
// flag's, else ./detour.env; not for the demo) and the file itself. With
// demoLLM the demo's fake provider runs until closeDemo; without it the demo's
// models point nowhere. On failure it has said why, after what, and returns
// the exit code.
func loadConfig(what, path, envFile string, demoLLM bool, stderr io.Writer) (src configSource, cfg *config.Config, closeDemo func(), code int) {
	closeDemo = func() {}
	src, err := resolveConfig(path)
	if err == nil && !src.demo {
		err = src.withEnvFile(envFile, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", what, err)
		return src, nil, closeDemo, exitUsage
	}
	if src.demo {
		src.baseURL = "http://127.0.0.1:0"
		if demoLLM {
			demo, err := startDemoLLM()
			if err != nil {
				fmt.Fprintf(stderr, "%s: demo: %v\n", what, err)
				return src, nil, closeDemo, exitFailed
			}
			src.baseURL, closeDemo = demo.URL(), demo.Close
		}
	}
	if cfg, err = src.load(); err != nil {
		printConfigError(stderr, err)
		closeDemo()
		return src, nil, func() {}, exitUsage
	}
	return src, cfg, closeDemo, exitOK
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
