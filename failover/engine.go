package failover

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/detourbot/detour/classify"
)

// Clock is the engine's only source of time, so tests never sleep.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx ends; it returns ctx.Err() when cut short.
	Sleep(ctx context.Context, d time.Duration) error
}

// ProfileType orders rotation: tokens before api keys (P1).
type ProfileType string

// Profile types.
const (
	ProfileToken  ProfileType = "token"
	ProfileAPIKey ProfileType = "api_key"
)

// Profile is one credential's metadata; the secret never enters the engine.
type Profile struct {
	ID        string // "provider:name"
	Provider  string
	Type      ProfileType
	ExpiresAt time.Time // zero = no expiry
}

// ProfileState is the durable usage state of one profile (docs/behaviour.md section 3), or of
// one model when Key starts with "model:" (R7 consecutive transient failures).
type ProfileState struct {
	Key            string
	LastUsed       time.Time
	LastFailure    time.Time
	ErrorCount     int // failures inside the failure window (D1 ladder)
	Consecutive    int // consecutive transient failures (R7)
	CooldownUntil  time.Time
	CooldownReason classify.Reason
	CooldownModel  string // "provider/model" when the cooldown is model-scoped (D2)
	DisabledUntil  time.Time
	DisabledReason classify.Reason
	DisableCount   int       // billing / auth_permanent disables in a row (D3, D4 doubling)
	RecoveryAt     time.Time // recovery time as the provider stated it (C11), shown in /status
	LastError      string    // redacted preview of the last failure, for reports
	LastProbe      time.Time // last probe of this profile or model (R11, V5)
}

// StateStore keeps ProfileState durably and shares it across sessions (D6).
// Update must be atomic: fn runs on the current state (zero value with Key set when
// absent) and its result is stored, with no lost update under concurrency.
type StateStore interface {
	Get(ctx context.Context, key string) (ProfileState, error)
	Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error)
}

// BatchUpdater is an optional StateStore extension: UpdateMany applies fn(i, st)
// to the current state of keys[i], atomically for all keys (one transaction), and
// returns the stored states in keys' order. fn follows Update's rules (it may run
// more than once). The engine detects it on Engine.Store to record a profile's and
// its model's failure (R7) in one step; stores without it get one Update per key.
type BatchUpdater interface {
	UpdateMany(ctx context.Context, keys []string, fn func(i int, st *ProfileState)) ([]ProfileState, error)
}

// BatchGetter is an optional StateStore extension: GetMany returns the states of
// keys in order (zero state with Key set for absent keys), read as of one moment.
// The engine detects it on Engine.Store to read a candidate's model key and
// profile keys together; stores without it get one Get per key.
type BatchGetter interface {
	GetMany(ctx context.Context, keys []string) ([]ProfileState, error)
}

// ModelRef is "provider/model", split on the first "/" (docs/behaviour.md section 0).
type ModelRef string

// Candidate is one model of a chain with the profile chosen for an attempt.
type Candidate struct {
	Provider string
	Model    string
	Profile  string // profile id; empty for providers without credentials (e.g. local ollama)
}

// Ref returns "provider/model".
func (c Candidate) Ref() string { return c.Provider + "/" + c.Model }

// AttemptKind says why an attempt is made.
type AttemptKind string

// Attempt kinds.
const (
	AttemptNormal AttemptKind = "normal"
	AttemptRetry  AttemptKind = "retry"  // same candidate again (R5, R6, R13)
	AttemptProbe  AttemptKind = "probe"  // a check of a cooling or down provider (R11, A1, E1): with Request.Probe, the small request
	AttemptNudged AttemptKind = "nudged" // retry after empty output, with an instruction to answer (R13)
)

// Attempt is what the engine asks the caller to do: one paid call.
type Attempt struct {
	Candidate Candidate
	Kind      AttemptKind
	Number    int // 1-based within the run
}

// Output is what a successful attempt produced.
type Output struct {
	Text         string
	FinishReason string // normalised stop reason ("stop", "length", "tool_calls", ...)
	Progress     bool   // completed progress (R8): non-empty text, a completed tool call
	InputTokens  int
	OutputTokens int
	// UsageEstimated is true when the provider sent no usage and the tokens
	// are the caller's estimate (U1), so cost caps act all the same.
	UsageEstimated bool
}

// ProbeFunc sends the smallest request to c's model with c's profile (a
// one-word prompt, at most one output token, no history: what /recover sends,
// V5) and reports whether it answered (nil) or its *Failure (E1), with the
// tokens it cost (Output's text is not read).
type ProbeFunc func(ctx context.Context, c Candidate) (Output, error)

// AttemptFunc makes one paid call. A failure is returned as *Failure: the
// caller's LLM client builds it from what the provider sent (package llm,
// through classify). The engine itself names only what it alone sees: its own
// attempt timeout (R10), a cancellation nobody asked for (A4) and an answer
// with nothing in it (R13); any other error counts as unclassified.
type AttemptFunc func(ctx context.Context, a Attempt) (Output, error)

