// Package fakeprovider is a fault-injecting LLM provider for tests, drills and the
// demo bot: OpenAI-compatible chat completions, Azure OpenAI, Anthropic's
// Messages API and Gemini's OpenAI-compatible endpoint, each with its own URLs,
// auth header, stream framing and error bodies. detour's real clients talk to
// it over 127.0.0.1.
//
// # URLs
//
// Each provider gets its own base URL per protocol (BaseURLFor); the route a
// call arrives on decides the protocol it is answered in:
//
//   - openai: <URL>/<provider>/v1, POST /chat/completions and GET /models
//     (a plain <URL>/v1 is provider "default"); streaming with real SSE framing
//     (`data: {...}` + blank line, `data: [DONE]`, a usage chunk with empty
//     choices when stream_options.include_usage is set) and non-streaming. No
//     key is required: local model servers take none.
//   - azure: <URL>/<provider>, POST
//     /openai/deployments/{deployment}/chat/completions?api-version=..., the
//     key in the api-key header (azure.go).
//   - anthropic: <URL>/<provider>/v1, POST /messages with x-api-key and
//     anthropic-version, the Messages API's event stream (anthropic.go).
//   - gemini: <URL>/<provider>/v1beta/openai, POST /chat/completions with
//     Authorization: Bearer; errors as a JSON list holding {"error": {...}}
//     (gemini.go).
//
// A request without the credential header its API requires is refused as that
// API refuses it, before any rule is looked at.
//
// # Scripting
//
// Rules say how calls fail. Script(Rule{...}) adds one; a rule matches a call when
// its Provider, Model and KeyID are empty or equal to the call's (KeyID is KeyID of
// the bearer key). The most specific matching rule wins (the one with most
// non-empty fields of Provider, Model, KeyID); among equally specific rules the
// oldest wins, so scripts read as a queue. A rule with Times > 0 is used up after
// that many calls and later calls fall through to the next rule, or to mode ok:
// Rule{Mode: ModeRateLimit, Times: 2} means "fail twice, then succeed".
// Reset forgets every rule and the call log.
//
// The same is reachable over HTTP so another process (the demo bot, drills) can
// script it: POST /_fake/script with one Rule or an array of rules as JSON
// (durations as "30s" strings or numbers of seconds), POST /_fake/reset, and
// GET /_fake/calls (the call log as JSON), GET /_fake/trap (what reached the
// redirect trap, as JSON).
//
// A timed script (Play, or POST /_fake/phases with a JSON array of phases)
// answers calls by the phase playing now: providers that flap every few seconds
// (Flapping makes such a script). A phase's rules win over the scripted ones.
//
// # Markers
//
// A human in the demo triggers failures by typing "#fail:<mode>" (for example
// "hello #fail:rate_limit") in a message. The marker is honoured only for models
// whose name contains "primary", or for calls matched by a rule with
// HonourMarkers set; elsewhere it is plain text, so the fallback answers. A marker
// wins over scripted rules and does not use up a rule's Times.
//
// # Modes
//
// See the Mode constants. Modes that wait (hang_before_headers,
// stall_after_first_chunk, slow_stream, keepalive_only, Delay) end when the
// client goes away or Close is called; Close waits for every handler, so no
// goroutine is left behind.
//
// Two modes look busy but give no answer, as real providers do (E4, E5).
// keepalive_only opens a stream and then sends only keep-alives, one every
// Delay (default 100ms): in the OpenAI-compatible protocols (openai, azure,
// gemini) an SSE comment line (": keep-alive"), a chunk with an empty delta
// and a chunk whose content is whitespace, in turn; in Anthropic's, ping
// events after message_start. Asked without stream it hangs before its
// headers, like hang_before_headers. reasoning_only is a complete, well-formed
// answer whose only content is reasoning: reasoning_content deltas (a
// reasoning_content field without stream) in the OpenAI-compatible protocols,
// a thinking block in Anthropic's, then the usual stop and usage.
//
// The hostile modes test a client's bounds (T1, T2): gzip_bomb (a few MB
// sent with Content-Encoding: gzip that inflate to GBs, streaming or not),
// endless_stream (a fast stream that never ends), huge_line (one 100 MiB SSE
// line), huge_chunk (one 100 MiB content delta in a single chunk), huge_error_body
// (a 100 MiB error body), redirect_other_port (a 307 to another port of 127.0.0.1,
// where a trap records whatever reaches it: TrapHits, GET /_fake/trap) and
// redirect_loop (a 307 to the same URL). Rule.Size sets the sizes. Every byte is
// made as it is sent: the fake never holds a huge body, and stops when the client
// goes away.
// When serving through Handler with httptest, call Close before the httptest
// server's Close.
//
// Every mode is answered in the protocol of the route: a rate limit is OpenAI's
// 429 with x-ratelimit-* headers, Anthropic's rate_limit_error with retry-after
// and anthropic-ratelimit-* headers, Gemini's RESOURCE_EXHAUSTED with a
// RetryInfo, Azure's "exceeded call rate limit" text. Mode names keep the
// OpenAI status they were named for; the protocol's own status is sent (Gemini
// answers a bad key with 400 INVALID_ARGUMENT, as Google does).
//
// The fake never logs or stores a key, only its KeyID.
package fakeprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mode is how the fake answers a call. Its string form is used in JSON, CLI
// scripts and "#fail:<mode>" markers.
type Mode string

