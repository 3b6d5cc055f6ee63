package fakeprovider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	Model         string        `json:"model"`
	Stream        bool          `json:"stream"`
	Messages      []chatMessage `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`

	images [][]seenImage // per message, read by readImages
}

// text returns a message's content, whether a string or an array of parts.
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func (c *chatRequest) lastUser() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			return c.Messages[i].text()
		}
	}
	return ""
}

// promptChars is the prompt's size the fake's token counts come from: the raw
// content of each message, and for a message with images its text plus
// imagePromptTokens per image (never the size of the base64).
func (c *chatRequest) promptChars() int {
	n := 0
	for i, m := range c.Messages {
		if i < len(c.images) && len(c.images[i]) > 0 {
			n += len(m.text()) + 4*imagePromptTokens*len(c.images[i])
			continue
		}
		n += len(m.Content)
	}
	return n
}

// ParseRules reads rules as one JSON object, a JSON array, or JSON lines; blank
// lines and lines starting with '#' are skipped.
func ParseRules(r io.Reader) ([]Rule, error) {
	data, err := io.ReadAll(io.LimitReader(r, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("[")) {
		var rules []Rule
		if err := json.Unmarshal(trimmed, &rules); err != nil {
			return nil, fmt.Errorf("parse rules: %w", err)
		}
		return rules, nil
	}
	var rules []Rule
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		var rule Rule
		if err := json.Unmarshal(l, &rule); err != nil {
			return nil, fmt.Errorf("parse rules: line %d: %w", line, err)
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse rules: %w", err)
	}
	return rules, nil
}

var chatSeq atomic.Int64

func bearerKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	auth := r.Header.Get("Authorization")
	if k, ok := strings.CutPrefix(auth, "Bearer "); ok {
		return strings.TrimSpace(k)
	}
	return ""
}

// handle returns the handler of api's chat route.
func (s *Server) handle(api API) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.handleChat(w, r, api) }
}

// keyOf is the credential a request carries in the header api reads it from.
func keyOf(r *http.Request, api API) string {
	switch api {
	case APIAzure:
		return r.Header.Get("api-key")
	case APIAnthropic:
		return r.Header.Get("x-api-key")
	}
	return bearerKey(r)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, api API) {
	start := s.now()
	provider := providerOf(r)
	key := keyOf(r, api)
	call := Call{Time: start, Provider: provider, API: api, KeyID: KeyID(key), Deployment: r.PathValue("deployment")}
	idx := -1
	defer func() {
		call.Duration = max(s.now().Sub(start), time.Nanosecond)
		if idx < 0 {
			s.logCall(call)
		} else {
			s.finishCall(idx, call)
		}
	}()

	// The protocol's own refusals come first, as the real API checks the
	// request before it does any work: a missing credential header, a missing
	// version, a body it cannot read.
	if mode, status := refuseHeaders(w, r, api); status != 0 {
		call.Mode, call.Status = mode, status
		return
	}
	req, status := decodeRequest(w, r, api)
	if status != 0 {
		call.Mode, call.Status = ModeFormat400, status
		return
	}
	if api == APIAzure && req.Model == "" {
		req.Model = call.Deployment // Azure routes by deployment; the body's model is optional
	}
	call.Model, call.Stream = req.Model, req.Stream
	if status := req.readImages(w, api); status != 0 {
		call.Mode, call.Status = ModeFormat400, status
		return
	}
	call.Messages = req.logged()
	if req.hasImages() && s.isTextOnly(req.Model) {
		call.Mode, call.Status = ModeFormat400, refuseTextOnly(w, api)
		return
	}

	rule, honour := s.decide(provider, req.Model, call.KeyID)
	mode := rule.Mode
	note := ""
	if m, raw, found, ok := findMarker(req.lastUser()); found {
		key := promptKey(req)
		switch {
		case !ok:
			note = unknownModeNote(raw)
		case honour:
			mode = m
			s.rememberActed(key)
		case !s.actedOn(key):
			note = s.notPrimaryNote(m, provider, req.Model)
		}
	}
	call.Mode = mode
	idx = s.logCall(call)

	if mode != ModeSlowStream && mode != ModeKeepAliveOnly && rule.Delay > 0 && !s.wait(r.Context(), rule.Delay) {
		return
	}
	a := &answer{s: s, w: w, r: r, req: req, rule: rule, provider: provider, api: api, key: key, note: note,
		logged: func(u Usage) { s.loggedUsage(idx, call.Time, u) }}
	call.Status = a.run(mode)
	call.Usage = a.sent
}

