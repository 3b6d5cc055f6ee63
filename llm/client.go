// Package llm calls chat APIs, one Client per provider and auth profile, in the
// provider's own protocol (API): OpenAI-compatible chat completions, Azure
// OpenAI and Gemini's OpenAI-compatible endpoint through go-openai, Anthropic's
// Messages API through a small client of its own (anthropic.go). It streams
// with an idle watchdog, and turns every
// failure into a *failover.Failure built by classify.Classify from exactly what
// the provider sent (status, headers, raw body, mid-stream flag, transport error),
// so the failover engine decides from facts rather than from go-openai's error
// strings.
//
// What it guarantees:
//   - No hidden retries: one HTTP request per Chat or Probe call.
//   - Idle detection (R5, R8, E4): no sign of work for IdleTimeout, including
//     no response headers at all, cancels the call with
//     classify.ErrIdleTimeout; the Failure has Idle set. Only real activity
//     counts (visible answer text, reasoning text, a tool call, a stop
//     reason): keep-alives (SSE comments, Anthropic's pings, chunks with no
//     text or only whitespace) do not. The attempt timeout is the caller's ctx
//     deadline (cause classify.ErrAttemptTimeout); a caller cancellation is
//     reason aborted.
//   - Reasoning is not an answer (E5): text a provider marks as reasoning
//     (reasoning_content or reasoning, Anthropic's thinking) keeps the call
//     from being idle but is never shown to onDelta nor put in Output.Text.
//   - Stop reasons go through classify.Finish, the one list of them, here and
//     nowhere else: unknown ones are errors (R14); answers without visible
//     text (empty, whitespace, only reasoning) carry classify.ErrEmptyOutput
//     (R13); Progress means visible text or a completed tool call (R8), never
//     output tokens alone.
//   - Bounded input (T1): the body (MaxResponseBytes), one stream line, and the
//     answer text (MaxAnswerBytes) are capped, compressed responses are refused
//     (none is asked for), so memory stays bounded whatever a provider sends;
//     past a cap the attempt fails with reason refused_response naming the cap
//     (A2: the provider's fault, so the engine cools it down and falls back).
//     Probe obeys the same caps.
//   - Redirects are never followed (T2): a redirect is a failed attempt, and the
//     redirected request (key and prompt) is never sent.
//   - The API key never appears in errors, Failure fields or logs (P4).
//
// Every protocol shares one http.Client, so the caps, the refused redirects and
// the capture of what the provider sent hold for all of them alike. For the
// go-openai protocols go-openai builds and sends the request, reports HTTP
// errors, frames the SSE stream and decodes each chunk (recv: its Recv, plus
// the reasoning field go-openai does not know).
package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
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
	Provider string // provider id from config (openai, openrouter, ...)
	// API is the protocol ("" = APIOpenAI).
	API API
	// BaseURL is where the API lives: https://api.openai.com/v1 (openai),
	// https://NAME.openai.azure.com (azure), https://api.anthropic.com/v1
	// (anthropic), https://generativelanguage.googleapis.com/v1beta/openai
	// (gemini).
	BaseURL string
	// APIVersion is Azure's api-version (required for azure) or Anthropic's
	// anthropic-version header ("" = DefaultAnthropicVersion).
	APIVersion string
	// Deployments maps a model to its Azure deployment; a model not listed is
	// its own deployment.
	Deployments map[string]string
	ProfileID   string // "provider:name"; never a secret
	APIKey      string // the secret; empty for providers without credentials
	IdleTimeout time.Duration
	// MaxResponseBytes caps a response body, streams included (T1); 0 =
	// DefaultMaxResponseBytes. One stream line may hold twice MaxAnswerBytes
	// plus 64 KiB, and never more than this.
	MaxResponseBytes int
	// MaxAnswerBytes caps the answer text (T1); 0 = DefaultMaxAnswerBytes.
	MaxAnswerBytes int
	// HTTPClient is optional. Its Transport is wrapped (never replaced) to bound
	// and capture responses; its Timeout is ignored, since a whole-body timeout
	// kills long streams (deadlines come from ctx and the idle watchdog), and its
	// CheckRedirect is replaced: redirects are never followed (T2).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock used to turn stated waits (Retry-After, reset headers and
	// texts) into recovery times; nil = time.Now. Pass the engine's clock so both
	// agree on what "in 30 s" means.
	Now func() time.Time
}

