package llm

// Anthropic's Messages API, spoken natively: POST {BaseURL}/messages with the
// key in x-api-key and the anthropic-version header, answered by a stream of
// server-sent events message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta and message_stop, with ping events
// anywhere and an error event when the stream fails after its 200
// (https://docs.anthropic.com/en/api/messages-streaming).
//
// The official Go SDK is not used: it retries by default, reads credentials,
// a base URL and extra headers from the environment and from profile files in
// the home folder unless each is turned off, streams with Accept:
// application/json (so the stream-line cap would not apply), and brings about
// 140,000 lines and OpenTelemetry into the build. This client is the one request
// and the event loop detour needs, over the same http.Client (caps, refused
// redirects, capture) as every other protocol.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// anthropicRequest is the body of POST /v1/messages.
type anthropicRequest struct {
	Model       string             `json:"model"`
	MaxTokens   int                `json:"max_tokens"`
	System      []anthropicBlock   `json:"system,omitempty"`
	Messages    []anthropicMessage `json:"messages"`
	Temperature *float32           `json:"temperature,omitempty"`
	Stream      bool               `json:"stream,omitempty"`
}

// anthropicMessage is one turn; its content is always a list of blocks, so
// image blocks join text blocks without another shape.
type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

// anthropicBlock is one content block: text, or an image given inline
// ({"type":"image","source":{"type":"base64","media_type":...,"data":...}},
// https://docs.anthropic.com/en/docs/build-with-claude/vision).
type anthropicBlock struct {
	Type   string           `json:"type"`
	Text   string           `json:"text,omitempty"`
	Source *anthropicSource `json:"source,omitempty"`
}

// anthropicSource is an image block's bytes.
type anthropicSource struct {
	Type      string `json:"type"` // base64
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"` // encoding/json writes []byte as base64
}

// anthropicContent turns m into blocks; ok is false when it holds nothing to
// send (the API refuses empty text blocks). Images come before the text, as
// Anthropic advises ("image-then-text").
func anthropicContent(m Message) (blocks []anthropicBlock, ok bool) {
	for _, img := range m.Images {
		blocks = append(blocks, anthropicBlock{Type: "image", Source: &anthropicSource{Type: "base64", MediaType: img.MIME, Data: img.Data}})
	}
	if m.Content != "" {
		blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Content})
	}
	return blocks, len(blocks) > 0
}

// anthropicBody builds the request: system messages, wherever they are (R13's
// retry instruction comes last), become the top-level system field, which is
// the only place the API takes them.
func anthropicBody(req Request, stream bool) anthropicRequest {
	out := anthropicRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream}
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultAnthropicMaxTokens
	}
	for _, m := range req.Messages {
		blocks, ok := anthropicContent(m)
		if !ok {
			continue
		}
		if m.Role == "system" {
			out.System = append(out.System, blocks...)
			continue
		}
		out.Messages = append(out.Messages, anthropicMessage{Role: m.Role, Content: blocks})
	}
	return out
}

// post sends one request; the response is the caller's to close. A status of
// 400 or more is not an error here: the capture holds status, headers and body.
func (c *Client) post(ctx context.Context, body anthropicRequest) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.cfg.BaseURL, "/")+"/messages", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("anthropic-version", c.cfg.APIVersion)
	if c.cfg.APIKey != "" {
		hreq.Header.Set("x-api-key", c.cfg.APIKey)
	}
	if body.Stream {
		hreq.Header.Set("Accept", "text/event-stream") // the stream-line cap applies (T1)
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	return c.http.Do(hreq)
}

// failHTTP is the failure of a non-2xx answer: the capture holds it as the
// provider sent it.
func (k *call) failHTTP() error {
	return k.failResponse(classify.Response{Status: k.h.statusCode(), Headers: k.h.headers(), Body: k.h.bodyText()})
}

// errBadEvent: a stream event whose data is not JSON.
var errBadEvent = errors.New("llm: anthropic stream: an event that is not JSON")

