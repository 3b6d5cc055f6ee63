package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/drills"
	"github.com/detourbot/detour/internal/logunits"
)

// runDrill is `bot drill`: it runs failure drills (package drills) against the
// configuration's chains, profiles, timeouts and budgets, with every provider
// served by the built-in fault-injecting fake, dummy keys, and SQLite in a temp
// dir. It prints per scenario the paid calls, time to answer, notices, reports,
// cost and the verdict. Exit 0 when every verdict passes, 1 when one fails, 2 on
// bad arguments or a bad configuration.
func runDrill(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	var opts drills.Options
	fs, cfgPath, envFile := configFlags("drill")
	scenario := fs.String("scenario", "all", "scenario name, comma-separated names, or all")
	format := fs.String("format", drills.FormatText, "output: text, json or markdown")
	fs.BoolVar(&opts.Fast, "fast", false, fmt.Sprintf("scale idle/attempt/run timeouts and waits by 1/%.0f (idle 60s -> 0.2s)", 1/drills.FastScale))
	list := fs.Bool("list", false, "list the scenarios and exit")
	logLevel := fs.String("log-level", "", "show the bot's logs on stderr at this level (debug, info, warn, error); default none")
	setUsage(fs, "Usage: bot drill [--config PATH] [--env-file PATH] [--scenario NAME|all] [--format text|json|markdown] [--fast] [--list] [--log-level LEVEL]\n")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *list {
		for _, s := range drills.Scenarios() {
			fmt.Fprintf(stdout, "%-22s %s\n", s.Name, s.Doc)
		}
		return exitOK
	}
	switch *format {
	case drills.FormatText, drills.FormatJSON, drills.FormatMarkdown:
	default:
		fmt.Fprintf(stderr, "bot drill: bad --format %q: want text, json or markdown\n", *format)
		return exitUsage
	}
	scs, err := drills.Select(*scenario)
	if err != nil {
		fmt.Fprintf(stderr, "bot drill: %v\n", err)
		return exitUsage
	}
	cfg, name, err := drillConfig(*cfgPath, *envFile, stderr)
	if err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}
	if *logLevel != "" {
		lv, err := parseLogLevel(*logLevel)
		if err != nil {
			fmt.Fprintf(stderr, "bot drill: %v\n", err)
			return exitUsage
		}
		opts.Log = slog.New(slog.NewTextHandler(stderr, logunits.Options(lv)))
	}
	start := time.Now()
	fmt.Fprintf(stderr, "bot drill: %d scenario(s) on %s%s\n", len(scs), name, map[bool]string{true: " (--fast)"}[opts.Fast])
	reports := drills.Run(ctx, cfg, scs, opts)
	if err := drills.Write(stdout, *format, reports); err != nil {
		fmt.Fprintf(stderr, "bot drill: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "bot drill: done in %s\n", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil || len(reports) < len(scs) || !drills.Passed(reports) {
		return exitFailed
	}
	return exitOK
}

// drillConfig loads the configuration a drill runs on: --config PATH, else
// ./config.yaml, else the embedded demo. ${ENV} references resolve to
// placeholders, so no secret is read and none need be set; --env-file (else
// ./detour.env) is accepted and checked as bot run checks it, so the command
// lines of a service's layout work unchanged (issue 36).
func drillConfig(path, envFile string, stderr io.Writer) (*config.Config, string, error) {
	src, err := resolveConfig(path)
	if err == nil && !src.demo {
		err = src.withEnvFile(envFile, stderr)
	}
	if err != nil {
		return nil, "", err
	}
	if src.demo {
		cfg, err := drills.LoadConfig(demoConfigName, demoYAML)
		return cfg, demoConfigName, err
	}
	cfg, err := drills.LoadConfigFile(src.path)
	return cfg, src.path, err
}