// Controller is the caller's say in a run, as an http.RoundTripper is a
// client's: the decisions outside the engine that may change what the run
// does next. The engine calls it on the run's goroutine, one method at a
// time; a nil Request.Control changes nothing. What only watches a run goes
// in Trace.
type Controller interface {
	// BeforeCall runs before every paid call, once the run's own bounds (R9,
	// R10) and budgets (B1, B2) allowed it. An error stops the run with a
	// *SummaryError whose Stop is that error (T6: wrap ErrUserBudget), except
	// a *LiveSwitchError (O6): the run jumps to the model it names when that
	// is a later candidate, and otherwise ends with it.
	BeforeCall(ctx context.Context, a Attempt) error
	// BeforeFallback runs before the first paid call on a candidate other
	// than Chain[0] (O2: persist the override first); an error ends the run.
	BeforeFallback(ctx context.Context, from, to Candidate, cause Failure) error
	// AfterFailedFallback undoes what BeforeFallback wrote when that candidate
	// ended without an answer, whatever ended it (O3).
	AfterFailedFallback(ctx context.Context, c Candidate, f Failure)
	// Compact shrinks the prompt after failure f, so the same candidate is
	// tried again with it (R15): a context_overflow that no later candidate's
	// larger window takes (B7 goes first; once a run), or a timeout on a
	// prompt above TimeoutCompactRatio of the candidate's window (at most
	// twice a run, and only while the estimate shrinks). ok=false leaves f to
	// Decide.
	Compact(ctx context.Context, f Failure) (c Compaction, ok bool)
}

// Compaction is what Controller.Compact did.
type Compaction struct {
	PromptTokens int   // the new estimate of the prompt
	Spent        Spend // the paid calls it made (a summary, R16); the turn's budget counts them (B1)
}

// NoControl is a Controller that changes nothing: every call may go ahead,
// nothing is persisted or compacted. Embed it to implement only some methods.
type NoControl struct{}

// BeforeCall allows every call.
func (NoControl) BeforeCall(context.Context, Attempt) error { return nil }

// BeforeFallback persists nothing.
func (NoControl) BeforeFallback(context.Context, Candidate, Candidate, Failure) error { return nil }

// AfterFailedFallback rolls nothing back.
func (NoControl) AfterFailedFallback(context.Context, Candidate, Failure) {}

// Compact drops nothing.
func (NoControl) Compact(context.Context, Failure) (Compaction, bool) { return Compaction{}, false }

// Trace watches a run, as an httptrace.ClientTrace watches a request: any hook
// may be nil, and none can change the run. They run on the run's goroutine.
type Trace struct {
	// OnAttempt is told every finished attempt and every skip (V1, metrics).
	OnAttempt func(AttemptRecord)
	// OnWait is told before the run sleeps through a provider's stated wait
	// because nothing else is usable (R6), so the user can see why (L1).
	OnWait func(c Candidate, wait time.Duration, cause Failure)
}

// Request is one run: one user turn through the chain.
type Request struct {
	SessionKey string
	Chain      []ModelRef // built by BuildChain; Chain[0] is the requested model (K1)
	Primary    ModelRef   // the configured primary, for probes and K4
	Source     Source     // selection source of Chain[0]

	// Profiles of every provider in the chain, and auth.order per provider (P1).
	Profiles map[string][]Profile
	Order    map[string][]string

	PinnedProfile string // profile pinned by the session (P2); a preference
	UserProfile   string // profile pinned by /model ...@profile (P3); strict
	PromptTokens  int    // estimated prompt size, for B7 context-window skips
	ContextWindow map[ModelRef]int
	Prices        map[ModelRef]Price // for the B1 cost cap
	// Images says the prompt holds images: candidates that do not take them
	// are skipped with reason image_input (I5), as B7 skips a small window.
	// TakesImages lists the models that do.
	Images      bool
	TakesImages map[ModelRef]bool
	// Spent is what the turn already paid for before this run (a summary of
	// dropped history, R16): the B1 caps count it too.
	Spent Spend

	// Probe checks a provider that is down before the conversation goes to
	// it again (E1); nil = the conversation itself is the check.
	Probe ProbeFunc

	Control Controller // the caller's decisions (T6, O2, O3, O6, R15); nil = none
	Trace   Trace      // what watches the run (V1, R6, L1)
}

// Spend is paid calls and their estimated cost.
type Spend struct {
	Calls int
	USD   float64
}

// Price is a model's price per million tokens (B1).
type Price struct{ InPerMTok, OutPerMTok float64 }

// AttemptRecord is one attempt's record (V1).
type AttemptRecord struct {
	Candidate Candidate
	Kind      AttemptKind
	Failure   *Failure        // nil on success
	Skipped   classify.Reason // non-empty when the candidate was skipped without a call
	Started   time.Time
	Duration  time.Duration
	CostUSD   float64 // estimated from the model's prices; 0 without prices
	// InputTokens and OutputTokens are the call's usage as the provider
	// reported it, or the caller's estimate when UsageEstimated (U1).
	InputTokens    int
	OutputTokens   int
	UsageEstimated bool
}

// Result is a successful run.
type Result struct {
	Output    Output
	Candidate Candidate // what answered
	Attempts  []AttemptRecord
	// FellBack is true when the answer came from a candidate other than Chain[0];
	// Cause is the failure that moved the run off Chain[0].
	FellBack bool
	Cause    *Failure
	CostUSD  float64
}

// Engine runs requests against shared state. It is safe for concurrent use.
type Engine struct {
	Store  StateStore
	Clock  Clock
	Policy Policy         // a zero Policy means DefaultPolicy()
	Guard  *Guard         // process-wide paid-call guard (B2); nil = none
	Log    *slog.Logger   // model_fallback_decision events (V2); nil = slog.Default()
	Rand   func() float64 // jitter source in [0,1) (B8); nil = math/rand; must be safe for concurrent use

	// Process-local caches (R11 probe throttle, R12 auth skip cache), created on
	// first use. A nil Store uses a private MemStore.
	mu      sync.Mutex
	probeAt map[string]time.Time // claimProbe's fallback when the store fails: key -> last probe
	skips   map[string]time.Time // sessionKey + "\x00" + ref -> skip until
	used    map[string]time.Time // state key -> last success in this process (P1, lazy LastUsed)
	flights map[string]*flight   // provider -> the shared probe this process runs (A1)
	mem     *MemStore
}

// WallClock is the real Clock.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx ends.
func (WallClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