// Stream events, as far as detour reads them.
type anthropicEvent struct {
	Type    string `json:"type"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"content_block"`
	Delta struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		Thinking   string `json:"thinking"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// anthropicStop maps Anthropic's stop reasons onto classify.Finish's
// list: end_turn, stop_sequence, max_tokens, tool_use and refusal are there;
// model_context_window_exceeded ends a complete but cut answer, like
// max_tokens. Anything else stays as sent and is an unknown stop (R14).
func anthropicStop(reason string) string {
	if reason == "model_context_window_exceeded" {
		return "max_tokens"
	}
	return reason
}

// sseReader reads server-sent events. Lines are bounded by the transport's
// stream-line cap (T1), so a line never grows past it here.
type sseReader struct {
	r *bufio.Reader
}

// next returns the next event's type and data (data lines joined by "\n").
func (s *sseReader) next() (typ string, data []byte, err error) {
	var buf []byte
	seen := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) == 0 && seen {
				return typ, buf, nil // the last event lacked its blank line
			}
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if seen {
				return typ, buf, nil
			}
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "": // a comment
		case "event":
			typ, seen = string(value), true
		case "data":
			if buf != nil {
				buf = append(buf, '\n')
			}
			buf = append(buf, value...)
			seen = true
		}
	}
}

// chatAnthropic streams one Messages API call (see Chat).
func (c *Client) chatAnthropic(ctx context.Context, req Request, onDelta func(string)) (failover.Output, error) {
	k := c.begin(ctx, req.Model)
	defer k.done()
	k.onDelta = onDelta

	resp, err := c.post(k.ctx, anthropicBody(req, true))
	if err != nil {
		return failover.Output{}, k.fail(err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return failover.Output{}, k.failHTTP()
	}
	k.kick()
	sse := &sseReader{r: bufio.NewReaderSize(resp.Body, 16<<10)}
	for typ := ""; typ != "message_stop"; {
		var data []byte
		typ, data, err = sse.next()
		if err != nil {
			if errors.Is(err, io.EOF) && k.ctx.Err() == nil {
				break // the stream ended; finish says whether it was complete
			}
			return k.broke(err)
		}
		// No kick for the event as such: a ping, or any event without real
		// activity in it, is a keep-alive (E4); readEvent says which are not.
		if typ == "error" {
			// covers C5, C6: an error event after the 200 (overloaded_error,
			// api_error) is classified from its own JSON.
			k.out.Text = k.text.String()
			return k.out, k.failResponse(classify.Response{Status: k.h.statusCode(), Headers: k.h.headers(), Body: string(data), Stream: true})
		}
		if len(data) == 0 {
			continue
		}
		var ev anthropicEvent
		if json.Unmarshal(data, &ev) != nil {
			// Not the decoder's words: "invalid character ... object key" would
			// read as a bad key to the classifier.
			return k.broke(fmt.Errorf("%w: event %q", errBadEvent, truncate(typ, 40)))
		}
		text, active := k.readEvent(typ, &ev)
		if !k.add(text) {
			return k.broke(answerTooLarge(c.cfg.MaxAnswerBytes))
		}
		if active {
			k.kick()
		}
	}
	k.stop = anthropicStop(k.stop)
	return k.finish()
}

// readEvent reads one stream event into the answer and returns its text,
// and whether it showed real activity, which kicks the watchdog (E4): visible
// text, thinking (E5), a tool call, a stop reason. ping, message_start,
// content_block_stop, message_stop and event types added later carry no
// answer text (the API's versioning policy adds event types); nor do
// thinking, signature and citations deltas. Thinking is the model at work,
// so it is activity, but it is never answer text (E5): an answer of
// thinking alone is empty (R13).
func (k *call) readEvent(typ string, ev *anthropicEvent) (text string, active bool) {
	switch typ {
	case "message_start":
		// A provider's negative count is none: never summed as it is.
		k.out.InputTokens, k.out.OutputTokens = max(ev.Message.Usage.InputTokens, 0), max(ev.Message.Usage.OutputTokens, 0)
	case "content_block_start":
		switch ev.ContentBlock.Type {
		case "text":
			return ev.ContentBlock.Text, visible(ev.ContentBlock.Text)
		case "thinking":
			return "", visible(ev.ContentBlock.Thinking)
		case "redacted_thinking":
			return "", true // reasoning, encrypted: the model at work all the same
		case "tool_use", "server_tool_use":
			k.tools = true
			return "", true
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			return ev.Delta.Text, visible(ev.Delta.Text)
		case "thinking_delta":
			return "", visible(ev.Delta.Thinking)
		case "input_json_delta":
			k.tools = true
			return "", true
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			k.stop, active = ev.Delta.StopReason, true
		}
		if ev.Usage.OutputTokens > 0 {
			k.out.OutputTokens = ev.Usage.OutputTokens
		}
		if ev.Usage.InputTokens > 0 {
			k.out.InputTokens = ev.Usage.InputTokens
		}
	}
	return "", active
}

// probeAnthropic is Probe in the Messages API: max_tokens 1, not streamed.
func (c *Client) probeAnthropic(ctx context.Context, model string) (failover.Output, error) {
	k := c.begin(ctx, model)
	defer k.done()
	body := anthropicBody(Request{Model: model, MaxTokens: 1, Messages: []Message{{Role: "user", Content: ProbePrompt}}}, false)
	resp, err := c.post(k.ctx, body)
	if err != nil {
		return failover.Output{}, k.fail(err, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return failover.Output{}, k.failHTTP()
	}
	// The body is bounded by limits.max_response_bytes (T1).
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return failover.Output{}, k.fail(err, false)
	}
	var msg struct {
		Type    string `json:"type"`
		Content []struct {
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content"`
		Usage anthropicUsage `json:"usage"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Type != "message" {
		if err == nil {
			err = fmt.Errorf("anthropic: answer of type %q, not a message", truncate(msg.Type, 40))
		}
		return failover.Output{}, k.fail(fmt.Errorf("anthropic: unreadable answer: %w", err), false)
	}
	n := 0
	for _, b := range msg.Content {
		n += len(b.Text) + len(b.Thinking)
	}
	return k.probed(n, msg.Usage.InputTokens, msg.Usage.OutputTokens)
}
