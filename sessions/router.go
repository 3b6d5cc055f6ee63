// Package sessions keeps detour's conversations: durable session entries with
// their model overrides (O1-O7), history and attempt records in gorm, a router with
// one queue per session key (turns of one session never overlap, different
// sessions run in parallel, an idle session costs no goroutine), one writer per
// inbound message through which everything it shows goes (W1: progress, the
// growing reply, each notice once, the one final answer and its record), and
// the turn itself: commands, the message's files (I1-I4) and a conversation's earlier
// messages (H1-H4), context fitting with summaries of what is dropped (R15,
// R16, B7), capability-aware chains (I5), the failover run (the turn is the
// engine's Controller: the user's budget T6, the override saved and rolled
// back O2 O3, compaction R15, a live switch O6), the primary probe (S3),
// notices (N1-N4, B4), admin reports (V4) and the usage of every paid call
// (U1-U4).
//
// Channel defaults: a session created under another one (the Slack thread
// "slack:T1:C1:1712.0001" under its channel "slack:T1:C1": the key without its
// last ":" part) starts with the user's model choice stored on that parent, which
// a slash command typed in the channel sets (adapters.Inbound.DefaultsFor).
package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/lanes"
	"github.com/detourbot/detour/llm"
)

// LLM is one provider+profile client (satisfied by *llm.Client).
type LLM interface {
	Chat(ctx context.Context, req llm.Request, onDelta func(string)) (failover.Output, error)
	// Check sends the smallest request (llm.ProbePrompt, one output token)
	// and returns the tokens the provider reported for it (V5, E1).
	Check(ctx context.Context, model string) (failover.Output, error)
}

// Agent is one entry of agents.list.
type Agent struct {
	ID    string
	Model failover.ModelRef
	// Fallbacks is the agent's own fallback list: nil = not set (the agent's model
	// is strict, S2), non-nil empty = explicitly strict.
	Fallbacks    *[]failover.ModelRef
	SystemPrompt string
	// Match lists the channels ("slack") or session-key prefixes ("slack:T1:C9")
	// this agent serves; the first matching agent wins.
	Match []string
}

// ModelInfo is what the config says about one model (B1, B7), and whether
// people may choose it with /model.
type ModelInfo struct {
	ContextWindow int // tokens; 0 = unknown
	Price         failover.Price
	Selectable    bool     // people may choose it with /model though no chain names it
	Aliases       []string // short names for /model ("fast"); unique across models
	Images        bool     // it takes images (models.<ref>.input: [text, image], I5)
}

// Config is everything the router needs, mapped from config.Config by internal/app.
type Config struct {
	Primary   failover.ModelRef
	Fallbacks []failover.ModelRef
	// Allow holds glob patterns (openai/*) of further models people may choose
	// with /model, beside the chains and the selectable models.
	Allow        []string
	SystemPrompt string
	Agents       []Agent
	Models       map[failover.ModelRef]ModelInfo
	Profiles     map[string][]failover.Profile // by provider
	Order        map[string][]string           // auth.order
	Providers    []string                      // configured provider ids
	Notices      string                        // "all" | "direct_only" | "off" (B4)
	AdminChannel string                        // "slack:C0123", "discord:123", "console", "" = none
	AdminUsers   []string                      // "slack:U123", "discord:456"
	Access       Access                        // who may talk to the bot and where (T5)
	UserBudget   UserBudget                    // each user's daily allowance (T6)
	// NoProgress and NoStream turn live replies off per channel name
	// (channels.<name>.progress / stream: false; L1, L2).
	NoProgress map[string]bool
	NoStream   map[string]bool
	// ProbeInterval: after a fallback, the primary is re-tried at most this
	// often per session (S3; agents.defaults.failover.primary_probe_interval).
	ProbeInterval time.Duration
	// MaxMessageBytes refuses longer messages before any call
	// (limits.max_message_bytes).
	MaxMessageBytes int
	// MaxTokens caps each answer (0 = provider default).
	MaxTokens int
	// ImageFallbacks are tried after the chain's own image-taking models by a
	// turn whose message holds images (I5).
	ImageFallbacks []failover.ModelRef
	// Files bounds what is read of the files of a message (I2).
	Files FileLimits
	// ThreadMessages bounds the earlier messages read when the bot is first
	// addressed in a conversation that began without it (H2); 0 = none.
	ThreadMessages int
	// Summary replaces the turns compaction drops by a summary a model writes,
	// at most SummaryMaxTokens long (R16); false drops them.
	Summary          bool
	SummaryMaxTokens int
	// SummaryTarget is the share of the window a summary brings the prompt
	// down to (R16: the low mark; 0 = 0.5).
	SummaryTarget float64
}

