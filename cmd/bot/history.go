package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/termsafe"
	"github.com/detourbot/detour/redact"
	"github.com/detourbot/detour/sessions"
	"gorm.io/gorm"
)

// runHistory is `bot history`: the fallback history (attempts and notices)
// read from the database, newest last. It only reads.
func runHistory(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	var q sessions.HistoryQuery
	fs, path, envFile := configFlags("history")
	db := fs.String("db", "", "SQLite database file (overrides storage.dsn)")
	fs.StringVar(&q.Session, "session", "", "only this session key (console:default, slack:T…:C…:1712.0001, discord:…)")
	since := fs.String("since", "", `only events since this long ago ("1h", "30m", "7d") or this time ("2026-03-01", RFC 3339)`)
	format := fs.String("format", "text", "text (a table) or json (one object per line)")
	fs.BoolVar(&q.All, "all", false, "also the turns whose first call answered (by default only turns with a failed or skipped attempt)")
	fs.IntVar(&q.Limit, "limit", 200, "at most this many events, the newest")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "bot history: bad --format %q: want text or json\n", *format)
		return exitUsage
	}
	if q.Limit <= 0 {
		fmt.Fprintf(stderr, "bot history: bad --limit %d: want a positive number\n", q.Limit)
		return exitUsage
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "bot history: bad --since: %v\n", err)
			return exitUsage
		}
		q.Since = t
	}

	driver, dsn, code := historyStorage(*path, *envFile, *db, stderr)
	if code != exitOK {
		return code
	}
	gdb, code := openExisting(ctx, "bot history", driver, dsn, stderr)
	if code != exitOK {
		return code
	}
	defer database.Close(gdb)
	events, err := sessions.ReadHistory(ctx, gdb, q)
	if err != nil {
		fmt.Fprintf(stderr, "bot history: %v\n", err)
		return exitFailed
	}
	if *format == "json" {
		return writeHistoryJSON(stdout, stderr, events)
	}
	if len(events) == 0 {
		what := "no fallback history"
		if q.All {
			what = "no attempts"
		}
		termsafe.Fprintf(stdout, "%s%s\n", what, describeQuery(q)) // a session key is anyone's text
		return exitOK
	}
	writeHistoryText(stdout, events)
	return exitOK
}

// historyStorage resolves the database to read: --db, else the configuration's
// storage (the demo's when there is no configuration), found as bot run finds
// it, with --env-file or ./detour.env; provider keys and channel tokens need
// not be set (loadForStorage).
func historyStorage(path, envFile, db string, stderr io.Writer) (driver, dsn string, code int) {
	if db != "" {
		return database.DriverSQLite, db, exitOK
	}
	cfg, code := loadForStorage("bot history", path, envFile, stderr)
	if code != exitOK {
		return "", "", code
	}
	return cfg.Storage.Driver, cfg.Storage.DSN, exitOK
}

// openExisting opens the database a command only reads (bot history, bot
// status). A SQLite file that is not there is not created: the error says
// where it was looked for. On failure it has said why and returns the exit
// code.
func openExisting(ctx context.Context, what, driver, dsn string, stderr io.Writer) (*gorm.DB, int) {
	if driver == database.DriverSQLite {
		if _, p, err := database.DSN(dsn); err == nil && p != "" {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(stderr, "%s: no database at %s (a relative storage.dsn is relative to the folder the bot runs in)\n", what, p)
				return nil, exitFailed
			}
		}
	}
	gdb, err := database.Open(ctx, driver, dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", what, err)
		return nil, exitFailed
	}
	return gdb, exitOK
}

// parseSince reads "1h", "90m", "7d" (before now) or a date or RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 {
			return now.UTC().AddDate(0, 0, -n), nil // no overflow: 9999999d is long ago, not in the future
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration such as 1h, 30m or 7d, or a time such as 2026-03-01 or 2026-03-01T14:00:00Z", s)
}