// refuseHeaders answers a request that lacks what api requires in its headers,
// and returns the status sent (0 = nothing was wrong).
func refuseHeaders(w http.ResponseWriter, r *http.Request, api API) (Mode, int) {
	switch api {
	case APIAzure:
		return refuseAzure(w, r)
	case APIAnthropic:
		return refuseAnthropic(w, r)
	case APIGemini:
		return refuseGemini(w, r)
	}
	return "", 0
}

// decodeRequest reads the body of api's chat request into the common form, or
// answers it as api answers a body it cannot use (status != 0).
func decodeRequest(w http.ResponseWriter, r *http.Request, api API) (*chatRequest, int) {
	if api == APIAnthropic {
		return decodeAnthropic(w, r)
	}
	var req chatRequest
	err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req)
	switch {
	case err != nil && api == APIGemini:
		return nil, writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+firstLine(err.Error()), nil)
	case err != nil:
		return nil, writeOpenAIError(w, http.StatusBadRequest, nil, "We could not parse the JSON body of your request.", "invalid_request_error", "", nil)
	case api == APIGemini && req.Model == "":
		return nil, writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model is not specified", nil)
	}
	return &req, 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// answer is one call being answered.
type answer struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	req      *chatRequest
	rule     Rule
	provider string
	api      API // the protocol of the route ("" = openai)
	key      string
	note     string // said after the answer: why a "#fail:" marker did nothing
	id       string
	created  int64
	sent     *Usage      // the usage the answer reported, nil = none
	logged   func(Usage) // logs it before it goes out: a client that read the answer finds it in Calls
}

// report records u as the answer's usage, in the call log too.
func (a *answer) report(u Usage) {
	a.sent = &u
	if a.logged != nil {
		a.logged(u)
	}
}

func (a *answer) replyText() string {
	text := a.rule.Reply
	if text == "" {
		text = fmt.Sprintf("[%s/%s] you said: %s", a.provider, a.req.Model, truncateRunes(a.req.lastUser(), 80))
	}
	if imgs := a.req.lastUserImages(); len(imgs) > 0 {
		text += " " + sawImages(imgs) // proof the bytes reached the model
	}
	if a.note != "" {
		text += "\n" + a.note
	}
	return text
}

// words splits text into stream chunks, one word (with its trailing space) each.
// said is what an answer in mode says and how it ends (normal: the protocol's
// usual finish reason): nothing for an empty reply (nor for reasoning_only
// and keepalive_only, whose streams carry no answer text), an unknown reason
// for ModeUnknownFinishReason.
func (a *answer) said(mode Mode, normal string) (text, finish string) {
	switch mode {
	case ModeEmptyReply, ModeReasoningOnly, ModeKeepAliveOnly:
		return "", normal
	case ModeUnknownFinishReason:
		return a.replyText(), "weird_reason"
	}
	return a.replyText(), normal
}

// whole plays, for an answer without stream, the modes that break or slow a
// stream: a stall or a stream of keep-alives hangs before any answer (there
// is no stream to keep alive), a mid-stream error is the server
// error fail writes, a slow stream is slow before it answers. ended says the
// answer is over (status sent, 0 = none).
func (a *answer) whole(mode Mode, fail func() int) (status int, ended bool) {
	switch mode {
	case ModeStallAfterFirstChunk, ModeKeepAliveOnly:
		a.s.block(a.r.Context())
		return 0, true
	case ModeMidstreamError:
		return fail(), true
	case ModeSlowStream:
		return 0, !a.s.wait(a.r.Context(), a.slowGap())
	}
	return 0, false
}