// Message is one chat message. Each protocol turns it into its own shape in one
// function (openaiMessage, anthropicContent), so content of other kinds (image
// parts) is added there, once per protocol.
type Message struct {
	Role    string // system, user, assistant
	Content string
	// Images go with the text to a model that takes them (I1); only the
	// caller decides which model that is (I5).
	Images []Image
}

// Image is one image of a message: its bytes as the person sent them.
type Image struct {
	MIME string // image/png, image/jpeg, image/gif or image/webp
	Data []byte
}

// dataURL is img as a data: URL, the form every OpenAI-compatible API takes
// inline images in.
func (img Image) dataURL() string {
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(img.MIME) + base64.StdEncoding.EncodedLen(len(img.Data)))
	b.WriteString("data:" + img.MIME + ";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = enc.Write(img.Data)
	_ = enc.Close()
	return b.String()
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
	api  *openai.Client // nil for APIAnthropic
	log  *slog.Logger
	key  string // the API key, for redaction only
	now  func() time.Time
	// classify is classify.Classify; tests swap it to see the Response fed to it.
	classify func(classify.Response, time.Time) classify.Verdict
}

// New builds a client.
func New(cfg Config) (*Client, error) {
	if cfg.Provider == "" {
		return nil, errors.New("llm: provider is required")
	}
	if cfg.API == "" {
		cfg.API = APIOpenAI
	}
	if !cfg.API.Valid() {
		return nil, fmt.Errorf("llm: provider %s: unknown api %q", cfg.Provider, cfg.API)
	}
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("llm: provider %s: base url is required", cfg.Provider)
	}
	for model, d := range cfg.Deployments { // "" = the model is its own (checked per call)
		if d == "" {
			continue
		}
		if err := ValidDeployment(d); err != nil {
			return nil, fmt.Errorf("llm: provider %s: model %q: %w", cfg.Provider, model, err)
		}
	}
	switch {
	case cfg.API == APIAzure && cfg.APIVersion == "":
		return nil, fmt.Errorf("llm: provider %s: azure needs an api version", cfg.Provider)
	case cfg.API == APIAnthropic && cfg.APIVersion == "":
		cfg.APIVersion = DefaultAnthropicVersion
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxResponseBytes < 0 || cfg.MaxAnswerBytes < 0 {
		return nil, fmt.Errorf("llm: provider %s: negative response or answer cap", cfg.Provider)
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxAnswerBytes == 0 {
		cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	hc.Timeout = 0
	hc.CheckRedirect = refuseRedirect
	base := hc.Transport
	if base == nil {
		base = defaultTransport()
	}
	maxBody := int64(cfg.MaxResponseBytes)
	hc.Transport = &captureTransport{base: &boundTransport{
		base: base, max: maxBody, maxLine: streamLineCap(maxBody, cfg.MaxAnswerBytes),
	}}

	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg:  cfg,
		http: &hc,
		log:  log.With("provider", cfg.Provider, "profile", cfg.ProfileID),
		now:  cfg.Now,

		classify: classify.Classify,
	}
	if cfg.API != APIAnthropic {
		c.api = openai.NewClientWithConfig(openaiConfig(cfg, &hc))
	}
	if len(cfg.APIKey) >= 4 {
		c.key = cfg.APIKey // redacted wherever a provider echoes it
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// deployment is the Azure deployment of model: the configured one, else the
// model itself.
func deployment(cfg Config, model string) string {
	if d, ok := cfg.Deployments[model]; ok && d != "" {
		return d
	}
	return model
}

// refuseModel is the failure of a call that is never sent because model
// cannot name what the request needs: an Azure deployment that breaks
// ValidDeployment (issue 37). No request goes out, so no key goes to a path the
// name would have altered. It is model_not_found: no deployment can have
// that name, and the run moves on, or tells the person who chose it (S4).
func (c *Client) refuseModel(model string) error {
	if c.cfg.API != APIAzure {
		return nil
	}
	err := ValidDeployment(deployment(c.cfg, model))
	if err == nil {
		return nil
	}
	c.log.Info("llm call refused", "model", model, "reason", string(classify.ReasonModelNotFound), "detail", err.Error())
	return &failover.Failure{Reason: classify.ReasonModelNotFound, Class: classify.ClassDeterministic,
		Message: err.Error() + " (never sent)", Provider: c.cfg.Provider, Model: model, Profile: c.cfg.ProfileID}
}

// openaiConfig is go-openai's configuration for the protocols it speaks.
func openaiConfig(cfg Config, hc *http.Client) openai.ClientConfig {
	base := strings.TrimRight(cfg.BaseURL, "/")
	var oc openai.ClientConfig
	if cfg.API == APIAzure {
		// go-openai's own Azure mode: {base}/openai/deployments/{deployment}/...
		// ?api-version=..., the key in the api-key header.
		oc = openai.DefaultAzureConfig(cfg.APIKey, base)
		oc.APIVersion = cfg.APIVersion
		// Chat and Check refuse a model whose deployment breaks
		// ValidDeployment before any request; the name is escaped as one
		// path segment all the same, so no name can change the path or the
		// query (issue 37).
		oc.AzureModelMapperFunc = func(model string) string {
			return url.PathEscape(deployment(cfg, model))
		}
	} else {
		oc = openai.DefaultConfig(cfg.APIKey)
		oc.BaseURL = base
	}
	oc.HTTPClient = hc
	// go-openai gives up on a stream after 300 lines in a row that are not
	// data lines (SSE comments, blank lines), with
	// ErrTooManyEmptyStreamMessages, which classify reads as unclassified. A
	// provider that sends keep-alive comments every 100 ms reaches that in 15
	// s, long before a 60 s idle timeout, and the attempt would fail as an
	// unknown error rather than as the idle stream it is (E4). The watchdog
	// decides when a stream is idle, and the body cap (T1) bounds how many
	// such lines can come.
	oc.EmptyMessagesLimit = math.MaxUint
	return oc
}

func defaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableCompression:     true, // T1: no inflated size to bound
	}
}

// API returns the protocol the client speaks.
func (c *Client) API() API { return c.cfg.API }

// Provider returns the provider id.
func (c *Client) Provider() string { return c.cfg.Provider }

// ProfileID returns the auth profile id.
func (c *Client) ProfileID() string { return c.cfg.ProfileID }

// CloseIdleConnections closes kept-alive connections (shutdown, tests).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// errTruncated: the stream ended without [DONE] and without a finish_reason.
var errTruncated = errors.New("llm: stream closed before a finish_reason was received")

func (c *Client) messages(req Request) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = openaiMessage(m)
	}
	return out
}

