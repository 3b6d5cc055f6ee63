package drills

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/sessions"
)

// FastScale is how --fast shrinks timeouts and sleeps: idle 60 s becomes 0.2 s.
const FastScale = 1.0 / 300

// Floors of the scaled timeouts, so a loaded machine does not time out healthy calls.
const (
	fastIdleFloor    = 200 * time.Millisecond
	fastAttemptFloor = time.Second
	fastRunFloor     = 5 * time.Second
)

// DefaultText is what a drill user says when a step names nothing else.
const DefaultText = "drill: in one sentence, what does a fallback model do?"

// Options configure a drill run.
type Options struct {
	// Fast scales the idle, attempt and run timeouts and the engine's sleeps by
	// FastScale (with floors), so a drill takes seconds.
	Fast bool
	// Log receives the bot's logs; nil discards them.
	Log *slog.Logger
	// TempDir holds each scenario's SQLite database ("" = the system temp dir);
	// the database is removed after the scenario.
	TempDir string

	// wall is the wall clock under the drill clock (nil = time.Now); the tests
	// make it race to stand for a loaded machine.
	wall func() time.Time
}

// placeholder stands for an ${ENV} reference that is a whole value: drills
// never read real secrets, and every base URL is replaced by the fake's.
// partPlaceholder stands for one that is part of a value, such as a host or
// a port of a base URL ("https://${AZ_HOST}/v1", "http://127.0.0.1:${PORT}/v1"):
// digits, which a URL takes as a host, a port, a label or a path segment alike.
const (
	placeholder     = "http://drill.invalid/placeholder"
	partPlaceholder = "1"
)

// LoadConfig parses a configuration for a drill. Every ${VAR} resolves to a
// placeholder (placeholder, or partPlaceholder for a variable only ever part of
// a value), so no secret is read and a missing variable does not stop the
// drill. name is used in error messages.
func LoadConfig(name string, data []byte) (*config.Config, error) {
	part, dsn := config.PartRefs(data), config.DSNRefs(data)
	// The drill's database is its own (a temporary SQLite file), but the
	// configured storage must still read as one: a variable of storage.dsn
	// stands for a database of the configured driver (issue 36).
	dsnPlaceholder := "drill-placeholder.db"
	if postgresDriver.Match(data) {
		dsnPlaceholder = "postgres://drill.invalid/placeholder"
	}
	return config.Parse(name, data, func(v string) (string, bool) {
		switch {
		case part[v]:
			return partPlaceholder, true
		case dsn[v]:
			return dsnPlaceholder, true
		}
		return placeholder, true
	})
}

// postgresDriver finds a configuration that stores in Postgres.
var postgresDriver = regexp.MustCompile(`(?m)\bdriver:\s*["']?postgres`)

// LoadConfigFile reads and parses the configuration file at path for a drill.
func LoadConfigFile(path string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("drills: %w", err)
	}
	return LoadConfig(path, data)
}

// Effective returns a copy of cfg with the timeouts a drill runs with: the
// configured ones, or scaled ones when fast.
func Effective(cfg *config.Config, fast bool) *config.Config {
	c := *cfg
	if fast {
		idle := max(scale(c.Agents.Defaults.IdleTimeout), fastIdleFloor)
		p := &c.Policy
		c.Agents.Defaults.IdleTimeout = idle
		p.AttemptTimeout = max(scale(p.AttemptTimeout), fastAttemptFloor, 5*idle)
		p.RunTimeout = max(scale(p.RunTimeout), fastRunFloor, 4*p.AttemptTimeout)
		// A1's probe wait is spent on the drill clock, whose sleeps --fast
		// shortens 300 times, waiting for another turn's real call: in real
		// time it must still last one attempt.
		p.SharedProbeWait = max(p.SharedProbeWait, time.Duration(float64(p.AttemptTimeout)/FastScale))
	}
	return &c
}

func scale(d time.Duration) time.Duration { return time.Duration(float64(d) * FastScale) }

