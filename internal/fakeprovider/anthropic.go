package fakeprovider

// Anthropic's Messages API (https://docs.anthropic.com/en/api/messages):
// POST /v1/messages with the key in x-api-key and a required anthropic-version
// header (https://docs.anthropic.com/en/api/versioning); model, max_tokens and
// messages are required, roles are user and assistant only (a system prompt is
// the top-level system field), text blocks may not be empty.
//
// A stream (https://docs.anthropic.com/en/api/messages-streaming) is named
// events: message_start, then per block content_block_start,
// content_block_delta..., content_block_stop, then message_delta (stop_reason,
// usage) and message_stop, with ping events between, and an error event when it
// fails after its 200 ({"type":"error","error":{"type":"overloaded_error",...}}).
//
// Errors (https://docs.anthropic.com/en/api/errors) are
// {"type":"error","error":{"type":..., "message":...},"request_id":...} with a
// request-id header: 400 invalid_request_error, 401 authentication_error, 402
// billing_error, 403 permission_error, 404 not_found_error, 429
// rate_limit_error (with retry-after and anthropic-ratelimit-* headers, the
// resets as RFC 3339 times, https://docs.anthropic.com/en/api/rate-limits), 500
// api_error, 529 overloaded_error.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// anthropicRequest is what the fake reads of a Messages API body.
type anthropicRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []chatMessage   `json:"messages"`
	Stream    bool            `json:"stream"`
}

func writeAnthropicError(w http.ResponseWriter, status int, headers map[string]string, typ, msg string) int {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	id := "req_fake" + strconv.FormatInt(chatSeq.Add(1), 10)
	w.Header().Set("request-id", id)
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Type      string `json:"type"`
		Error     detail `json:"error"`
		RequestID string `json:"request_id"`
	}{"error", detail{typ, msg}, id})
	return writeRaw(w, status, "application/json", string(b))
}

// refuseAnthropic: the key comes in x-api-key, and anthropic-version is
// required on every request.
func refuseAnthropic(w http.ResponseWriter, r *http.Request) (Mode, int) {
	if r.Header.Get("x-api-key") == "" {
		return ModeUnauthorized401, writeAnthropicError(w, http.StatusUnauthorized, nil, "authentication_error", "x-api-key header is required")
	}
	if r.Header.Get("anthropic-version") == "" {
		return ModeFormat400, writeAnthropicError(w, http.StatusBadRequest, nil, "invalid_request_error", "anthropic-version: header is required")
	}
	return "", 0
}