// Modes.
const (
	ModeOK                   Mode = "ok"                      // a normal answer
	ModeRateLimit            Mode = "rate_limit"              // 429, Retry-After + x-ratelimit-reset-requests headers
	ModeInsufficientQuota    Mode = "insufficient_quota"      // 429, OpenAI type insufficient_quota
	ModeBilling402           Mode = "billing_402"             // 402 insufficient credits
	ModeUnauthorized401      Mode = "unauthorized_401"        // 401 invalid api key (key masked as OpenAI does)
	ModeRevoked403           Mode = "revoked_403"             // 403 "API key has been revoked"
	ModeModelNotFound404     Mode = "model_not_found_404"     // 404 model_not_found
	ModeContextOverflow400   Mode = "context_overflow_400"    // 400 context_length_exceeded
	ModeFormat400            Mode = "format_400"              // 400 invalid request
	ModeServer500            Mode = "server_500"              // 500 server_error
	ModeBadGateway502HTML    Mode = "bad_gateway_502_html"    // 502 with a proxy HTML page
	ModeUnavailable503       Mode = "unavailable_503"         // 503 service unavailable
	ModeOverloaded529        Mode = "overloaded_529"          // 529 Anthropic overloaded_error body
	ModeStallAfterFirstChunk Mode = "stall_after_first_chunk" // one chunk, then silence until the client leaves
	ModeHangBeforeHeaders    Mode = "hang_before_headers"     // never writes headers until the client leaves
	ModeSlowStream           Mode = "slow_stream"             // chunks every Delay (default 200ms)
	ModeEmptyReply           Mode = "empty_reply"             // 200 with empty content, finish_reason stop
	ModeUnknownFinishReason  Mode = "unknown_finish_reason"   // finish_reason "weird_reason"
	ModeMidstreamError       Mode = "midstream_error"         // one chunk, then an SSE error event
	ModeConnectionReset      Mode = "connection_reset"        // TCP reset (after one chunk when streaming)
	ModeQuotaResetText       Mode = "quota_reset_text"        // 429 "quota ... exhausted ... will reset at <time>"
	// Streams that look alive but answer nothing (E4, E5).
	ModeKeepAliveOnly Mode = "keepalive_only" // 200 stream, then only keep-alives every Delay (default 100ms) until the client leaves; non-stream: hangs before headers
	ModeReasoningOnly Mode = "reasoning_only" // a complete answer whose only content is reasoning (reasoning_content, Anthropic thinking), stop/end_turn

	// Hostile providers (T1, T2). Sizes are Rule.Size (default 100 MiB; the gzip
	// bomb inflates to 4 GiB); the bytes are made as they are sent, so the fake
	// never holds them.
	ModeGzipBomb          Mode = "gzip_bomb"           // Content-Encoding: gzip, ~1000x: a few MB that inflate to GBs of chunks (or of one answer)
	ModeEndlessStream     Mode = "endless_stream"      // content chunks as fast as possible, never ending (non-stream: a body that never ends)
	ModeHugeLine          Mode = "huge_line"           // one SSE line of Size bytes that is no JSON (non-stream: a JSON body of one Size-byte line)
	ModeHugeChunk         Mode = "huge_chunk"          // one chunk whose content delta is Size bytes (non-stream: a Size-byte answer)
	ModeHugeErrorBody     Mode = "huge_error_body"     // 500 whose JSON error message is Size bytes
	ModeRedirectOtherPort Mode = "redirect_other_port" // 307 to another port of 127.0.0.1 that records what reaches it (TrapHits)
	ModeRedirectLoop      Mode = "redirect_loop"       // 307 to the same URL, forever
)

