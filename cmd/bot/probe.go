package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/termsafe"
	"github.com/detourbot/detour/redact"
)

// probeTimeout bounds each probe (a model call, a platform request).
const probeTimeout = 30 * time.Second

// probeRow is one line of the probe table.
type probeRow struct {
	result string // "ok", "FAIL" or "skip"
	check  string
	target string
	detail string
}

// runProbes tries what the configuration names, with the smallest request each
// allows, and prints a table of what works. It returns how many failed.
// Nothing is posted to a chat; each model probe is one paid call of at most
// one output token, counted against limits.max_paid_attempts_per_minute.
func runProbes(ctx context.Context, w io.Writer, cfg *config.Config) int {
	var rows []probeRow
	rows = append(rows, probeStorage(ctx, cfg))
	rows = append(rows, probeModels(ctx, cfg)...)
	rows = append(rows, probeChannels(ctx, cfg)...)

	fmt.Fprintln(w, "probes (one smallest request each; nothing is posted):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RESULT\tCHECK\tTARGET\tDETAIL")
	failed := 0
	for _, r := range rows {
		if r.result == "FAIL" {
			failed++
		}
		// T10: a detail is a provider's or a platform's own words.
		termsafe.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.result, r.check, r.target, r.detail)
	}
	_ = tw.Flush()
	if failed == 0 {
		fmt.Fprintf(w, "probes: every check works (%d)\n", len(rows))
	} else {
		fmt.Fprintf(w, "probes: %d of %d failed\n", failed, len(rows))
	}
	return failed
}

func ok(b bool) string {
	if b {
		return "ok"
	}
	return "FAIL"
}

// probeStorage opens the database and pings it. A SQLite file that does not
// exist yet is fine (the bot creates it) and is not created here.
func probeStorage(ctx context.Context, cfg *config.Config) probeRow {
	st := cfg.Storage
	r := probeRow{check: "storage", target: st.Driver + " " + redact.URL(st.DSN)} // T8
	if st.Driver == database.DriverPostgres {
		r.target = st.Driver + " " + database.PostgresName(st.DSN) // T8
	} else if _, path, err := database.DSN(st.DSN); err == nil && path != "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			r.result, r.detail = "ok", "does not exist yet; the bot creates it at start"
			return r
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	db, err := database.Open(ctx, st.Driver, st.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		r.result, r.detail = "FAIL", redact.Preview(err.Error(), 200)
		return r
	}
	defer database.Close(db)
	start := time.Now()
	sqlDB, err := db.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	r.result = ok(err == nil)
	if err != nil {
		r.detail = redact.Preview(err.Error(), 200)
	} else {
		r.detail = "opened and answered in " + time.Since(start).Round(time.Millisecond).String()
	}
	return r
}

// probeModels makes one smallest model call for every model people can reach
// (the chains, then the selectable models), each with the first profile of its
// provider, then one for every other profile on its provider's first model: so
// a fallback that answers 404 fails here, not in the middle of an outage, and
// every key is tried once (F8). The per-minute guard bounds the calls; past it
// the rest are skipped.
func probeModels(ctx context.Context, cfg *config.Config) []probeRow {
	guard := failover.NewGuard(cfg.Limits.MaxPaidAttemptsPerMinute, nil)
	profiles := map[string][]string{} // provider -> its profiles, in file order
	for _, id := range cfg.Auth.ProfileIDs {
		p := cfg.Auth.Profiles[id].Provider
		profiles[p] = append(profiles[p], id)
	}
	firstModel := map[string]string{}
	var rows []probeRow
	tried := map[string]bool{}
	try := func(prov, id, model string) {
		base := redact.URL(cfg.Providers[prov].BaseURL)
		r := probeRow{check: "model " + prov, target: prov + "/" + model + " at " + base}
		if id != "" {
			r.check = "model " + id
		}
		switch {
		case id != "" && expired(cfg.Auth.Profiles[id].ExpiresAt):
			r.result, r.detail = "FAIL", "the token expired at "+cfg.Auth.Profiles[id].ExpiresAt.UTC().Format(time.RFC3339)
		case !guard.Allow():
			r.result, r.detail = "skip", "limits.max_paid_attempts_per_minute reached; run again in a minute"
		default:
			r.result, r.detail = probeModel(ctx, cfg, prov, id, model)
		}
		rows = append(rows, r)
	}
	for _, ref := range cfg.ModelRefs() {
		prov, model := ref.Split()
		if _, ok := firstModel[prov]; !ok {
			firstModel[prov] = model
		}
		id := ""
		if ids := profiles[prov]; len(ids) > 0 {
			id = ids[0] // a provider without credentials (a local model server) has none
		}
		tried[id] = true
		try(prov, id, model)
	}
	for _, prov := range cfg.ProviderIDs {
		model, used := firstModel[prov]
		if !used {
			rows = append(rows, probeRow{result: "skip", check: "model " + prov, target: redact.URL(cfg.Providers[prov].BaseURL),
				detail: "no configured chain uses this provider"})
			continue
		}
		for _, id := range profiles[prov] {
			if !tried[id] {
				try(prov, id, model)
			}
		}
	}
	return rows
}

func expired(at time.Time) bool { return !at.IsZero() && !at.After(time.Now()) }

// probeModel makes the one call: a one-token answer to "ping".
func probeModel(ctx context.Context, cfg *config.Config, prov, profile, model string) (result, detail string) {
	c, err := app.LLMClient(cfg, prov, profile, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return "FAIL", redact.Preview(err.Error(), 200)
	}
	defer c.CloseIdleConnections()
	timeout := min(probeTimeout, cfg.Policy.AttemptTimeout)
	if timeout <= 0 {
		timeout = probeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err = c.Probe(ctx, model)
	if err == nil {
		return "ok", "answered in " + time.Since(start).Round(time.Millisecond).String()
	}
	var f *failover.Failure
	if errors.As(err, &f) {
		detail := f.Describe() + ": " + redact.Preview(f.Error(), 160)
		if f.Status == 404 || f.Reason == classify.ReasonModelNotFound {
			detail += "; check the model name, and that providers." + prov + ".base_url is the API's root (such as https://api.openai.com/v1)"
		}
		return "FAIL", detail
	}
	return "FAIL", redact.Preview(err.Error(), 200)
}

// probeChannels asks each platform channel whether its credentials work and
// whether the admin channel can be reached.
func probeChannels(ctx context.Context, cfg *config.Config) []probeRow {
	adminName, adminID, _ := strings.Cut(strings.TrimSpace(cfg.Admin.Channel), ":")
	var rows []probeRow
	chans, err := app.Channels(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return []probeRow{{result: "FAIL", check: "channels", detail: redact.Preview(err.Error(), 200)}}
	}
	adminSeen := adminName == ""
	for _, a := range chans {
		if a.Name() == adminName {
			adminSeen = true
		}
		p, isProber := a.(adapters.Prober)
		if !isProber {
			continue
		}
		target := ""
		if a.Name() == adminName {
			target = adminID
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		for _, res := range p.Probe(pctx, target) {
			rows = append(rows, probeRow{result: ok(res.OK), check: res.What, detail: redact.Preview(res.Detail, 200)})
		}
		cancel()
	}
	switch {
	case !adminSeen:
		rows = append(rows, probeRow{result: "FAIL", check: "admin channel", target: cfg.Admin.Channel,
			detail: "admin.channel names " + adminName + ", which is not enabled: reports would be lost"})
	case adminName == "console":
		rows = append(rows, probeRow{result: "ok", check: "admin channel", target: "console", detail: "reports print on the console"})
	}
	return rows
}