// BudgetsFrom returns the budgets of an (effective) configuration.
func BudgetsFrom(cfg *config.Config) Budgets {
	p := cfg.Policy
	return Budgets{
		MaxPaidPerTurn:         p.MaxPaidAttemptsPerTurn,
		MaxTurnCostUSD:         p.MaxTurnCostUSD,
		MaxPaidPerMinute:       cfg.Limits.MaxPaidAttemptsPerMinute,
		BreakerTrip:            p.BreakerTrip,
		TimeoutSwitchThreshold: p.TimeoutSwitchThreshold,
		IdleTimeout:            cfg.Agents.Defaults.IdleTimeout,
		CooldownProbeInterval:  p.ProbeInterval,
		ProbeInterval:          p.SharedProbeInterval,
		ProbeIntervalMax:       max(p.SharedProbeIntervalMax, p.SharedProbeInterval),
		ProbeWait:              p.SharedProbeWait,
		PrimaryProbeInterval:   cfg.Agents.Defaults.PrimaryProbeInterval,
	}
}

// Select returns the scenarios named by spec: "all" or a comma-separated list.
func Select(spec string) ([]Scenario, error) {
	if spec == "" || spec == "all" {
		return Scenarios(), nil
	}
	var out []Scenario
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		sc, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q (known: all, %s)", name, strings.Join(Names(), ", "))
		}
		out = append(out, sc)
	}
	return out, nil
}

// Names lists the scenario names in run order.
func Names() []string {
	out := make([]string, len(table))
	for i, s := range table {
		out[i] = s.Name
	}
	return out
}

// Run runs each scenario in order against cfg and returns their reports with
// verdicts. It stops early only when ctx ends.
func Run(ctx context.Context, cfg *config.Config, scs []Scenario, opts Options) []Report {
	var out []Report
	for _, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		out = append(out, RunScenario(ctx, cfg, sc, opts))
	}
	return out
}

// RunScenario runs one scenario in a fresh world (fake provider, database,
// engine, router) and returns its report with the verdict. A drill that cannot
// run reports why in Report.Err and fails its verdict.
func RunScenario(ctx context.Context, cfg *config.Config, sc Scenario, opts Options) Report {
	eff := Effective(cfg, opts.Fast)
	w := &world{cfg: eff, sc: sc, opts: opts}
	rep := w.run(ctx)
	rep.Verdict = Judge(&rep, BudgetsFrom(eff))
	return rep
}

// world is one scenario's running bot.
type world struct {
	cfg  *config.Config
	sc   Scenario
	opts Options

	clock  *Clock
	fake   *fakeprovider.Server
	rec    *Recorder
	router *sessions.Router
	keyIDs map[string]string // fake KeyID -> profile id

	primary   string
	fallbacks []string
	system    string
	history   map[string]int // session -> history tokens, for cost estimates
}

func (w *world) run(ctx context.Context) (rep Report) {
	d := w.cfg.Agents.Defaults
	w.primary = string(d.Model.Primary)
	for _, f := range d.Model.Fallbacks {
		w.fallbacks = append(w.fallbacks, string(f))
	}
	w.system = d.SystemPrompt
	w.history = map[string]int{}
	rep = Report{
		Scenario: w.sc.Name, Doc: w.sc.Doc, Config: w.cfg.File, Fast: w.opts.Fast,
		Primary: w.primary, Fallbacks: w.fallbacks, Profiles: map[string]int{}, Notices: w.cfg.Notices.Users,
	}
	for _, id := range w.cfg.Auth.ProfileIDs {
		rep.Profiles[w.cfg.Auth.Profiles[id].Provider]++
	}
	for _, ref := range append([]string{w.primary}, w.fallbacks...) {
		if m, ok := w.cfg.Models[failover.ModelRef(ref)]; ok && (m.USDPerMTokIn > 0 || m.USDPerMTokOut > 0) {
			rep.Priced = true
		}
	}
	start := time.Now()
	defer func() { rep.Elapsed = time.Since(start) }()

	cleanup, err := w.start(ctx)
	defer cleanup()
	if err != nil {
		rep.Err = err.Error()
		return rep
	}
	t0 := w.clock.Now()
	for i, st := range w.sc.Steps {
		turn, calls, err := w.step(ctx, i+1, st, t0)
		rep.Turns = append(rep.Turns, turn)
		rep.Calls = append(rep.Calls, calls...)
		if err != nil {
			rep.Err = err.Error()
			break
		}
	}
	for _, c := range rep.Calls {
		rep.CostUSD += c.CostUSD
	}
	return rep
}