func words(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// run answers in mode and returns the HTTP status sent (0 = none).
func (a *answer) run(mode Mode) int {
	a.id = "chatcmpl-fake-" + strconv.FormatInt(chatSeq.Add(1), 10)
	a.created = a.s.now().Unix()
	if a.api == APIAnthropic {
		a.id = "msg_fake" + strconv.FormatInt(chatSeq.Load(), 10)
	}
	if status, ok := a.hostile(mode); ok {
		return status
	}
	switch mode {
	case ModeHangBeforeHeaders:
		a.s.block(a.r.Context())
		return 0
	case ModeConnectionReset:
		if a.req.Stream {
			a.streamStart()
			a.streamText(first(words(a.replyText())))
			a.flush()
		}
		a.reset()
		if a.req.Stream {
			return http.StatusOK
		}
		return 0
	}
	if status, ok := a.failure(mode); ok {
		return status
	}
	switch {
	case a.api == APIAnthropic && !a.req.Stream:
		return a.anthropicMessage(mode)
	case a.api == APIAnthropic:
		return a.anthropicStream(mode)
	case !a.req.Stream:
		return a.nonStream(mode)
	}
	return a.stream(mode)
}

// failure answers the error modes in the route's protocol; ok is false for the
// modes that answer (ok, slow_stream, empty_reply, ...).
func (a *answer) failure(mode Mode) (status int, ok bool) {
	switch a.api {
	case APIAnthropic:
		return a.anthropicFailure(mode)
	case APIGemini:
		return a.geminiFailure(mode)
	case APIAzure:
		if status, ok := a.azureFailure(mode); ok {
			return status, true
		}
	}
	return a.openaiFailure(mode)
}

// streamStart sends the stream's headers and opening in the route's protocol.
func (a *answer) streamStart() {
	if a.api == APIAnthropic {
		a.anthropicStart()
		return
	}
	a.startStream()
}

// streamText sends one piece of answer text in the route's protocol.
func (a *answer) streamText(text string) bool {
	if a.api == APIAnthropic {
		return a.anthropicDelta(text)
	}
	return a.chunk(delta{Role: "assistant", Content: text}, nil)
}

// openaiFailure answers the error modes in OpenAI's shapes.
func (a *answer) openaiFailure(mode Mode) (status int, ok bool) {
	model := a.req.Model
	switch mode {
	case ModeRateLimit:
		wait := a.rateWait()
		h := openaiWaitHeaders(wait, map[string]string{
			"x-ratelimit-limit-requests":     "3",
			"x-ratelimit-remaining-requests": "0",
			"x-ratelimit-reset-requests":     wait.String(),
		})
		msg := fmt.Sprintf("Rate limit reached for %s in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.", model, wait)
		return writeOpenAIError(a.w, http.StatusTooManyRequests, h, msg, "requests", "rate_limit_exceeded", nil), true
	case ModeInsufficientQuota:
		return writeOpenAIError(a.w, http.StatusTooManyRequests, nil, "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "", nil), true
	case ModeBilling402:
		return writeRaw(a.w, http.StatusPaymentRequired, "application/json", `{"error":{"message":"Insufficient credits. This account has no credits left; add more at https://openrouter.ai/settings/credits","code":402}}`), true
	case ModeUnauthorized401:
		msg := fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", maskKey(a.key))
		return writeOpenAIError(a.w, http.StatusUnauthorized, nil, msg, "invalid_request_error", "invalid_api_key", nil), true
	case ModeRevoked403:
		return writeOpenAIError(a.w, http.StatusForbidden, nil, "API key has been revoked. Create a new key to keep using the API.", "invalid_request_error", "api_key_revoked", nil), true
	case ModeModelNotFound404:
		msg := fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)
		return writeOpenAIError(a.w, http.StatusNotFound, nil, msg, "invalid_request_error", "model_not_found", nil), true
	case ModeContextOverflow400:
		msg := fmt.Sprintf("This model's maximum context length is 4096 tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", 4096+a.req.promptChars())
		return writeOpenAIError(a.w, http.StatusBadRequest, nil, msg, "invalid_request_error", "context_length_exceeded", strPtr("messages")), true
	case ModeFormat400:
		return writeOpenAIError(a.w, http.StatusBadRequest, nil, "Invalid value for 'messages[0].role': 'robot' is not one of ['system', 'assistant', 'user', 'tool'].", "invalid_request_error", "invalid_value", strPtr("messages[0].role")), true
	case ModeServer500:
		return writeOpenAIError(a.w, http.StatusInternalServerError, nil, "The server had an error while processing your request. Sorry about that!", "server_error", "", nil), true
	case ModeBadGateway502HTML:
		return writeBadGateway(a.w), true
	case ModeUnavailable503:
		return writeRaw(a.w, http.StatusServiceUnavailable, "text/plain", "Service Unavailable\n"), true
	case ModeOverloaded529:
		return writeRaw(a.w, 529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), true
	case ModeQuotaResetText:
		return writeOpenAIError(a.w, http.StatusTooManyRequests, nil, a.quotaText(), "insufficient_quota", "Throttling.AllocationQuota", nil), true
	}
	return 0, false
}

// slowGap is slow_stream's pause between chunks (and before a non-streamed answer).
func (a *answer) slowGap() time.Duration {
	if a.rule.Delay > 0 {
		return a.rule.Delay
	}
	return 200 * time.Millisecond
}

// openaiWaitHeaders adds to h the wait headers of OpenAI's 429, which Azure
// OpenAI sends too: Retry-After in whole seconds, rounded up, and
// retry-after-ms.
func openaiWaitHeaders(wait time.Duration, h map[string]string) map[string]string {
	h["Retry-After"] = strconv.Itoa(retrySeconds(wait))
	h["retry-after-ms"] = strconv.FormatInt(wait.Milliseconds(), 10)
	return h
}

// retrySeconds is wait in whole seconds, rounded up, as Retry-After says it.
func retrySeconds(wait time.Duration) int { return int(math.Ceil(wait.Seconds())) }

// rateWait is the wait the rate_limit mode announces.
func (a *answer) rateWait() time.Duration {
	if a.rule.RetryAfter > 0 {
		return a.rule.RetryAfter
	}
	return 20 * time.Second
}

// quotaText is quota_reset_text's message, with its year-less reset time.
func (a *answer) quotaText() string {
	reset := a.rule.ResetText
	if reset == "" {
		d := a.rule.RetryAfter
		if d <= 0 {
			d = 2 * time.Hour
		}
		reset = a.s.now().Add(d).UTC().Format("01-02 15:04:05") + " UTC"
	}
	return "Your token-plan 1-week quota has been exhausted. The quota will reset at " + reset + "."
}

// writeBadGateway is a proxy's HTML page, the same in front of every API.
func writeBadGateway(w http.ResponseWriter) int {
	return writeRaw(w, http.StatusBadGateway, "text/html", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n")
}

// truncateRunes is s cut to n runes, with "…" when it was cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func first(ws []string) string {
	if len(ws) == 0 {
		return ""
	}
	return ws[0]
}

func strPtr(s string) *string { return &s }

func maskKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

func writeRaw(w http.ResponseWriter, status int, contentType, body string) int {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	return status
}

func writeOpenAIError(w http.ResponseWriter, status int, headers map[string]string, msg, typ, code string, param *string) int {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	var codeVal any
	if code != "" {
		codeVal = code
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": param, "code": codeVal,
	}})
	return writeRaw(w, status, "application/json", string(body))
}