// AllModes lists every mode, ModeOK first.
var AllModes = []Mode{
	ModeOK, ModeRateLimit, ModeInsufficientQuota, ModeBilling402, ModeUnauthorized401,
	ModeRevoked403, ModeModelNotFound404, ModeContextOverflow400, ModeFormat400,
	ModeServer500, ModeBadGateway502HTML, ModeUnavailable503, ModeOverloaded529,
	ModeStallAfterFirstChunk, ModeHangBeforeHeaders, ModeSlowStream, ModeEmptyReply,
	ModeUnknownFinishReason, ModeMidstreamError, ModeConnectionReset, ModeQuotaResetText,
	ModeKeepAliveOnly, ModeReasoningOnly,
	ModeGzipBomb, ModeEndlessStream, ModeHugeLine, ModeHugeChunk, ModeHugeErrorBody,
	ModeRedirectOtherPort, ModeRedirectLoop,
}

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return slices.Contains(AllModes, m) }

// API is the protocol a route speaks.
type API string

// The protocols the fake speaks.
const (
	APIOpenAI    API = "openai"
	APIAzure     API = "azure"
	APIAnthropic API = "anthropic"
	APIGemini    API = "gemini"
)

// Rule scripts how matching calls are answered. Empty Provider, Model or KeyID
// match anything.
type Rule struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	KeyID    string `json:"key_id,omitempty"` // KeyID(bearer key)
	Mode     Mode   `json:"mode,omitempty"`   // "" = ok
	// Times is how many calls the rule answers; 0 = forever.
	Times int `json:"times,omitempty"`
	// RetryAfter is the wait the rate_limit mode announces (default 20s) and, for
	// quota_reset_text without ResetText, the distance of the reset time (default 2h).
	RetryAfter time.Duration `json:"-"`
	// ResetText is the reset time quoted by quota_reset_text, e.g. "08-25 01:37:00 UTC".
	ResetText string `json:"reset_text,omitempty"`
	// Delay is the pause between chunks in slow_stream, between keep-alives
	// in keepalive_only and, in every other mode, the pause before the
	// response starts.
	Delay time.Duration `json:"-"`
	// Reply replaces the default answer text of ok-like modes, and the
	// reasoning of reasoning_only. Streams send it word by word (one chunk per
	// space-separated word).
	Reply string `json:"reply,omitempty"`
	// Size is the byte count of the huge modes (huge_line, huge_chunk,
	// huge_error_body: default 100 MiB) and the inflated size of gzip_bomb
	// (default 4 GiB).
	Size int64 `json:"size,omitempty"`
	// HonourMarkers lets "#fail:<mode>" markers act on calls this rule matches.
	HonourMarkers bool `json:"honour_markers,omitempty"`
	// NoUsage answers without any token usage, like the OpenAI-compatible
	// servers that never report it (no usage chunk even when
	// stream_options.include_usage asks; zero usage in Anthropic's events).
	NoUsage bool `json:"no_usage,omitempty"`
}

