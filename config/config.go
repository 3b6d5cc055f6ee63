// Package config loads detour's YAML configuration: it expands ${ENV} references,
// fills in the defaults of docs/behaviour.md, and validates everything with errors that name the
// file, the line and the key. Secrets (API keys, bot tokens) are held in the Secret
// type, which never prints its value.
//
// Each default has one source. The engine's numbers (cooldowns, the run loop,
// budgets) are failover.DefaultPolicy's, so the failover package stays usable
// on its own: Default starts Config.Policy from it, and the file's keys for
// those numbers are decoded straight into Config.Policy, with nothing copied
// back. Every other default is the settings table's (settings.go), where each
// key is declared once with its default and its one line of documentation.
// The constructors of the parts (sessions.NewRouter, ...) validate what they
// are given instead of filling in defaults of their own.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/detourbot/detour/failover"
)

// Error is one configuration problem. Error() renders "file:line: key: msg".
type Error struct {
	File string
	Line int
	Key  string // dotted path, e.g. "agents.defaults.model.fallbacks[1]"
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors returns every *Error inside err (a single one or an errors.Join of them).
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ce, ok := e.(*Error); ok {
			out = append(out, ce)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var ce *Error
		if errors.As(e, &ce) {
			out = append(out, ce)
		}
	}
	walk(err)
	return out
}

// Secret is a credential read from the configuration. It never prints its value:
// String, GoString, LogValue and MarshalText all render "set" or "missing" (P4).
type Secret string

// Reveal returns the secret itself, for the one place that sends it to a provider.
func (s Secret) Reveal() string { return string(s) }

// Status is "set" or "missing".
func (s Secret) Status() string {
	if s == "" {
		return "missing"
	}
	return "set"
}

// String implements fmt.Stringer without the value.
func (s Secret) String() string { return s.Status() }

// GoString implements fmt.GoStringer without the value.
func (s Secret) GoString() string { return "config.Secret(" + s.Status() + ")" }

// LogValue implements slog.LogValuer without the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.Status()) }

// MarshalText implements encoding.TextMarshaler without the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.Status()), nil }

// Config is the whole resolved configuration (config.example.yaml documents every key).
type Config struct {
	File      string // where it was loaded from ("" for an embedded config)
	Storage   Storage
	Channels  Channels
	Providers map[string]Provider
	// ProviderIDs lists the configured providers in file order.
	ProviderIDs []string
	Auth        Auth
	Agents      Agents
	Models      map[failover.ModelRef]Model
	Limits      Limits
	// Policy holds the engine's numbers: auth.cooldowns, the attempt and run
	// timeouts, the budget, agents.defaults.failover (but primary_probe_interval)
	// and the providers' billing_backoff_hours.
	Policy  failover.Policy
	Notices Notices
	Admin   Admin
	Access  Access
	Server  Server
	Alerts  Alerts // alerts.webhooks (issue 38)

	// Warnings say what the bot does without (an optional profile whose key
	// variable is unset, the models only it could reach); the configuration is
	// usable.
	// `bot run` and `bot check` print them.
	Warnings []*Error
	// Doubts are settings that parse but cannot work as meant: a swapped or
	// malformed Slack or Discord token, an admin channel that cannot receive.
	// `bot check` fails on them; `bot run` prints them as warnings.
	Doubts []*Error
	// LeftOut lists the optional profiles left out because their key variable
	// is unset.
	LeftOut []LeftOutProfile
	// Lines says where each key was written (dotted path -> line), so a check
	// made outside config can still name the line.
	Lines map[string]int
}

// NoChannel is F1's refusal when no channel is enabled: bot run and bot check
// stop on it, and the app refuses to start without a channel.
const NoChannel = "no channel is enabled: enable channels.console, channels.slack or channels.discord"

// NoChannelError is F1's refusal at the line of channels: in file, or nil
// when a channel is enabled.
func (c *Config) NoChannelError(file string) *Error {
	if ch := c.Channels; ch.Console.Enabled || ch.Slack.Enabled || ch.Discord.Enabled {
		return nil
	}
	return &Error{File: file, Line: c.Lines["channels"], Key: "channels", Msg: NoChannel}
}