// FileLimits bound the files of one message (I2): the bytes of a file, the
// files of a message, and the bytes of a text file put into it.
type FileLimits struct {
	MaxBytes     int64
	MaxFiles     int
	MaxTextBytes int64
}

// Options are the router's collaborators.
type Options struct {
	DB      *gorm.DB         // opened by internal/database.Open (SQLite or Postgres)
	Engine  *failover.Engine // with the SQLite StateStore, clock, policy, guard
	Clock   failover.Clock   // nil = Engine.Clock, else the wall clock
	Clients func(provider, profileID string) (LLM, error)
	Log     *slog.Logger
	// Observer is told about attempts, fallbacks and finished turns (the
	// metrics of M5); nil = none.
	Observer Observer
	// Alerter is told of fallbacks, incidents and budgets for the webhooks
	// (issue 38); nil = none.
	Alerter Alerter
}

// maxRunningTurns bounds the turns one process runs at once; a burst of new
// conversations beyond it waits in line, in order, each with no goroutine,
// so memory follows this bound rather than the burst (issue 37: 10,000
// console sessions at once). 256 turns of a few seconds each are far more
// than the paid calls limits.max_paid_attempts_per_minute lets through by
// default (120 a minute).
const maxRunningTurns = 256

// Router owns every session queue. It is safe for concurrent use.
type Router struct {
	cfg     Config
	choices choices // the models people can choose (/model, /models)
	st      sessionStore
	engine  *failover.Engine
	clock   failover.Clock
	clients func(provider, profileID string) (LLM, error)
	log     *slog.Logger
	obs     Observer
	alerter Alerter

	base   context.Context
	cancel context.CancelFunc

	lanes *lanes.Lanes[adapters.Inbound] // one queue per session key, only while it has work

	mu       sync.Mutex
	adapters map[string]adapters.Adapter

	refused *adapters.Recent // T5: refusals already answered (user, session)

	incidentMu   sync.Mutex
	incidentOpen bool // V4: a report was sent and no turn has succeeded since

	unsaved unsaved // M8: answers delivered whose exchange waits for the database
	// damaged: the database's pages were found damaged while running (T7,
	// issue 37). Answers can no longer be stored, so turns stop before any
	// paid call until the file is restored and the bot restarted.
	damaged atomic.Bool

	bg background // R16: summaries written after an answer
}

// NewRouter checks the configuration (it fills in no defaults: config owns
// them) and migrates the session tables.
func NewRouter(cfg Config, opts Options) (*Router, error) {
	for _, need := range []struct {
		ok   bool
		what string
	}{
		{opts.DB != nil, "Options.DB is required"},
		{opts.Engine != nil, "Options.Engine is required"},
		{opts.Clients != nil, "Options.Clients is required"},
		{cfg.Primary != "", "Config.Primary is required"},
		{cfg.ProbeInterval > 0, fmt.Sprintf("Config.ProbeInterval must be positive, not %v", cfg.ProbeInterval)},
		{cfg.MaxMessageBytes > 0, fmt.Sprintf("Config.MaxMessageBytes must be positive, not %d", cfg.MaxMessageBytes)},
		{cfg.Files.MaxBytes > 0 && cfg.Files.MaxFiles > 0 && cfg.Files.MaxTextBytes > 0,
			fmt.Sprintf("Config.Files must be positive, not %+v", cfg.Files)},
		{cfg.SummaryMaxTokens > 0, fmt.Sprintf("Config.SummaryMaxTokens must be positive, not %d", cfg.SummaryMaxTokens)},
	} {
		if !need.ok {
			return nil, errors.New("sessions: " + need.what)
		}
	}
	clock := opts.Clock
	if clock == nil {
		clock = opts.Engine.Clock
	}
	if clock == nil {
		clock = failover.WallClock{}
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	// No implicit transaction around single statements: the turn's hot path is a
	// handful of small statements on one connection. No gorm PrepareStmt either:
	// its statement cache holds a lock while it waits for the pool's only
	// connection, and a transaction holding that connection waits for the same
	// lock to prepare its next statement, which deadlocked bursts of sessions.
	db := opts.DB.Session(&gorm.Session{SkipDefaultTransaction: true})
	r := &Router{
		cfg: cfg, st: sessionStore{db: db}, engine: opts.Engine, clock: clock,
		clients: opts.Clients, log: log.With("component", "sessions"), obs: opts.Observer,
		alerter:  opts.Alerter,
		adapters: map[string]adapters.Adapter{},
		refused:  adapters.NewRecent(10000, time.Hour, clock.Now),
		choices:  newChoices(cfg),
	}
	r.bg.log = r.log
	if r.alerter != nil {
		r.st.recovered = r.alertRecovered
	}
	r.base, r.cancel = context.WithCancel(context.Background())
	r.lanes = lanes.New(func(_ string, in adapters.Inbound) { r.process(r.base, in) }, 0, 0, maxRunningTurns)
	if err := r.st.migrate(r.base); err != nil {
		r.cancel()
		return nil, err
	}
	open, err := r.st.incidentOpen(r.base)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("sessions: load incident: %w", err)
	}
	r.incidentOpen = open // V4: an incident reported before a restart stays reported
	return r, nil
}

