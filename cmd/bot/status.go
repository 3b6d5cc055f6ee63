package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/healthdb"
	"github.com/detourbot/detour/internal/termsafe"
)

// `bot status` is registered here, beside its code, so the command table in
// main.go needs no edit.
func init() { commands["status"] = runStatus }

// statusKeyPlaceholder stands for every ${VAR} the environment and the env
// file leave unset: `bot status` reads no key, so a machine without the
// providers' keys (an operator's laptop, a monitoring host) can run it.
const statusKeyPlaceholder = "unset-bot-status-reads-no-key"

// runStatus is `bot status`: the provider health board (issue 38) computed
// from the shared database, as every replica would show it: a table, or with
// --json the board's stable schema (docs/operations.md). It only reads, and
// needs no provider key.
func runStatus(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (default ./config.yaml if it exists, else the embedded demo's database)")
	envFile := fs.String("env-file", "", "KEY=value file for the configuration's ${VAR} references (default ./detour.env if it exists)")
	db := fs.String("db", "", "SQLite database file (overrides storage.dsn)")
	asJSON := fs.Bool("json", false, "print the board as JSON (the schema in docs/operations.md), for scripts")
	public := fs.Bool("public", false, "the board everyone sees in Slack and Discord: models and states, no keys, sessions or spend")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	cfg, code := statusConfig(*path, *envFile, stderr)
	if code != exitOK {
		return code
	}
	driver, dsn := cfg.Storage.Driver, cfg.Storage.DSN
	if *db != "" {
		driver, dsn = database.DriverSQLite, *db
	}
	if driver == database.DriverSQLite {
		// Opening would create the file: say where it was looked for instead.
		if _, p, err := database.DSN(dsn); err == nil && p != "" {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(stderr, "bot status: no database at %s (a relative storage.dsn is relative to the folder the bot runs in)\n", p)
				return exitFailed
			}
		}
	}
	gdb, err := database.Open(ctx, driver, dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "bot status: %v\n", err)
		return exitFailed
	}
	defer database.Close(gdb)
	st, err := healthdb.Read(ctx, gdb, healthdb.Providers(cfg), cfg.Policy, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "bot status: %v\n", err)
		return exitFailed
	}
	board := health.Build(st, !*public)
	if *asJSON {
		enc := json.NewEncoder(termsafe.NewJSONWriter(stdout))
		enc.SetIndent("", "  ")
		if err := enc.Encode(board); err != nil {
			fmt.Fprintf(stderr, "bot status: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	var buf bytes.Buffer
	if err := health.Text(&buf, board); err != nil {
		fmt.Fprintf(stderr, "bot status: %v\n", err)
		return exitFailed
	}
	fmt.Fprint(stdout, termsafe.Show(buf.String())) // names come from the database: no terminal controls
	return exitOK
}

// statusConfig reads the configuration as history does, except that a ${VAR}
// left unset is not an error: the board needs the providers, models and key
// names, never a key.
func statusConfig(path, envFile string, stderr io.Writer) (*config.Config, int) {
	src, err := resolveConfig(path)
	if err == nil && !src.demo {
		err = src.withEnvFile(envFile, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bot status: %v\n", err)
		return nil, exitUsage
	}
	if src.demo {
		src.baseURL = "http://127.0.0.1:0"
		cfg, err := src.load()
		if err != nil {
			printConfigError(stderr, err)
			return nil, exitUsage
		}
		return cfg, exitOK
	}
	file := map[string]string{}
	if src.envFile != "" {
		if file, err = config.ReadEnvFile(src.envFile); err != nil {
			fmt.Fprintf(stderr, "bot status: %v\n", err)
			return nil, exitUsage
		}
	}
	lookup := func(placeholder bool) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if v, ok := os.LookupEnv(k); ok {
				return v, true // the environment wins over the file, as for bot run
			}
			if v, ok := file[k]; ok {
				return v, true
			}
			return statusKeyPlaceholder, placeholder
		}
	}
	cfg, err := config.LoadWith(src.path, lookup(false))
	if err != nil {
		// Most likely a key this machine does not have: read it again with
		// every unset variable standing for something (a ${VAR:-default}
		// then takes the placeholder too, hence the first try).
		cfg, err = config.LoadWith(src.path, lookup(true))
	}
	if err != nil {
		printConfigError(stderr, err)
		return nil, exitUsage
	}
	return cfg, exitOK
}