// LeftOutProfile is a configured optional profile the bot runs without: its
// key's environment variables are unset or empty.
type LeftOutProfile struct {
	ID       string
	Provider string
	Type     failover.ProfileType
	Vars     []string // the variables its key comes from
}

// Storage says where durable state lives.
type Storage struct {
	Driver string // "sqlite" (default) or "postgres" (M1)
	DSN    string // a file path for sqlite; a postgres:// URL or "host=... dbname=..." for postgres
}

// Channels holds one section per chat channel.
type Channels struct {
	Console Console
	Slack   Slack
	Discord Discord
}

// Console is the terminal channel (README "Console").
type Console struct {
	Enabled bool
	Format  string // "text" | "jsonl"
	Live
}

// Live turns a channel's live replies on or off (L1, L2); both default to true.
type Live struct {
	Stream   bool // the answer grows as the model writes it
	Progress bool // "is thinking…" while a turn runs
}

// Slack is the Slack Socket Mode channel.
type Slack struct {
	Enabled  bool
	AppToken Secret // xapp-...
	BotToken Secret // xoxb-...
	APIURL   string // "" = slack.com; a fake's URL in tests
	// Events is which messages the bot reads: "all" (mentions, thread follow-ups
	// without a mention, DMs) or "mentions" (mentions and DMs only, for busy
	// workspaces near Slack's 30,000 events per hour; pair it with
	// slack-manifest-mentions.yaml).
	Events string
	Live
	// SuggestedPrompts are offered when someone opens the bot in Slack's AI
	// app container (assistant_thread_started); empty = none.
	SuggestedPrompts []string
}

// Discord is the Discord gateway channel.
type Discord struct {
	Enabled bool
	Token   Secret
	GuildID string
	APIURL  string // "" = discord.com; a fake's URL in tests
	// MessageContent asks for the privileged MESSAGE_CONTENT intent (default
	// true); false is mention-only mode.
	MessageContent bool
	// ShardID and ShardCount split the guilds between replicas (defaults 0 and 1).
	ShardID, ShardCount int
	Live
	// Threads: a top-level mention opens a thread named from the question, and
	// the conversation continues there.
	Threads bool
}

// Provider is one endpoint family and the protocol it speaks. Its
// billing_backoff_hours (D3) is Policy.BillingBackoffByProvider[ID].
type Provider struct {
	ID string
	// API is the protocol: APIOpenAI (the default), APIAzure, APIAnthropic or
	// APIGemini (docs/providers.md).
	API     string
	BaseURL string // defaulted for anthropic and gemini
	// APIVersion is Azure's api-version (required there) or Anthropic's
	// anthropic-version header ("" = the client's default).
	APIVersion string
}

// The protocols a provider may speak (providers.<id>.api).
const (
	APIOpenAI    = "openai"
	APIAzure     = "azure"
	APIAnthropic = "anthropic"
	APIGemini    = "gemini"
)

// defaultBaseURLs are the base URLs of the protocols whose service has one.
var defaultBaseURLs = map[string]string{
	APIAnthropic: "https://api.anthropic.com/v1",
	APIGemini:    "https://generativelanguage.googleapis.com/v1beta/openai",
}

// Auth holds the credentials and their rotation and cooldown rules.
type Auth struct {
	Profiles map[string]Profile
	// ProfileIDs lists the profiles in file order.
	ProfileIDs []string
	Order      map[string][]string // provider -> profile ids (P1)
}

// Profile is one credential of one provider.
type Profile struct {
	ID        string // "provider:name"
	Provider  string
	Type      failover.ProfileType
	Key       Secret
	ExpiresAt time.Time // zero = no expiry
	// Optional (optional: true) lets the bot run without the profile: when its
	// key's variables are unset or empty it is left out, with a warning. A
	// profile that is not optional and has no key is an error.
	Optional bool
}

