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

// httpFailure is what Classify sees of a non-2xx answer: the capture holds it
// as the provider sent it.
func httpFailure(h *capture) classify.Response {
	return classify.Response{Status: h.statusCode(), Headers: h.headers(), Body: h.bodyText()}
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
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content_block"`
	Delta struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// anthropicStop maps Anthropic's stop reasons onto failover.NormalizeFinish's
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
	start := c.now()
	holder := &capture{}
	wctx, wd, cancel := startWatchdog(withCapture(ctx, holder), c.cfg.IdleTimeout)
	defer cancel(context.Canceled)
	defer wd.stop()

	resp, err := c.post(wctx, anthropicBody(req, true))
	if err != nil {
		return failover.Output{}, c.fail(ctx, wctx, req.Model, holder, err, false, start)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return failover.Output{}, c.failResponse(ctx, req.Model, httpFailure(holder), start)
	}
	wd.kick()

	var (
		out      failover.Output
		text     strings.Builder
		stop     string
		sawTools bool
	)
	sse := &sseReader{r: bufio.NewReaderSize(resp.Body, 16<<10)}
	for {
		typ, data, rerr := sse.next()
		if rerr != nil {
			if errors.Is(rerr, io.EOF) && wctx.Err() == nil {
				break // the stream ended; finish says whether it was complete
			}
			// Partial text of a broken stream is never delivered (R8).
			out.Text = text.String()
			return out, c.fail(ctx, wctx, req.Model, holder, rerr, true, start)
		}
		wd.kick()
		if typ == "error" {
			// covers C5, C6: an error event after the 200 (overloaded_error,
			// api_error) is classified from its own JSON.
			out.Text = text.String()
			return out, c.failResponse(ctx, req.Model, classify.Response{
				Status: holder.statusCode(), Headers: holder.headers(), Body: string(data), Stream: true,
			}, start)
		}
		if len(data) == 0 {
			continue
		}
		var ev anthropicEvent
		if json.Unmarshal(data, &ev) != nil {
			// Not the decoder's words: "invalid character ... object key" would
			// read as a bad key to the classifier.
			out.Text = text.String()
			return out, c.fail(ctx, wctx, req.Model, holder, fmt.Errorf("%w: event %q", errBadEvent, truncate(typ, 40)), true, start)
		}
		d := ""
		switch typ {
		case "message_start":
			out.InputTokens, out.OutputTokens = ev.Message.Usage.InputTokens, ev.Message.Usage.OutputTokens
		case "content_block_start":
			switch ev.ContentBlock.Type {
			case "text":
				d = ev.ContentBlock.Text
			case "tool_use", "server_tool_use":
				sawTools = true
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				d = ev.Delta.Text
			case "input_json_delta":
				sawTools = true
			} // thinking, signature and citations deltas are not the answer
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			if ev.Usage.OutputTokens > 0 {
				out.OutputTokens = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				out.InputTokens = ev.Usage.InputTokens
			}
		}
		// ping, content_block_stop, message_stop and event types added later
		// carry no answer text (the API's versioning policy adds event types).
		if !c.addText(&text, d, onDelta) {
			out.Text = text.String()
			return out, c.fail(ctx, wctx, req.Model, holder, answerTooLarge(c.cfg.MaxAnswerBytes), true, start)
		}
		if typ == "message_stop" {
			break
		}
	}
	wd.stop()
	out.Text = text.String()
	return c.finish(ctx, req.Model, holder, out, anthropicStop(stop), sawTools, start)
}

// probeAnthropic is Probe in the Messages API: max_tokens 1, not streamed.
func (c *Client) probeAnthropic(ctx context.Context, model string) error {
	start := c.now()
	holder := &capture{}
	wctx, wd, cancel := startWatchdog(withCapture(ctx, holder), c.cfg.IdleTimeout)
	defer cancel(context.Canceled)
	defer wd.stop()
	body := anthropicBody(Request{Model: model, MaxTokens: 1, Messages: []Message{{Role: "user", Content: "ping"}}}, false)
	resp, err := c.post(wctx, body)
	if err != nil {
		return c.fail(ctx, wctx, model, holder, err, false, start)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return c.failResponse(ctx, model, httpFailure(holder), start)
	}
	// The body is bounded by limits.max_response_bytes (T1).
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.fail(ctx, wctx, model, holder, err, false, start)
	}
	var msg struct {
		Type    string `json:"type"`
		Content []struct {
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Type != "message" {
		if err == nil {
			err = fmt.Errorf("anthropic: answer of type %q, not a message", truncate(msg.Type, 40))
		}
		return c.fail(ctx, wctx, model, holder, fmt.Errorf("anthropic: unreadable answer: %w", err), false, start)
	}
	n := 0
	for _, b := range msg.Content {
		n += len(b.Text) + len(b.Thinking)
	}
	if n > c.cfg.MaxAnswerBytes {
		return c.fail(ctx, wctx, model, holder, answerTooLarge(c.cfg.MaxAnswerBytes), false, start)
	}
	c.log.Debug("llm probe ok", "model", model, "dur", c.now().Sub(start))
	return nil
}