// openaiMessage is m in go-openai's shape; a message with images is
// multi-part content: its text, then one image_url part per image, as a data
// URL (https://platform.openai.com/docs/guides/images-vision, "Passing a
// Base64 encoded image"; Azure and Gemini's OpenAI-compatible endpoint take
// the same).
func openaiMessage(m Message) openai.ChatCompletionMessage {
	if len(m.Images) == 0 {
		return openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	parts := make([]openai.ChatMessagePart, 0, 1+len(m.Images))
	if m.Content != "" {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: m.Content})
	}
	for _, img := range m.Images {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
			ImageURL: &openai.ChatMessageImageURL{URL: img.dataURL(), Detail: openai.ImageURLDetailAuto}})
	}
	return openai.ChatCompletionMessage{Role: m.Role, MultiContent: parts}
}

// buildRequest fits max tokens and temperature to go-openai's model checks
// (reasoning models want max_completion_tokens and no temperature).
func buildRequest(model string, msgs []openai.ChatCompletionMessage, maxTokens int, temp *float32) openai.ChatCompletionRequest {
	// max_tokens is what OpenAI-compatible servers (vLLM, Ollama, OpenRouter,
	// Anthropic's endpoint) read; go-openai deprecates it for OpenAI's reasoning
	// models only, which get max_completion_tokens below.
	//lint:ignore SA1019 see above
	r := openai.ChatCompletionRequest{Model: model, Messages: msgs, MaxTokens: maxTokens}
	if temp != nil {
		r.Temperature = *temp
	}
	v := openai.NewReasoningValidator()
	if err := v.Validate(r); errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated) {
		//lint:ignore SA1019 moving the value off the deprecated field
		r.MaxCompletionTokens, r.MaxTokens = r.MaxTokens, 0
	}
	if err := v.Validate(r); errors.Is(err, openai.ErrReasoningModelLimitationsOther) || errors.Is(err, openai.ErrReasoningSamplingUnsupported) {
		r.Temperature = 0
	}
	return r
}