// Engine returns the engine's view of the profile (no secret).
func (p Profile) Engine() failover.Profile {
	return failover.Profile{ID: p.ID, Provider: p.Provider, Type: p.Type, ExpiresAt: p.ExpiresAt}
}

// Agents holds the defaults and the optional per-agent overrides.
type Agents struct {
	Defaults AgentDefaults
	List     []Agent
}

// AgentDefaults is agents.defaults; its timeouts.attempt_seconds and
// run_seconds, budget and failover keys are Config.Policy's.
type AgentDefaults struct {
	Model        ModelChain
	SystemPrompt string
	MaxTokens    int // caps each answer; 0 = provider default
	// IdleTimeout is timeouts.idle_seconds (60): no stream data for this long
	// ends the attempt (R5, R8).
	IdleTimeout time.Duration
	// PrimaryProbeInterval is failover.primary_probe_interval (5m): after a
	// fallback, the primary is re-tried at most this often per session (S3).
	PrimaryProbeInterval time.Duration
	// ThreadContext is how a conversation begun in the middle of a thread
	// reads what was said before (H1-H4).
	ThreadContext ThreadContext
	// Compaction is how history that no longer fits is shortened (R15, R16).
	Compaction Compaction
}

// ModelChain is a primary model and its fallbacks (S1).
type ModelChain struct {
	Primary   failover.ModelRef
	Fallbacks []failover.ModelRef
	// ImageFallbacks are tried, after the chain's own models that take
	// images, by a turn whose message holds images (I5).
	ImageFallbacks []failover.ModelRef
	// Allow holds patterns of further models people may choose with /model
	// ("openai/*": '*' is any run of characters, '?' one character).
	Allow []string
}

// ThreadContext is agents.defaults.thread_context (H1-H4).
type ThreadContext struct {
	// MaxMessages bounds the earlier messages read (20; 0 = none are read).
	MaxMessages int
}

// Compaction is agents.defaults.compaction (R16).
type Compaction struct {
	// Summary replaces dropped turns by a summary a model writes (true);
	// false drops them.
	Summary bool
	// SummaryMaxTokens caps the summary's length (400).
	SummaryMaxTokens int
	// TargetRatio is the low mark a summary brings the prompt down to, as a
	// share of the model's context window (0.5): one summary then covers
	// many turns instead of one (R16).
	TargetRatio float64
}

// Agent is one entry of agents.list.
type Agent struct {
	ID    string
	Model failover.ModelRef // "" = the default primary
	// Fallbacks is nil when not set (the agent's model is strict, S2); a non-nil
	// empty slice makes strictness explicit.
	Fallbacks    *[]failover.ModelRef
	SystemPrompt string
	// Channels lists the session-key prefixes the agent serves ("slack:T1:C1", "console").
	Channels []string
}

// Model holds optional facts about one model (B1, B7), and whether people may
// choose it with /model.
type Model struct {
	// Deployment is the Azure deployment serving the model ("" = the model's
	// own name); only for models of an azure provider.
	Deployment    string
	ContextWindow int
	USDPerMTokIn  float64
	USDPerMTokOut float64
	// Selectable lets people choose the model with /model though no chain names it.
	Selectable bool
	// Aliases are short names for /model ("fast"), unique across models.
	Aliases []string
	// Input is what the model takes: InputText and, for models with vision,
	// InputImage (I5). Unset = text only.
	Input []string
}

// What a model may take (models.<ref>.input).
const (
	InputText  = "text"
	InputImage = "image"
)

// TakesImages reports whether the model declares image input.
func (m Model) TakesImages() bool { return slices.Contains(m.Input, InputImage) }

// Limits are process-wide limits (B2), caps on what a provider may send (T1) and
// each user's daily allowance (T6).
type Limits struct {
	MaxPaidAttemptsPerMinute int // 120
	MaxMessageBytes          int // 65536
	MaxResponseBytes         int // 8388608: one provider response body, streams included (T1)
	MaxAnswerBytes           int // 1048576: one answer's text (T1)
	// Each user's daily allowance (T6), per UTC day; 0 = off.
	PerUserDailyPaidCalls int
	PerUserDailyUSD       float64
	// Files people send with a message (I2): at most MaxFiles are read, each
	// at most MaxFileBytes; a text file is put into the message when it holds
	// at most MaxTextFileBytes.
	MaxFileBytes     int // 5242880
	MaxFiles         int // 4
	MaxTextFileBytes int // 32768
}