func describeQuery(q sessions.HistoryQuery) string {
	var parts []string
	if q.Session != "" {
		parts = append(parts, "in session "+q.Session)
	}
	if !q.Since.IsZero() {
		parts = append(parts, "since "+q.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if len(parts) == 0 {
		return " recorded"
	}
	return " " + strings.Join(parts, " ")
}

// outcome is an attempt's result in words: ok, the failure with its HTTP
// status beside it (a 500 is "server_error (HTTP 500)", never a timeout), or why
// it was skipped.
func outcome(e sessions.HistoryEvent) string {
	switch {
	case e.Skipped != "":
		return "skipped: " + e.Skipped
	case e.Reason == "":
		return "ok"
	case e.Status > 0:
		return fmt.Sprintf("%s (HTTP %d)", classify.Outcome(classify.Reason(e.Reason), e.Status), e.Status)
	}
	return classify.Outcome(classify.Reason(e.Reason), e.Status)
}

func writeHistoryText(w io.Writer, events []sessions.HistoryEvent) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tSESSION\tMODEL\tPROFILE\tOUTCOME\tDURATION\tDETAIL")
	for _, e := range events {
		at := e.Time.UTC().Format("2006-01-02 15:04:05")
		if e.Notice != "" {
			termsafe.Fprintf(tw, "%s\t%s\t\t\tnotice\t\t%s\n", at, e.Session, e.Notice)
			continue
		}
		model := e.Model
		if e.Kind != "" && e.Kind != "normal" {
			model += " (" + e.Kind + ")"
		}
		profile := e.Profile
		if profile == "" {
			profile = "-"
		}
		dur := "-"
		if e.Skipped == "" {
			dur = e.Duration.String()
		}
		detail := ""
		if e.Reason != "" {
			detail = redact.Preview(e.Summary, 80)
		}
		// T10: session keys, notices and provider messages are anyone's text.
		termsafe.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", at, e.Session, model, profile, outcome(e), dur, detail)
	}
	_ = tw.Flush()
}

// historyLine is one event of --format json.
type historyLine struct {
	Time       string `json:"time"`
	Type       string `json:"type"` // attempt | notice
	Session    string `json:"session"`
	Turn       string `json:"turn,omitempty"`
	Model      string `json:"model,omitempty"`
	Profile    string `json:"profile,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Outcome    string `json:"outcome,omitempty"` // ok, the failure (classify.Outcome: server_error for a 5xx), or skipped
	Reason     string `json:"reason,omitempty"`
	Skipped    string `json:"skipped,omitempty"`
	Status     int    `json:"status,omitempty"`
	Code       string `json:"code,omitempty"`
	Summary    string `json:"summary,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Text       string `json:"text,omitempty"` // a notice's text
}

func writeHistoryJSON(stdout, stderr io.Writer, events []sessions.HistoryEvent) int {
	enc := json.NewEncoder(termsafe.NewJSONWriter(stdout)) // T10: no raw C1 or bidi control
	enc.SetEscapeHTML(false)
	for _, e := range events {
		l := historyLine{Time: e.Time.UTC().Format(time.RFC3339Nano), Type: "attempt", Session: e.Session, Turn: e.Turn,
			Model: e.Model, Profile: e.Profile, Kind: e.Kind, Reason: e.Reason, Skipped: e.Skipped, Status: e.Status,
			Code: e.Code, Summary: e.Summary, DurationMS: e.Duration.Milliseconds()}
		switch {
		case e.Notice != "":
			l = historyLine{Time: l.Time, Type: "notice", Session: e.Session, Text: e.Notice}
		case e.Skipped != "":
			l.Outcome = "skipped"
		case e.Reason == "":
			l.Outcome = "ok"
		default:
			l.Outcome = classify.Outcome(classify.Reason(e.Reason), e.Status) // reason keeps the classifier's word
		}
		if err := enc.Encode(l); err != nil {
			fmt.Fprintf(stderr, "bot history: %v\n", err)
			return exitFailed
		}
	}
	return exitOK
}