// Chat streams one chat completion, calling onDelta (may be nil) with each text
// delta as it arrives. On failure it returns a *failover.Failure.
func (c *Client) Chat(ctx context.Context, req Request, onDelta func(string)) (failover.Output, error) {
	if c.cfg.API == APIAnthropic {
		return c.chatAnthropic(ctx, req, onDelta)
	}
	if err := c.refuseModel(req.Model); err != nil {
		return failover.Output{}, err
	}
	k := c.begin(ctx, req.Model)
	defer k.done()
	k.onDelta = onDelta

	oreq := buildRequest(req.Model, c.messages(req), req.MaxTokens, req.Temperature)
	oreq.Stream = true
	oreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}

	stream, err := c.api.CreateChatCompletionStream(k.ctx, oreq)
	if err != nil {
		return failover.Output{}, k.fail(err, false)
	}
	defer stream.Close()
	k.kick()
	for {
		ck, rerr := recv(stream)
		if rerr != nil {
			if errors.Is(rerr, io.EOF) && k.ctx.Err() == nil {
				return k.finish()
			}
			return k.broke(rerr)
		}
		active, ok := k.readChunk(&ck)
		if !ok {
			return k.broke(answerTooLarge(c.cfg.MaxAnswerBytes))
		}
		if active {
			k.kick()
		}
	}
}

// reasoningKey is how the "reasoning" field starts in a chunk's JSON.
var reasoningKey = []byte(`"reasoning"`)

// recv is go-openai's Recv (RecvRaw, then json.Unmarshal into its chunk
// type) that also reads reasoning text spelled "reasoning", which go-openai's
// delta lacks: DeepSeek and vLLM stream reasoning in delta.reasoning_content,
// OpenRouter and Ollama's compatible endpoint in delta.reasoning. That text
// is put in ReasoningContent, so that every spelling keeps a reasoning model
// from looking idle (E5) and none reaches the answer. Only a chunk that
// holds the key is decoded twice.
func recv(stream *openai.ChatCompletionStream) (openai.ChatCompletionStreamResponse, error) {
	var ck openai.ChatCompletionStreamResponse
	raw, err := stream.RecvRaw()
	if err != nil {
		return ck, err
	}
	if err := json.Unmarshal(raw, &ck); err != nil {
		return ck, err
	}
	if !bytes.Contains(raw, reasoningKey) {
		return ck, nil
	}
	var alt struct {
		Choices []struct {
			Delta struct {
				Reasoning string `json:"reasoning"`
			} `json:"delta"`
		} `json:"choices"`
	}
	// A "reasoning" that is not a string is no text to read: ignored.
	if json.Unmarshal(raw, &alt) == nil && len(alt.Choices) == len(ck.Choices) {
		for i, ch := range alt.Choices {
			if ck.Choices[i].Delta.ReasoningContent == "" {
				ck.Choices[i].Delta.ReasoningContent = ch.Delta.Reasoning
			}
		}
	}
	return ck, nil
}

// readChunk reads one stream chunk into the answer. active reports real
// activity, the only thing that kicks the watchdog (E4): visible answer
// text, reasoning text (E5), a refusal, a tool call, a stop reason. A chunk
// with no text, or only whitespace, is a keep-alive. Reasoning text itself
// is dropped: it is never an answer (E5). ok is false when the text would
// pass limits.max_answer_bytes (T1).
func (k *call) readChunk(ck *openai.ChatCompletionStreamResponse) (active, ok bool) {
	if ck.Usage != nil {
		// A provider's negative count is none: never summed as it is.
		k.out.InputTokens = max(ck.Usage.PromptTokens, 0)
		k.out.OutputTokens = max(ck.Usage.CompletionTokens, 0)
	}
	for _, ch := range ck.Choices {
		if !k.add(ch.Delta.Content) {
			return active, false
		}
		if visible(ch.Delta.Content) || visible(ch.Delta.ReasoningContent) || visible(ch.Delta.Refusal) {
			active = true
		}
		if len(ch.Delta.ToolCalls) > 0 || ch.Delta.FunctionCall != nil {
			k.tools, active = true, true
		}
		if f := string(ch.FinishReason); f != "" && f != string(openai.FinishReasonNull) {
			k.stop, active = f, true
		}
	}
	return active, true
}