// decodeAnthropic reads and checks a Messages API body as the API does, and
// turns it into the common form (the system prompt as a first system message).
func decodeAnthropic(w http.ResponseWriter, r *http.Request) (*chatRequest, int) {
	bad := func(msg string) (*chatRequest, int) {
		return nil, writeAnthropicError(w, http.StatusBadRequest, nil, "invalid_request_error", msg)
	}
	var in anthropicRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&in); err != nil {
		return bad("There was an issue with the format or content of your request: the body is not valid JSON.")
	}
	switch {
	case in.Model == "":
		return bad("model: Field required")
	case in.MaxTokens == nil:
		return bad("max_tokens: Field required")
	case *in.MaxTokens < 1:
		return bad("max_tokens: Input should be greater than or equal to 1")
	case len(in.Messages) == 0:
		return bad("messages: Field required")
	}
	req := &chatRequest{Model: in.Model, Stream: in.Stream}
	req.StreamOptions = &struct {
		IncludeUsage bool `json:"include_usage"`
	}{true} // message_start and message_delta always carry usage
	if len(in.System) > 0 && string(in.System) != "null" {
		sys := chatMessage{Role: "system", Content: in.System}
		if sys.text() == "" {
			return bad("system: text content blocks must be non-empty")
		}
		req.Messages = append(req.Messages, sys)
	}
	for i, m := range in.Messages {
		switch m.Role {
		case "user", "assistant":
		case "system":
			return bad(fmt.Sprintf(`messages.%d.role: Unexpected role "system". The Messages API accepts a top-level `+"`system`"+` parameter, not "system" as an input message role.`, i))
		default:
			return bad(fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		if !m.hasContent() {
			return bad(fmt.Sprintf("messages.%d.content: text content blocks must be non-empty", i))
		}
		req.Messages = append(req.Messages, m)
	}
	return req, 0
}

// protoError is a protocol's fixed answer to an error mode: the status, the
// protocol's error type or code, and the message.
type protoError struct {
	status    int
	code, msg string
}

// anthropicErrors are Anthropic's fixed answers.
var anthropicErrors = map[Mode]protoError{
	ModeInsufficientQuota: {http.StatusBadRequest, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},
	ModeBilling402:        {http.StatusPaymentRequired, "billing_error", "This organization has no credits left. Add credits in Plans & Billing to keep using the API."},
	ModeUnauthorized401:   {http.StatusUnauthorized, "authentication_error", "invalid x-api-key"},
	ModeRevoked403:        {http.StatusForbidden, "permission_error", "This API key has been disabled."},
	ModeFormat400:         {http.StatusBadRequest, "invalid_request_error", "messages.0.role: Input should be 'user' or 'assistant'"},
	ModeServer500:         {http.StatusInternalServerError, "api_error", "Internal server error"},
	ModeOverloaded529:     {529, "overloaded_error", "Overloaded"},
}

// anthropicFailure answers the error modes as Anthropic does.
func (a *answer) anthropicFailure(mode Mode) (status int, ok bool) {
	w := a.w
	switch mode {
	case ModeRateLimit:
		wait := a.rateWait()
		reset := a.s.now().Add(wait).UTC().Format(time.RFC3339)
		h := map[string]string{
			"retry-after":                            strconv.Itoa(retrySeconds(wait)),
			"anthropic-ratelimit-requests-limit":     "50",
			"anthropic-ratelimit-requests-remaining": "0",
			"anthropic-ratelimit-requests-reset":     reset,
			"anthropic-ratelimit-tokens-limit":       "40000",
			"anthropic-ratelimit-tokens-remaining":   "40000",
			"anthropic-ratelimit-tokens-reset":       a.s.now().UTC().Format(time.RFC3339),
		}
		return writeAnthropicError(w, http.StatusTooManyRequests, h, "rate_limit_error",
			"This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.anthropic.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."), true
	case ModeModelNotFound404:
		return writeAnthropicError(w, http.StatusNotFound, nil, "not_found_error", "model: "+a.req.Model), true
	case ModeContextOverflow400:
		return writeAnthropicError(w, http.StatusBadRequest, nil, "invalid_request_error",
			fmt.Sprintf("prompt is too long: %d tokens > 200000 maximum", 200000+a.req.promptChars())), true
	case ModeQuotaResetText:
		return writeAnthropicError(w, http.StatusTooManyRequests, nil, "rate_limit_error", a.quotaText()), true
	}
	if e, ok := anthropicErrors[mode]; ok {
		return writeAnthropicError(w, e.status, nil, e.code, e.msg), true
	}
	return a.openaiFailure(mode) // the proxy-level ones: 502 HTML, 503 text
}

// anthropicEvent writes one named event.
func (a *answer) anthropicEvent(typ string, v any) bool {
	b, _ := json.Marshal(v)
	return a.send(anthropicFrame(typ, b))
}

func anthropicFrame(typ string, data []byte) []byte {
	buf := make([]byte, 0, len(typ)+len(data)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, typ...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// anthropicStart sends the headers, message_start, the text block's start and
// a ping, as the API opens every stream.
func (a *answer) anthropicStart() {
	a.anthropicHead()
	a.anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]string{"type": "text", "text": ""}})
	a.anthropicEvent("ping", map[string]string{"type": "ping"})
	a.flush()
}

// anthropicHead sends the headers and message_start, which open every stream.
func (a *answer) anthropicHead() {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_"+a.id)
	h.Set("anthropic-ratelimit-requests-remaining", "49")
	a.w.WriteHeader(http.StatusOK)
	a.anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": a.anthropicUsage(1),
	}})
}

// fakeSignature stands for the signature Anthropic ends a thinking block with
// (opaque to clients, which send it back unchanged).
const fakeSignature = "ZmFrZXByb3ZpZGVyIHNpZ25hdHVyZQ=="

// anthropicThinking answers reasoning_only in a stream: one thinking block,
// its text in thinking_delta events, its signature, then end_turn with no
// text block at all, as a model that thought and said nothing.
func (a *answer) anthropicThinking() int {
	ws := words(a.reasoningText())
	a.anthropicHead()
	a.anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]string{"type": "thinking", "thinking": ""}})
	a.anthropicEvent("ping", map[string]string{"type": "ping"})
	for _, w := range ws {
		if !a.anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "thinking_delta", "thinking": w}}) {
			return http.StatusOK
		}
	}
	a.anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]string{"type": "signature_delta", "signature": fakeSignature}})
	a.anthropicEnd("end_turn", len(ws))
	return http.StatusOK
}

func (a *answer) anthropicDelta(text string) bool {
	return a.anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]string{"type": "text_delta", "text": text}})
}

// anthropicEnd closes the text block and the message.
func (a *answer) anthropicEnd(stop string, outTokens int) {
	a.anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	a.anthropicEvent("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": a.anthropicOut(outTokens)}})
	a.anthropicEvent("message_stop", map[string]string{"type": "message_stop"})
	a.flush()
}