// reset aborts the TCP connection with a RST (SO_LINGER 0).
func (a *answer) reset() {
	conn, _, err := http.NewResponseController(a.w).Hijack()
	if err != nil {
		// HTTP/2 or a recorder: the best we can do is end the handler early.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

type delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

// reasoningDelta is a delta of reasoning alone, as DeepSeek and the servers
// that copy it (vLLM, Ollama's compatible endpoint, ...) stream it: content
// null, the text in reasoning_content.
type reasoningDelta struct {
	Content   *string `json:"content"`
	Reasoning string  `json:"reasoning_content"`
}

// reasoningText is what reasoning_only reasons: Rule.Reply, or a line about
// the prompt.
func (a *answer) reasoningText() string {
	if a.rule.Reply != "" {
		return a.rule.Reply
	}
	return fmt.Sprintf("[%s/%s] thinking about what to say to: %s", a.provider, a.req.Model, truncateRunes(a.req.lastUser(), 80))
}

// keepAliveGap is keepalive_only's pause between keep-alives.
func (a *answer) keepAliveGap() time.Duration {
	if a.rule.Delay > 0 {
		return a.rule.Delay
	}
	return 100 * time.Millisecond
}

// keepAlive sends keep-alive i = 0, 1, 2, ... with send, one every
// keepAliveGap, until the client leaves or the server closes.
func (a *answer) keepAlive(send func(i int) bool) {
	for i := 0; ; i++ {
		if !send(i) {
			return
		}
		a.flush()
		if !a.s.wait(a.r.Context(), a.keepAliveGap()) {
			return
		}
	}
}

// Usage is the token usage an answer reported, in OpenAI's field names.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usage is the usage of an answer of completion tokens, and records that it
// was reported.
func (a *answer) usage(completion int) Usage {
	p := a.req.promptChars()/4 + 1
	u := Usage{PromptTokens: p, CompletionTokens: completion, TotalTokens: p + completion}
	a.report(u)
	return u
}

func (a *answer) nonStream(mode Mode) int {
	text, finish := a.said(mode, "stop")
	if status, ended := a.whole(mode, func() int {
		return writeOpenAIError(a.w, http.StatusInternalServerError, nil, "The server had an error while processing your request. Sorry about that!", "server_error", "", nil)
	}); ended {
		return status
	}
	n := len(words(text))
	msg := map[string]any{"role": "assistant", "content": text}
	if mode == ModeReasoningOnly {
		reasoning := a.reasoningText()
		n = len(words(reasoning)) // reasoning tokens are billed as completion tokens
		msg["reasoning_content"] = reasoning
	}
	out := map[string]any{
		"id": a.id, "object": "chat.completion", "created": a.created, "model": a.req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"finish_reason": finish,
		}},
	}
	if !a.rule.NoUsage {
		out["usage"] = a.usage(n)
	}
	writeJSON(a.w, http.StatusOK, out)
	return http.StatusOK
}

