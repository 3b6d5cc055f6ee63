// Package llm calls OpenAI-compatible chat APIs through go-openai, one Client per
// provider and auth profile. It streams with an idle watchdog, and turns every
// failure into a *failover.Failure built by classify.Classify from exactly what
// the provider sent (status, headers, raw body, mid-stream flag, transport error),
// so the failover engine decides from facts rather than from go-openai's error
// strings.
//
// What it guarantees:
//   - No hidden retries: one HTTP request per Chat or Probe call.
//   - Idle detection (R5, R8): no chunk for IdleTimeout, including no response
//     headers at all, cancels the call with classify.ErrIdleTimeout; the Failure
//     has Idle set. The attempt timeout is the caller's ctx deadline (cause
//     classify.ErrAttemptTimeout); a caller cancellation is reason aborted.
//   - Unknown finish reasons are errors (R14); empty answers carry
//     classify.ErrEmptyOutput (R13); Progress means non-empty text or a completed
//     tool call (R8), never output tokens alone.
//   - The API key never appears in errors, Failure fields or logs (P4).
//
// go-openai builds and sends the request, reports HTTP errors and frames the
// SSE stream (RecvRaw); each chunk's JSON is decoded by chunkDecoder, a strict
// allocation-free fast path that hands anything unusual to encoding/json with
// go-openai's own types, so results and errors are what Recv would give.
package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// DefaultIdleTimeout is used when Config.IdleTimeout is zero.
const DefaultIdleTimeout = 60 * time.Second

// Config configures one client: one provider, one auth profile.
type Config struct {
	Provider    string // provider id from config (openai, openrouter, ...)
	BaseURL     string // OpenAI-compatible base URL, e.g. https://api.openai.com/v1
	ProfileID   string // "provider:name"; never a secret
	APIKey      string // the secret; empty for providers without credentials
	IdleTimeout time.Duration
	// HTTPClient is optional. Its Transport is wrapped (never replaced) to capture
	// error headers and bodies; its Timeout is ignored, since a whole-body timeout
	// kills long streams (deadlines come from ctx and the idle watchdog).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock used to turn stated waits (Retry-After, reset headers and
	// texts) into recovery times; nil = time.Now. Pass the engine's clock so both
	// agree on what "in 30 s" means.
	Now func() time.Time
}

// Message is one chat message.
type Message struct {
	Role    string // system, user, assistant
	Content string
}

// Request is one chat completion request.
type Request struct {
	Model       string
	Messages    []Message
	MaxTokens   int      // 0 = provider default
	Temperature *float32 // nil = provider default
}

// Client is one provider + profile. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	api  *openai.Client
	log  *slog.Logger
	key  string // the API key, for redaction only
	now  func() time.Time
	// classify is classify.Classify; tests swap it to see the Response fed to it.
	classify func(classify.Response, time.Time) classify.Verdict
	// onChunk, when set by a test, sees each raw stream payload.
	onChunk func(raw []byte)
}

// New builds a client.
func New(cfg Config) (*Client, error) {
	if cfg.Provider == "" {
		return nil, errors.New("llm: provider is required")
	}
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("llm: provider %s: base url is required", cfg.Provider)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	hc.Timeout = 0
	base := hc.Transport
	if base == nil {
		base = defaultTransport()
	}
	hc.Transport = &captureTransport{base: base}

	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = &hc
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg:  cfg,
		http: &hc,
		api:  openai.NewClientWithConfig(oc),
		log:  log.With("provider", cfg.Provider, "profile", cfg.ProfileID),
		now:  cfg.Now,

		classify: classify.Classify,
	}
	if len(cfg.APIKey) >= 4 {
		c.key = cfg.APIKey // redacted wherever a provider echoes it
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

func defaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Provider returns the provider id.
func (c *Client) Provider() string { return c.cfg.Provider }

// ProfileID returns the auth profile id.
func (c *Client) ProfileID() string { return c.cfg.ProfileID }

// CloseIdleConnections closes kept-alive connections (shutdown, tests).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// knownFinish are the stop reasons the engine understands; others are R14 errors.
var knownFinish = map[string]bool{
	"stop": true, "length": true, "tool_calls": true, "function_call": true, "content_filter": true,
}

// errTruncated: the stream ended without [DONE] and without a finish_reason.
var errTruncated = errors.New("stream closed before a finish_reason was received")

func (c *Client) messages(req Request) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	return out
}

// buildRequest fits max tokens and temperature to go-openai's model checks
// (reasoning models want max_completion_tokens and no temperature).
func buildRequest(model string, msgs []openai.ChatCompletionMessage, maxTokens int, temp *float32) openai.ChatCompletionRequest {
	r := openai.ChatCompletionRequest{Model: model, Messages: msgs, MaxTokens: maxTokens}
	if temp != nil {
		r.Temperature = *temp
	}
	v := openai.NewReasoningValidator()
	if err := v.Validate(r); errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated) {
		r.MaxCompletionTokens, r.MaxTokens = r.MaxTokens, 0
	}
	if err := v.Validate(r); errors.Is(err, openai.ErrReasoningModelLimitationsOther) || errors.Is(err, openai.ErrReasoningSamplingUnsupported) {
		r.Temperature = 0
	}
	return r
}