// start builds the world; cleanup is always safe to call.
func (w *world) start(ctx context.Context) (cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	log := w.opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sc := 1.0
	if w.opts.Fast {
		sc = FastScale
	}
	w.clock = newClock(sc, w.opts.wall)
	fakeprovider.PrepareBombs() // gzip_bomb answers at once, as a real edge would
	w.fake = fakeprovider.New(fakeprovider.WithNow(w.clock.Now))
	if err := w.fake.Start("127.0.0.1:0"); err != nil {
		return cleanup, err
	}
	undo = append(undo, w.fake.Close)

	dir, err := os.MkdirTemp(w.opts.TempDir, "detour-drill-*")
	if err != nil {
		return cleanup, fmt.Errorf("drills: temp dir: %w", err)
	}
	undo = append(undo, func() { _ = os.RemoveAll(dir) })

	w.keyIDs = map[string]string{}
	for _, id := range w.cfg.Auth.ProfileIDs {
		w.keyIDs[fakeprovider.KeyID(DummyKey(id))] = id
	}
	w.rec = &Recorder{}
	sys, err := app.New(ctx, w.pointAtFake(filepath.Join(dir, "drill.db")), app.Options{
		Log: log, Clock: w.clock, Adapters: []adapters.Adapter{w.rec},
	})
	if err != nil {
		return cleanup, fmt.Errorf("drills: %w", err)
	}
	undo = append(undo, sys.Close)
	w.router = sys.Router
	return cleanup, nil
}

// pointAtFake returns a copy of the drill's configuration that runs against the
// fake: every provider's base URL is the fake's route for its protocol, every profile sends a dummy key,
// the configured channels are off (the recorder is the only one), admin reports
// go to the recorder, the operations endpoint (server.listen) is off, and the
// state lives in db.
func (w *world) pointAtFake(db string) *config.Config {
	c := *w.cfg
	c.Storage = config.Storage{Driver: "sqlite", DSN: db}
	c.Channels = config.Channels{}
	c.Server = config.Server{} // never the operations port: a live bot may hold it
	c.Admin.Channel = adminTarget
	c.Providers = make(map[string]config.Provider, len(w.cfg.Providers))
	for id, p := range w.cfg.Providers {
		p.BaseURL = w.fake.BaseURLFor(id, fakeprovider.API(p.API)) // the fake speaks each provider's protocol
		c.Providers[id] = p
	}
	c.Auth.Profiles = make(map[string]config.Profile, len(w.cfg.Auth.Profiles))
	for id, p := range w.cfg.Auth.Profiles {
		p.Key = config.Secret(DummyKey(id))
		c.Auth.Profiles[id] = p
	}
	return &c
}

// DummyKey is the API key a drill sends for a profile: never the real secret.
func DummyKey(profileID string) string { return "drill-key-" + profileID }

func sessionKey(i int) string { return fmt.Sprintf("%s:s%03d", channelName, i) }