// add adds d to the answer and shows it, or reports false when it would pass
// limits.max_answer_bytes: nothing past the cap is kept, shown or returned (T1).
// Whitespace before the first visible text is held back and shown with that
// text: a stream of whitespace is no answer (E4, R13), so nothing of it
// reaches people unless an answer follows. Once the answer is visible,
// every piece is shown as it comes, so the pieces shown are the answer.
func (k *call) add(d string) bool {
	if d == "" {
		return true
	}
	if k.text.Len()+len(d) > k.c.cfg.MaxAnswerBytes {
		return false
	}
	k.text.WriteString(d)
	switch {
	case k.visible:
		if k.onDelta != nil {
			k.onDelta(d)
		}
	case visible(d):
		k.visible = true
		if k.onDelta != nil {
			k.onDelta(k.text.String()) // the held whitespace and d
		}
	}
	return true
}

// broke ends a stream that failed with err. Its partial text is never
// delivered, so it is not completed progress (R8): a stall after one chunk
// counts toward the breaker like any other stall.
func (k *call) broke(err error) (failover.Output, error) {
	k.out.Text = k.text.String()
	return k.out, k.fail(err, true)
}

// finish ends a stream that ran to its end: a stream without a stop reason is
// truncated; the stop reason goes through classify.Finish, once for every
// protocol; an empty answer is an error. k.stop is the provider's stop reason
// as sent (Anthropic's through anthropicStop).
func (k *call) finish() (failover.Output, error) {
	k.idle.Stop()
	out, finish := k.out, k.stop
	out.Text = k.text.String()
	if finish == "" {
		// covers C6: EOF without [DONE]/finish_reason is a truncated stream.
		return out, k.failStream(errTruncated)
	}
	fr, bad := classify.Finish(finish)
	out.FinishReason = fr
	toolDone := k.tools && (fr == "tool_calls" || fr == "function_call")
	// R8, E4: visible text or a completed tool call, not tokens, not
	// whitespace, not reasoning (which never reaches Text, E5).
	out.Progress = k.visible || toolDone

	switch {
	case bad != "":
		// covers R14: a filtered, error or unknown stop is an error before any
		// decision; the failure says which.
		return out, k.failStream(&stopError{stop: fr, reason: bad})
	case !k.visible && !toolDone:
		// covers R13, E4, E5: an answer with no visible text (empty, only
		// whitespace, only reasoning) is an error the engine may retry once.
		return out, k.failResponse(classify.Response{Status: k.h.statusCode(), Headers: k.h.headers(), Err: classify.ErrEmptyOutput})
	}
	k.c.log.Debug("llm call ok", "model", k.model, "finish", finish,
		"in", out.InputTokens, "out", out.OutputTokens, "dur", k.c.now().Sub(k.start))
	return out, nil
}

// ProbePrompt is the whole prompt of Check and Probe: one user word.
const ProbePrompt = "ping"

// Probe makes the smallest possible request (max_tokens 1, non-streaming) to see
// whether the model answers with this profile (V5). Nil means it answered.
func (c *Client) Probe(ctx context.Context, model string) error {
	_, err := c.Check(ctx, model)
	return err
}

// Check is Probe that also returns the tokens the provider reported for it,
// so a check of a provider that is down is counted like any call (E1, U1).
func (c *Client) Check(ctx context.Context, model string) (failover.Output, error) {
	if c.cfg.API == APIAnthropic {
		return c.probeAnthropic(ctx, model)
	}
	if err := c.refuseModel(model); err != nil {
		return failover.Output{}, err
	}
	k := c.begin(ctx, model)
	defer k.done()
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: ProbePrompt}}
	resp, err := c.api.CreateChatCompletion(k.ctx, buildRequest(model, msgs, 1, nil))
	if err != nil {
		return failover.Output{}, k.fail(err, false)
	}
	n := 0
	for _, ch := range resp.Choices {
		n += len(ch.Message.Content) + len(ch.Message.ReasoningContent)
	}
	return k.probed(n, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
}

// probed ends a probe whose answer held n bytes of text (T1), with the
// tokens the provider reported.
func (k *call) probed(n, in, out int) (failover.Output, error) {
	if n > k.c.cfg.MaxAnswerBytes {
		return failover.Output{}, k.fail(answerTooLarge(k.c.cfg.MaxAnswerBytes), false)
	}
	k.c.log.Debug("llm probe ok", "model", k.model, "dur", k.c.now().Sub(k.start))
	return failover.Output{InputTokens: max(in, 0), OutputTokens: max(out, 0)}, nil
}