// watchdog cancels ctx with classify.ErrIdleTimeout when not kicked for idle.
type watchdog struct {
	t    *time.Timer
	idle time.Duration
}

func startWatchdog(parent context.Context, idle time.Duration) (context.Context, *watchdog, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{idle: idle}
	w.t = time.AfterFunc(idle, func() { cancel(classify.ErrIdleTimeout) })
	return ctx, w, cancel
}

func (w *watchdog) kick() { w.t.Reset(w.idle) }
func (w *watchdog) stop() { w.t.Stop() }

// Chat streams one chat completion, calling onDelta (may be nil) with each text
// delta as it arrives. On failure it returns a *failover.Failure.
func (c *Client) Chat(ctx context.Context, req Request, onDelta func(string)) (failover.Output, error) {
	start := c.now()
	holder := &capture{}
	wctx, wd, cancel := startWatchdog(withCapture(ctx, holder), c.cfg.IdleTimeout)
	defer cancel(context.Canceled)
	defer wd.stop()

	oreq := buildRequest(req.Model, c.messages(req), req.MaxTokens, req.Temperature)
	oreq.Stream = true
	oreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}

	stream, err := c.api.CreateChatCompletionStream(wctx, oreq)
	if err != nil {
		return failover.Output{}, c.fail(ctx, wctx, req.Model, holder, err, false, start)
	}
	defer stream.Close()
	wd.kick()

	var (
		out      failover.Output
		text     strings.Builder
		finish   string
		sawTools bool
		dec      chunkDecoder
	)
	for {
		// RecvRaw keeps go-openai's SSE framing, [DONE] and error-event
		// handling; only the per-chunk JSON decoding is ours (see chunkDecoder).
		raw, rerr := stream.RecvRaw()
		var ck *chunkView
		if rerr == nil {
			if c.onChunk != nil {
				c.onChunk(raw)
			}
			ck, rerr = dec.decode(raw)
		}
		if rerr != nil {
			if errors.Is(rerr, errEOF) && wctx.Err() == nil {
				break
			}
			// Partial text of a broken stream is never delivered, so it is not
			// completed progress (R8): a stall after one chunk counts toward the
			// breaker like any other stall.
			out.Text = text.String()
			return out, c.fail(ctx, wctx, req.Model, holder, rerr, true, start)
		}
		wd.kick()
		if ck.hasUsage {
			out.InputTokens = ck.promptTokens
			out.OutputTokens = ck.completionTokens
		}
		for i := range ck.choices {
			ch := &ck.choices[i]
			if len(ch.content) > 0 {
				// The delta handed to onDelta is a view of the builder's bytes,
				// which are never rewritten: no copy per chunk.
				at := text.Len()
				text.Write(ch.content)
				if onDelta != nil {
					onDelta(text.String()[at:])
				}
			}
			if ch.tools {
				sawTools = true
			}
			if ch.finish != "" && ch.finish != string(openai.FinishReasonNull) {
				finish = ch.finish
			}
		}
	}
	wd.stop()
	out.Text = text.String()
	out.FinishReason = finish
	toolDone := sawTools && (finish == "tool_calls" || finish == "function_call")
	out.Progress = out.Text != "" || toolDone // R8: text or a completed tool call, not tokens

	switch {
	case finish == "":
		// covers C6: EOF without [DONE]/finish_reason is a truncated stream.
		return out, c.failResponse(ctx, req.Model, classify.Response{
			Status: holder.statusCode(), Headers: holder.headers(), Stream: true, Err: errTruncated,
		}, start)
	case !knownFinish[finish]:
		// covers R14: an unknown stop reason is an error before any decision.
		return out, c.failResponse(ctx, req.Model, classify.Response{
			Status: holder.statusCode(), Headers: holder.headers(), Stream: true,
			Body: "Unhandled stop reason: " + finish,
		}, start)
	case out.Text == "" && !toolDone:
		// covers R13: an empty answer is an error the engine may retry once.
		return out, c.failResponse(ctx, req.Model, classify.Response{
			Status: holder.statusCode(), Headers: holder.headers(), Err: classify.ErrEmptyOutput,
		}, start)
	}
	c.log.Debug("llm call ok", "model", req.Model, "finish", finish,
		"in", out.InputTokens, "out", out.OutputTokens, "dur", c.now().Sub(start))
	return out, nil
}

// Probe makes the smallest possible request (max_tokens 1, non-streaming) to see
// whether the model answers with this profile (V5). Nil means it answered.
func (c *Client) Probe(ctx context.Context, model string) error {
	start := c.now()
	holder := &capture{}
	wctx, wd, cancel := startWatchdog(withCapture(ctx, holder), c.cfg.IdleTimeout)
	defer cancel(context.Canceled)
	defer wd.stop()
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "ping"}}
	_, err := c.api.CreateChatCompletion(wctx, buildRequest(model, msgs, 1, nil))
	if err != nil {
		return c.fail(ctx, wctx, model, holder, err, false, start)
	}
	c.log.Debug("llm probe ok", "model", model, "dur", c.now().Sub(start))
	return nil
}