// Notices says who gets fallback notices (B4).
type Notices struct {
	Users string // "all" | "direct_only" | "off"
}

// Access says who may talk to the bot and where (T5). Empty lists mean everyone,
// everywhere; admin.users may always talk to the bot.
type Access struct {
	Users          []string // "slack:U123", "discord:456", "console:alice"
	Channels       []string // channel names ("slack") or session-key prefixes ("slack:T1:C9")
	DirectMessages bool     // direct messages allowed (true)
	// ChannelModel says who may set the model of a whole channel's new
	// conversations (a Slack slash command in the channel, T9): "admins"
	// (default) or "everyone".
	ChannelModel string
}

// Server is the opt-in operations endpoint (M5).
type Server struct {
	Listen string // "127.0.0.1:9464" serves /healthz, /readyz, /metrics; "" = off
}

// Admin says where admin reports go and who may run /recover (V4, B3).
type Admin struct {
	Channel string   // "" | "console" | "slack:C0123" | "discord:123"
	Users   []string // "slack:U123", "discord:456"
}

// Default returns a configuration holding every default, with no providers and
// no primary model (Parse requires a primary).
func Default() *Config {
	c := &Config{
		Providers: map[string]Provider{},
		Auth:      Auth{Profiles: map[string]Profile{}, Order: map[string][]string{}},
		Models:    map[failover.ModelRef]Model{},
		Policy:    failover.DefaultPolicy(),
	}
	applyDefaults(c) // the settings table's (settings.go)
	return c
}

// EngineProfiles returns the engine's profiles grouped by provider, in file order.
func (c *Config) EngineProfiles() map[string][]failover.Profile {
	out := map[string][]failover.Profile{}
	for _, id := range c.Auth.ProfileIDs {
		p := c.Auth.Profiles[id]
		out[p.Provider] = append(out[p.Provider], p.Engine())
	}
	return out
}

// Load reads and parses the configuration file at path, with the process
// environment for ${ENV} references.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Deployments maps the models of provider that name an Azure deployment
// (models.<ref>.deployment) to it; the others are their own deployment.
func (c *Config) Deployments(provider string) map[string]string {
	out := map[string]string{}
	for ref, m := range c.Models {
		if p, model := ref.Split(); p == provider && m.Deployment != "" {
			out[model] = m.Deployment
		}
	}
	return out
}

// ModelRefs lists the models people can choose with /model: those of the
// chains (primary, fallbacks, agent models and their fallbacks), then the
// models: entries marked selectable, first mention first, without duplicates.
// Pickers such as /model autocomplete offer exactly these. (Models that only
// match an agents.defaults.model.allow pattern may be chosen too, but cannot be
// listed.)
func (c *Config) ModelRefs() []failover.ModelRef {
	seen := map[failover.ModelRef]bool{}
	var out []failover.ModelRef
	add := func(refs ...failover.ModelRef) {
		for _, r := range refs {
			if r != "" && !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	add(c.Agents.Defaults.Model.Primary)
	add(c.Agents.Defaults.Model.Fallbacks...)
	for _, a := range c.Agents.List {
		add(a.Model)
		if a.Fallbacks != nil {
			add(*a.Fallbacks...)
		}
	}
	extra := make([]string, 0, len(c.Models))
	for r, m := range c.Models {
		if m.Selectable {
			extra = append(extra, string(r))
		}
	}
	sort.Strings(extra)
	for _, r := range extra {
		add(failover.ModelRef(r))
	}
	return out
}

// ProfileIDs lists the configured auth profile ids, sorted.
func (c *Config) ProfileIDs() []string {
	ids := make([]string, 0, len(c.Auth.Profiles))
	for id := range c.Auth.Profiles {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