func (a *answer) startStream() {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("x-ratelimit-remaining-requests", "99")
	a.w.WriteHeader(http.StatusOK)
	a.flush()
}

func (a *answer) flush() { _ = http.NewResponseController(a.w).Flush() }

func (a *answer) chunk(d delta, finish *string) bool { return sendChunk(a, d, finish) }

// choiceChunk is a chunk of one choice whose delta is of type D; generic
// rather than an any field, so that the usual chunk's delta is not boxed and
// a stream costs what it did before other delta shapes came (the client
// benchmarks count the fake's allocations too).
type choiceChunk[D any] struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []choice[D] `json:"choices"`
}

type choice[D any] struct {
	Index        int     `json:"index"`
	Delta        D       `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// sendChunk sends a chunk of one choice whose delta is d, whatever its shape
// (delta, reasoningDelta, an empty struct for "delta":{}).
func sendChunk[D any](a *answer, d D, finish *string) bool {
	b, _ := json.Marshal(choiceChunk[D]{a.id, "chat.completion.chunk", a.created, a.req.Model, []choice[D]{{Delta: d, FinishReason: finish}}})
	return a.event(b)
}

func (a *answer) event(data []byte) bool {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, err := a.w.Write(buf)
	return err == nil
}

func (a *answer) stream(mode Mode) int {
	text, finish := a.said(mode, "stop")
	ws := words(text)
	a.startStream()
	ctx := a.r.Context()

	switch mode {
	case ModeStallAfterFirstChunk:
		a.chunk(delta{Role: "assistant", Content: first(ws)}, nil)
		a.flush()
		a.s.block(ctx)
		return http.StatusOK
	case ModeKeepAliveOnly:
		a.keepAlive(func(i int) bool {
			switch i % 3 {
			case 0:
				return a.send([]byte(": keep-alive\n\n"))
			case 1:
				return sendChunk(a, struct{}{}, nil) // "delta":{}
			}
			return a.chunk(delta{Content: " \n"}, nil)
		})
		return http.StatusOK
	case ModeReasoningOnly:
		ws = words(a.reasoningText())
	case ModeMidstreamError:
		a.chunk(delta{Role: "assistant", Content: first(ws)}, nil)
		if a.api == APIGemini {
			a.event(geminiStreamError())
		} else {
			a.event([]byte(`{"error":{"message":"The server had an error processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if you keep seeing this error.","type":"server_error","param":null,"code":null}}`))
		}
		a.flush()
		return http.StatusOK
	}

	gap := time.Duration(0)
	if mode == ModeSlowStream {
		gap = a.slowGap()
	}
	if !a.chunk(delta{Role: "assistant"}, nil) {
		return http.StatusOK
	}
	a.flush()
	for _, w := range ws {
		if gap > 0 && !a.s.wait(ctx, gap) {
			return http.StatusOK
		}
		var sent bool
		if mode == ModeReasoningOnly {
			sent = sendChunk(a, reasoningDelta{Reasoning: w}, nil)
		} else {
			sent = a.chunk(delta{Content: w}, nil)
		}
		if !sent {
			return http.StatusOK
		}
		if gap > 0 {
			a.flush()
		}
	}
	a.chunk(delta{}, &finish)
	if a.req.StreamOptions != nil && a.req.StreamOptions.IncludeUsage && !a.rule.NoUsage {
		b, _ := json.Marshal(map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.req.Model,
			"choices": []any{}, "usage": a.usage(len(ws)),
		})
		a.event(b)
	}
	a.event([]byte("[DONE]"))
	a.flush()
	return http.StatusOK
}