// MarshalJSON writes durations as Go duration strings.
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	out := struct {
		plain
		RetryAfter string `json:"retry_after,omitempty"`
		Delay      string `json:"delay,omitempty"`
	}{plain: plain(r)}
	if r.RetryAfter != 0 {
		out.RetryAfter = r.RetryAfter.String()
	}
	if r.Delay != 0 {
		out.Delay = r.Delay.String()
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a rule; durations are "1m30s" strings or numbers of seconds.
func (r *Rule) UnmarshalJSON(b []byte) error {
	type plain Rule
	var aux struct {
		plain
		RetryAfter json.RawMessage `json:"retry_after,omitempty"`
		Delay      json.RawMessage `json:"delay,omitempty"`
	}
	// A misspelt field ("tmes": 2) is refused: ignored, it would turn a rule
	// that fails twice into one that fails forever, and the rehearsal would lie.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	*r = Rule(aux.plain)
	var err error
	if r.RetryAfter, err = parseDuration(aux.RetryAfter); err != nil {
		return fmt.Errorf("retry_after: %w", err)
	}
	if r.Delay, err = parseDuration(aux.Delay); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	if r.Mode != "" && !r.Mode.Valid() {
		return fmt.Errorf("unknown mode %q", r.Mode)
	}
	return nil
}

func parseDuration(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return time.ParseDuration(s)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("want a duration string or seconds, got %s", raw)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func (r Rule) specificity() int {
	n := 0
	for _, s := range []string{r.Provider, r.Model, r.KeyID} {
		if s != "" {
			n++
		}
	}
	return n
}

func (r Rule) matches(provider, model, keyID string) bool {
	return (r.Provider == "" || r.Provider == provider) &&
		(r.Model == "" || r.Model == model) &&
		(r.KeyID == "" || r.KeyID == keyID)
}

// Call is one logged call. It never holds the key, only KeyID.
type Call struct {
	Time     time.Time `json:"time"`
	Provider string    `json:"provider"`
	API      API       `json:"api"`
	// Model is the body's model; for Azure, which routes by deployment, the
	// deployment when the body names none.
	Model      string `json:"model"`
	Deployment string `json:"deployment,omitempty"` // Azure's path segment
	KeyID      string `json:"key_id"`
	Stream     bool   `json:"stream"`
	Mode       Mode   `json:"mode"`
	Status     int    `json:"status"` // HTTP status sent; 0 when none (hang, reset) or not yet
	// Duration is how long the handler ran; 0 while the call is still running.
	Duration time.Duration `json:"duration"`
	// Messages is the prompt as the fake received it (each text at most 64
	// KiB, images by type, size and digest); nil when the body was refused.
	Messages []Logged `json:"messages,omitempty"`
	// Usage is the token usage the answer reported; nil when it reported none
	// (a failure, or a Rule with NoUsage).
	Usage *Usage `json:"usage,omitempty"`
}

// Filter selects calls for CallCount; empty fields match anything.
type Filter struct {
	Provider, Model, KeyID string
	Mode                   Mode
}

// KeyID is the short non-reversible id of a bearer key used in rules and the call
// log: the first 8 hex digits of its SHA-256. The empty key has id "".
func KeyID(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// Option configures a Server.
type Option func(*Server)

// WithModels adds models that GET /models lists for provider ("" = every provider).
func WithModels(provider string, models ...string) Option {
	return func(s *Server) { s.models[provider] = append(s.models[provider], models...) }
}

// WithRules scripts rules at construction.
func WithRules(rules ...Rule) Option {
	return func(s *Server) {
		for _, r := range rules {
			s.addRule(r)
		}
	}
}

// WithNow sets the clock used for call times and computed reset texts.
func WithNow(now func() time.Time) Option { return func(s *Server) { s.now = now } }

type scripted struct {
	Rule
	seq  int
	used int
}

// Server is the fake. It is safe for concurrent use.
type Server struct {
	now    func() time.Time
	models map[string][]string

	mu       sync.Mutex
	rules    []*scripted
	timeline *timeline // phases being played (Play), nil when none
	seq      int
	calls    []Call
	acted    map[string]time.Time // prompts a "#fail:" marker acted on (notes.go)

	done      chan struct{}
	closeOnce sync.Once
	gate      gate

	httpSrv  *http.Server
	listener net.Listener
	serveErr chan error
	mux      *http.ServeMux

	trap trap // the redirect target of redirect_other_port, started on first use

	textOnly map[string]bool // models that take no images (TextOnly)
}

// New returns a server; call Start to listen, or mount Handler in httptest.
func New(opts ...Option) *Server {
	s := &Server{
		now:    time.Now,
		models: map[string][]string{},
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{provider}/v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /{provider}/v1/chat/completions", s.handle(APIOpenAI))
	mux.HandleFunc("POST /v1/chat/completions", s.handle(APIOpenAI))
	mux.HandleFunc("POST /{provider}/openai/deployments/{deployment}/chat/completions", s.handle(APIAzure))
	mux.HandleFunc("POST /{provider}/v1/messages", s.handle(APIAnthropic))
	mux.HandleFunc("POST /v1/messages", s.handle(APIAnthropic))
	mux.HandleFunc("POST /{provider}/v1beta/openai/chat/completions", s.handle(APIGemini))
	mux.HandleFunc("POST /_fake/script", s.handleScript)
	mux.HandleFunc("POST /_fake/reset", s.handleReset)
	mux.HandleFunc("POST /_fake/phases", s.handlePhases)
	mux.HandleFunc("GET /_fake/calls", s.handleCalls)
	mux.HandleFunc("GET /_fake/trap", s.handleTrap)
	s.mux = mux
	return s
}

// Handler returns the server's HTTP handler (for httptest).
func (s *Server) Handler() http.Handler { return s.gate.let(s.mux) }

// gate lets a listener's requests in until it closes, and counts the running
// ones so that closing leaves none behind.
type gate struct {
	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

// let runs h for each request while the gate is open; once closed it answers 503.
func (g *gate) let(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			http.Error(w, "fake llm closed", http.StatusServiceUnavailable)
			return
		}
		g.handlers.Add(1) // under mu, so never racing the closer's Wait
		g.mu.Unlock()
		defer g.handlers.Done()
		h.ServeHTTP(w, r)
	})
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in the background until Close.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fakeprovider: listen %s: %w", addr, err)
	}
	s.listener = ln
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.httpSrv.Serve(ln) }()
	return nil
}