// step runs one step and measures it.
func (w *world) step(ctx context.Context, n int, st Step, t0 time.Time) (Turn, []Call, error) {
	turn := Turn{Step: n, Sessions: max(st.Sessions, 1)}
	adv := st.Advance
	if st.AdvanceProbe {
		adv += w.cfg.Agents.Defaults.PrimaryProbeInterval + time.Second
	}
	w.clock.Advance(adv)
	turn.Advanced = adv
	if st.Faults != nil {
		w.fake.Reset()
		for _, r := range rules(st.Faults, w.primary, w.fallbacks) {
			w.fake.Script(r)
		}
	}
	seen := len(w.fake.Calls())
	text := st.Text
	if text == "" {
		text = DefaultText
	}
	mark := w.rec.Len()
	began := time.Now()
	send := func(i int) {
		key := sessionKey(i)
		w.router.Handle(ctx, adapters.Inbound{
			Channel: channelName, SessionKey: key, User: channelName + ":u1",
			Text: text, ReplyTo: key, Direct: true,
		})
	}
	limit := 2*w.cfg.Policy.RunTimeout + 30*time.Second
	dctx, cancel := context.WithTimeout(ctx, limit)
	var derr error
	rest := turn.Sessions
	if st.NewestFirst && turn.Sessions > 1 {
		send(turn.Sessions)
		derr = w.router.Drain(dctx)
		rest--
	}
	for i := 1; i <= rest && derr == nil; i++ {
		send(i)
	}
	if derr == nil {
		derr = w.router.Drain(dctx)
	}
	cancel()

	// Answers: each session's last reply or error of the step.
	last := map[string]Sent{}
	for _, s := range w.rec.Since(mark) {
		switch s.Kind {
		case adapters.KindNotice:
			turn.Notices = append(turn.Notices, s.Text)
		case adapters.KindReport:
			turn.Reports = append(turn.Reports, s.Text)
		case adapters.KindReply, adapters.KindError:
			last[s.SessionKey] = s
		}
	}
	var replyTokens int
	for i := 1; i <= turn.Sessions; i++ {
		key := sessionKey(i)
		a := Answer{Session: key, Kind: "none"}
		if s, ok := last[key]; ok {
			a.Kind, a.Model, a.Text, a.After = string(s.Kind), s.Model, s.Text, s.At.Sub(began)
			turn.Elapsed = max(turn.Elapsed, a.After)
		}
		if a.Kind == "reply" && replyTokens == 0 {
			replyTokens = sessions.EstimateTokens(a.Text)
		}
		turn.Answers = append(turn.Answers, a)
	}
	if turn.Elapsed == 0 {
		turn.Elapsed = time.Since(began)
	}

	// Calls: what the fake received during the step.
	inTokens := sessions.EstimateTokens(w.system) + w.history[sessionKey(1)] + sessions.EstimateTokens(text)
	var calls []Call
	all := w.fake.Calls()
	if seen > len(all) {
		seen = 0
	}
	for _, c := range all[seen:] {
		call := Call{
			Step: n, Provider: c.Provider, Model: c.Model, Profile: w.keyIDs[c.KeyID],
			Mode: string(c.Mode), Status: c.Status, Stream: c.Stream, At: c.Time.Sub(t0),
		}
		if m, ok := w.cfg.Models[failover.ModelRef(call.Ref())]; ok {
			out := 0
			if c.Mode == fakeprovider.ModeOK && c.Stream {
				out = replyTokens
			}
			call.CostUSD = (float64(inTokens)*m.USDPerMTokIn + float64(out)*m.USDPerMTokOut) / 1e6
		}
		turn.CostUSD += call.CostUSD
		calls = append(calls, call)
	}
	turn.Calls = len(calls)
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].At < calls[j].At })
	for i := 1; i <= turn.Sessions; i++ {
		if a := turn.Answers[i-1]; a.Kind == "reply" {
			w.history[a.Session] += sessions.EstimateTokens(text) + sessions.EstimateTokens(a.Text) + 8
		}
	}
	if derr != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return turn, calls, fmt.Errorf("step %d: interrupted", n)
		}
		return turn, calls, fmt.Errorf("step %d did not finish within %s", n, limit)
	}
	return turn, calls, nil
}