// AddAdapter registers a channel; outbound messages are routed by Outbound.Channel.
func (r *Router) AddAdapter(a adapters.Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adapters[a.Name()] = a
}

// Handle enqueues one message. It never blocks on the LLM: the session's worker
// goroutine is started when its queue goes non-empty and exits when it drains.
func (r *Router) Handle(ctx context.Context, in adapters.Inbound) {
	if ctx.Err() != nil {
		return
	}
	_ = r.lanes.Add(in.SessionKey, in) // refused only after Close
}

// Run handles every inbound message until inbox closes (nil) or ctx ends
// (ctx.Err()). It does not wait for queued turns: call Drain for that.
func (r *Router) Run(ctx context.Context, inbox <-chan adapters.Inbound) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case in, ok := <-inbox:
			if !ok {
				return nil
			}
			r.Handle(ctx, in)
		}
	}
}

// Drain waits until every queued turn has finished, or ctx ends. Answers kept
// in memory because the database failed (M8) get one more write then.
func (r *Router) Drain(ctx context.Context) error {
	defer func() {
		if r.unsaved.pending() {
			if err := r.flushUnsaved(ctx); err != nil {
				r.log.Warn("answers kept in memory could not be stored", "err", err)
			}
		}
	}()
	if err := r.lanes.Wait(ctx); err != nil {
		return fmt.Errorf("sessions: drain: %w", err)
	}
	if err := r.bg.waitAll(ctx); err != nil {
		return fmt.Errorf("sessions: drain the summaries: %w", err)
	}
	return nil
}

// Close refuses new messages and cancels running turns; call Drain afterwards to
// wait for the workers to finish.
func (r *Router) Close() {
	r.lanes.Close()
	r.cancel()
}

// Active returns how many sessions currently have a worker (queued or running).
func (r *Router) Active() int { return r.lanes.Active() }

// adapter returns the adapter named name, nil when there is none.
func (r *Router) adapter(name string) adapters.Adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adapters[name]
}

// send posts out through the adapter named by out.Channel: what no message's
// writer owns (a refusal, a report to the admin, an answer replayed).
func (r *Router) send(ctx context.Context, out adapters.Outbound) error {
	return post(ctx, r.adapter(out.Channel), out, r.log)
}

func reply(in adapters.Inbound, kind adapters.Kind, text string) adapters.Outbound {
	return adapters.Outbound{Kind: kind, Channel: in.Channel, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: text}
}

// isAdmin reports whether the sender may run admin commands (B3).
func (c *Config) isAdmin(in adapters.Inbound) bool {
	return in.Admin || c.isConfiguredAdmin(in.User)
}

// isConfiguredAdmin reports whether user is listed in admin.users.
func (c *Config) isConfiguredAdmin(user string) bool {
	return user != "" && slices.Contains(c.AdminUsers, user)
}

// adminTarget splits AdminChannel into adapter name and ReplyTo.
func (c *Config) adminTarget() (channel, replyTo string, ok bool) {
	ac := strings.TrimSpace(c.AdminChannel)
	if ac == "" {
		return "", "", false
	}
	channel, replyTo, _ = strings.Cut(ac, ":")
	return channel, replyTo, true
}