// URL is the server root, e.g. http://127.0.0.1:PORT (empty before Start).
func (s *Server) URL() string {
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String()
}

// BaseURL is the OpenAI base URL of provider: <URL>/<provider>/v1, or <URL>/v1 for "".
func (s *Server) BaseURL(provider string) string {
	if provider == "" || provider == "default" {
		return s.URL() + "/v1"
	}
	return s.URL() + "/" + provider + "/v1"
}

// BaseURLFor is the base URL a client of api uses for provider ("" = openai):
// <URL>/<provider>/v1 for openai and anthropic, <URL>/<provider> for azure (the
// client adds /openai/deployments/...), <URL>/<provider>/v1beta/openai for gemini.
func (s *Server) BaseURLFor(provider string, api API) string {
	return s.URL() + RoutePath(provider, api)
}

// RoutePath is BaseURLFor without the server root, for a fake mounted
// elsewhere (httptest).
func RoutePath(provider string, api API) string {
	switch api {
	case APIAzure:
		return "/" + provider
	case APIGemini:
		return "/" + provider + "/v1beta/openai"
	}
	if provider == "" || provider == "default" {
		return "/v1"
	}
	return "/" + provider + "/v1"
}

// Close ends waiting handlers, stops the listener (if started) and waits for
// every handler to return. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.gate.mu.Lock()
		s.gate.closed = true
		close(s.done)
		s.gate.mu.Unlock()
		if s.httpSrv != nil {
			_ = s.httpSrv.Close()
			<-s.serveErr
		}
		s.gate.handlers.Wait()
		s.trap.close() // after the handlers: none can start it any more
	})
}

// Script adds a rule.
func (s *Server) Script(r Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addRuleLocked(r)
}

func (s *Server) addRule(r Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addRuleLocked(r)
}

func (s *Server) addRuleLocked(r Rule) {
	s.seq++
	s.rules = append(s.rules, &scripted{Rule: r, seq: s.seq})
}

// Rules returns the scripted rules that still answer calls.
func (s *Server) Rules() []Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Rule
	for _, r := range s.rules {
		if r.Times == 0 || r.used < r.Times {
			out = append(out, r.Rule)
		}
	}
	return out
}

// Reset forgets every rule, the timed script (Play) and every logged call.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
	s.timeline = nil
	s.calls = nil
	s.acted = nil
	s.trap.reset()
}

