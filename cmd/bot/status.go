package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/healthdb"
	"github.com/detourbot/detour/internal/termsafe"
)

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
	cfg, code := loadForStorage("bot status", *path, *envFile, stderr)
	if code != exitOK {
		return code
	}
	driver, dsn := cfg.Storage.Driver, cfg.Storage.DSN
	if *db != "" {
		driver, dsn = database.DriverSQLite, *db
	}
	gdb, code := openExisting(ctx, "bot status", driver, dsn, stderr)
	if code != exitOK {
		return code
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