// anthropicOverloaded is the error event of a stream that fails after its 200.
var anthropicOverloaded = []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)

func (a *answer) anthropicStream(mode Mode) int {
	switch mode {
	case ModeKeepAliveOnly:
		// Anthropic keeps a quiet stream open with pings.
		a.anthropicHead()
		a.keepAlive(func(int) bool { return a.anthropicEvent("ping", map[string]string{"type": "ping"}) })
		return http.StatusOK
	case ModeReasoningOnly:
		return a.anthropicThinking()
	}
	text, stop := a.said(mode, "end_turn")
	ws := words(text)
	a.anthropicStart()
	switch mode {
	case ModeStallAfterFirstChunk:
		a.anthropicDelta(first(ws))
		a.flush()
		a.s.block(a.r.Context())
		return http.StatusOK
	case ModeMidstreamError:
		a.anthropicDelta(first(ws))
		a.send(anthropicFrame("error", anthropicOverloaded))
		a.flush()
		return http.StatusOK
	}
	gap := time.Duration(0)
	if mode == ModeSlowStream {
		gap = a.slowGap()
	}
	for i, w := range ws {
		if gap > 0 && !a.s.wait(a.r.Context(), gap) {
			return http.StatusOK
		}
		if !a.anthropicDelta(w) {
			return http.StatusOK
		}
		if gap > 0 {
			a.flush()
			if i%4 == 3 {
				a.anthropicEvent("ping", map[string]string{"type": "ping"})
			}
		}
	}
	a.anthropicEnd(stop, len(ws))
	return http.StatusOK
}

// anthropicMessage answers a request without stream: one message object.
func (a *answer) anthropicMessage(mode Mode) int {
	text, stop := a.said(mode, "end_turn")
	if status, ended := a.whole(mode, func() int {
		return writeAnthropicError(a.w, http.StatusInternalServerError, nil, "api_error", "Internal server error")
	}); ended {
		return status
	}
	content := []any{map[string]string{"type": "text", "text": text}}
	n := len(words(text))
	if mode == ModeReasoningOnly {
		reasoning := a.reasoningText()
		content = []any{map[string]string{"type": "thinking", "thinking": reasoning, "signature": fakeSignature}}
		n = len(words(reasoning))
	}
	writeJSON(a.w, http.StatusOK, map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.req.Model,
		"content":     content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": a.anthropicUsage(n),
	})
	return http.StatusOK
}

// The hostile modes in the Messages API's shapes (T1). As for OpenAI, every
// byte is made as it is sent.

var (
	anthropicBombOnce                  sync.Once
	anthropicBombDeltas                []byte // gzip member: ~1 MiB of text_delta events
	anthropicBombInflated              int64
	anthropicBombEnd, anthropicMsgTail []byte
)

func makeAnthropicBombs() {
	ev := anthropicFrame("content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bomb "}}`))
	lines := bytes.Repeat(ev, bombUnit/len(ev))
	anthropicBombDeltas, anthropicBombInflated = gz(lines), int64(len(lines))
	anthropicBombEnd = gz(append(anthropicFrame("message_delta", []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`)),
		anthropicFrame("message_stop", []byte(`{"type":"message_stop"}`))...))
	anthropicMsgTail = gz([]byte(`"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`))
}

// messageHead is the start of a message object up to the opening quote of its
// first text block's text (or of the field named by rest).
func (a *answer) messageHead(rest string) []byte {
	model, _ := json.Marshal(a.req.Model)
	return fmt.Appendf(nil, `{"id":%q,"type":"message","role":"assistant","model":%s,%s`, a.id, model, rest)
}

const messageText = `"content":[{"type":"text","text":"`

// hasContent reports whether an Anthropic message holds something to send: a
// non-empty string, or blocks none of which is an empty text block.
func (m chatMessage) hasContent() bool {
	ps := m.parts()
	if len(ps) == 0 {
		return false
	}
	for _, p := range ps {
		if p.Type == "text" && p.Text == "" {
			return false
		}
	}
	return true
}

// anthropicUsage is message_start's (or a whole message's) usage, zero under
// a NoUsage rule; it records what was reported.
func (a *answer) anthropicUsage(out int) map[string]int {
	if a.rule.NoUsage {
		return map[string]int{"input_tokens": 0, "output_tokens": 0}
	}
	in := a.req.promptChars()/4 + 1
	a.report(Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out})
	return map[string]int{"input_tokens": in, "output_tokens": out}
}

// anthropicOut is message_delta's output tokens, recorded as the answer's.
func (a *answer) anthropicOut(out int) int {
	if a.rule.NoUsage || a.sent == nil {
		return 0
	}
	a.report(Usage{PromptTokens: a.sent.PromptTokens, CompletionTokens: out, TotalTokens: a.sent.PromptTokens + out})
	return out
}