// Calls returns a copy of the call log, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount counts logged calls matching f.
func (s *Server) CallCount(f Filter) int {
	n := 0
	for _, c := range s.Calls() {
		if (f.Provider == "" || f.Provider == c.Provider) &&
			(f.Model == "" || f.Model == c.Model) &&
			(f.KeyID == "" || f.KeyID == c.KeyID) &&
			(f.Mode == "" || f.Mode == c.Mode) {
			n++
		}
	}
	return n
}

// logCall records a call as soon as it is decided, so a client that has read
// its answer always finds it in the log; finishCall fills in the end.
func (s *Server) logCall(c Call) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	return len(s.calls) - 1
}

// loggedUsage sets the usage of call i (logged at t) as its answer reports it.
func (s *Server) loggedUsage(i int, t time.Time, u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= 0 && i < len(s.calls) && s.calls[i].Time.Equal(t) {
		s.calls[i].Usage = &u
	}
}

func (s *Server) finishCall(i int, c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < len(s.calls) && s.calls[i].Time.Equal(c.Time) { // not Reset meanwhile
		s.calls[i] = c
	}
}

// decide picks the rule for a call and uses it up. honour reports whether
// markers apply.
func (s *Server) decide(provider, model, keyID string) (rule Rule, honour bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.phaseRule(provider, model, keyID); ok {
		return r, r.HonourMarkers || strings.Contains(model, "primary")
	}
	var live []*scripted
	for _, r := range s.rules {
		if !r.matches(provider, model, keyID) {
			continue
		}
		if r.HonourMarkers {
			honour = true
		}
		if r.Times == 0 || r.used < r.Times {
			live = append(live, r)
		}
	}
	if strings.Contains(model, "primary") {
		honour = true
	}
	if len(live) == 0 {
		return Rule{Mode: ModeOK}, honour
	}
	sort.SliceStable(live, func(i, j int) bool {
		si, sj := live[i].specificity(), live[j].specificity()
		if si != sj {
			return si > sj
		}
		return live[i].seq < live[j].seq
	})
	best := live[0]
	best.used++
	r := best.Rule
	if r.Mode == "" {
		r.Mode = ModeOK
	}
	return r, honour
}

// findMarker finds "#fail:<mode>" in text. raw is the word typed after "#fail:"
// (found reports whether there is a marker at all); ok reports whether it names
// a mode. Case does not matter: "#fail:Rate_Limit" is rate_limit.
func findMarker(text string) (m Mode, raw string, found, ok bool) {
	i := strings.Index(strings.ToLower(text), "#fail:")
	if i < 0 {
		return "", "", false, false
	}
	rest := text[i+len("#fail:"):]
	end := strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	})
	if end >= 0 {
		rest = rest[:end]
	}
	const maxRaw = 40 // a mode name is short; the note quotes no more than this
	if len(rest) > maxRaw {
		rest = rest[:maxRaw]
	}
	m = Mode(strings.ToLower(rest))
	return m, rest, true, m.Valid()
}

// wait pauses for d, or until the client leaves or the server closes; it reports
// whether the full pause elapsed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

// block waits until the client leaves or the server closes.
func (s *Server) block(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	provider := providerOf(r)
	seen := map[string]bool{}
	var ids []string
	add := func(m string) {
		if m != "" && !seen[m] {
			seen[m] = true
			ids = append(ids, m)
		}
	}
	for _, m := range s.models[provider] {
		add(m)
	}
	for _, m := range s.models[""] {
		add(m)
	}
	s.mu.Lock()
	for _, rule := range s.rules {
		if rule.Provider == "" || rule.Provider == provider {
			add(rule.Model)
		}
	}
	s.mu.Unlock()
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range ids {
		out.Data = append(out.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "fakeprovider"})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleScript(w http.ResponseWriter, r *http.Request) {
	rules, err := ParseRules(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rule := range rules {
		s.Script(rule)
	}
	writeJSON(w, http.StatusOK, map[string]int{"added": len(rules)})
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}

func (s *Server) handleCalls(w http.ResponseWriter, _ *http.Request) {
	calls := s.Calls()
	if calls == nil {
		calls = []Call{}
	}
	writeJSON(w, http.StatusOK, calls)
}

func providerOf(r *http.Request) string {
	if p := r.PathValue("provider"); p != "" {
		return p
	}
	return "default"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
