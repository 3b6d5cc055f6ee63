package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// route is one protocol's chat route on s: its URL, the headers the real
// API requires, and a body asking for model, streamed or not.
type route struct {
	api     API
	url     string
	headers map[string]string
	body    func(stream bool) string
}

func routes(s *Server) []route {
	chat := func(stream bool) string { return chatBody("m", "hello", stream) }
	messages := func(stream bool) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 64, "stream": stream,
			"messages": []map[string]string{{"role": "user", "content": "hello"}}})
		return string(b)
	}
	return []route{
		{APIOpenAI, s.BaseURLFor("p", APIOpenAI) + "/chat/completions", map[string]string{"Authorization": "Bearer k"}, chat},
		{APIAzure, s.BaseURLFor("p", APIAzure) + "/openai/deployments/m/chat/completions?api-version=2024-10-21", map[string]string{"api-key": "k"}, chat},
		{APIGemini, s.BaseURLFor("p", APIGemini) + "/chat/completions", map[string]string{"Authorization": "Bearer k"}, chat},
		{APIAnthropic, s.BaseURLFor("p", APIAnthropic) + "/messages", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}, messages},
	}
}

// read sends rt's request and reads the response until it ends or ctx does;
// resp is nil when no response came.
func (rt route) read(t *testing.T, ctx context.Context, stream bool) (resp *http.Response, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rt.url, strings.NewReader(rt.body(stream)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range rt.headers {
		req.Header.Set(k, v)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Fatal(err)
		}
		return nil, ""
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, resp.Body) // ends with ctx for a stream that never does
	return resp, buf.String()
}

// sseEvent is one frame of an event stream: its event name (Anthropic), its
// data, and whether it was a comment.
type sseEvent struct {
	name, data string
	comment    bool
}

func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, frame := range strings.Split(body, "\n\n") {
		if frame == "" {
			continue
		}
		var ev sseEvent
		for _, line := range strings.Split(frame, "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
				ev.comment = true
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("bad line %q in frame %q", line, frame)
			}
		}
		out = append(out, ev)
	}
	return out
}

// chunkOf is what the tests read of an OpenAI-compatible chunk.
type chunkOf struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta        map[string]*string `json:"delta"`
		FinishReason *string            `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

// covers E4: keepalive_only opens a stream and then sends keep-alives only,
// every Delay, until the client leaves: in the OpenAI-compatible protocols
// comment lines, chunks with an empty delta and chunks of whitespace, in
// turn; in Anthropic's, message_start and then pings. Never text, never a
// stop. Without stream it hangs before its headers.
func TestKeepAliveOnly_E4(t *testing.T) {
	s := start(t, WithRules(Rule{Mode: ModeKeepAliveOnly, Delay: 20 * time.Millisecond}))
	for _, rt := range routes(s) {
		t.Run(string(rt.api), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			resp, body := rt.read(t, ctx, true)
			if resp == nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("response %+v", resp)
			}
			events := parseSSE(t, body)
			if rt.api == APIAnthropic {
				if len(events) < 3 || events[0].name != "message_start" {
					t.Fatalf("events %+v", events)
				}
				for _, ev := range events[1:] {
					if ev.name != "ping" || ev.data != `{"type":"ping"}` {
						t.Fatalf("%+v among the keep-alives", ev)
					}
				}
				return
			}
			var comments, empty, blank int
			for _, ev := range events {
				if ev.comment {
					if ev.data != "" {
						t.Fatalf("comment frame with data %+v", ev)
					}
					comments++
					continue
				}
				var ck chunkOf
				if err := json.Unmarshal([]byte(ev.data), &ck); err != nil || ck.Object != "chat.completion.chunk" || ck.ID == "" || ck.Model != "m" || len(ck.Choices) != 1 {
					t.Fatalf("chunk %q: %v", ev.data, err)
				}
				ch := ck.Choices[0]
				if ch.FinishReason != nil {
					t.Fatalf("a stop among the keep-alives: %q", ev.data)
				}
				switch c := ch.Delta["content"]; {
				case len(ch.Delta) == 0:
					empty++
				case c != nil && strings.TrimSpace(*c) == "":
					blank++
				default:
					t.Fatalf("text among the keep-alives: %q", ev.data)
				}
			}
			if comments == 0 || empty == 0 || blank == 0 || !strings.Contains(body, ": keep-alive\n\n") {
				t.Fatalf("comments %d, empty deltas %d, whitespace %d in %q", comments, empty, blank, body)
			}
		})
	}
	// The handlers end once their clients left.
	for _, c := range settled(t, s) {
		if c.Status != 200 || c.Mode != ModeKeepAliveOnly {
			t.Fatalf("call %+v", c)
		}
	}

	s.Reset()
	s.Script(Rule{Mode: ModeKeepAliveOnly})
	for _, rt := range routes(s) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if resp, _ := rt.read(t, ctx, false); resp != nil {
			t.Fatalf("%s: a response without stream: %d", rt.api, resp.StatusCode)
		}
		cancel()
	}
	for _, c := range settled(t, s) {
		if c.Status != 0 {
			t.Fatalf("call %+v sent a status", c)
		}
	}
}

// covers E5: reasoning_only is a complete answer whose only content is
// reasoning, in each protocol's own fields, streamed or not.
func TestReasoningOnly_E5(t *testing.T) {
	const reasoning = "first think, then think again"
	s := start(t, WithRules(Rule{Mode: ModeReasoningOnly, Reply: reasoning}))
	for _, rt := range routes(s) {
		t.Run(string(rt.api)+"/stream", func(t *testing.T) {
			resp, body := rt.read(t, context.Background(), true)
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("response %+v", resp)
			}
			events := parseSSE(t, body)
			if rt.api == APIAnthropic {
				var names []string
				var thought strings.Builder
				for _, ev := range events {
					var d struct {
						Type         string
						ContentBlock struct{ Type string } `json:"content_block"`
						Delta        struct {
							Type, Thinking, Signature string
							StopReason                string `json:"stop_reason"`
						}
					}
					if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Type != ev.name {
						t.Fatalf("frame %+v: %v", ev, err)
					}
					switch {
					case ev.name == "content_block_start" && d.ContentBlock.Type != "thinking",
						ev.name == "content_block_delta" && d.Delta.Type != "thinking_delta" && d.Delta.Type != "signature_delta",
						ev.name == "message_delta" && d.Delta.StopReason != "end_turn":
						t.Fatalf("frame %+v", ev)
					}
					if d.Delta.Type == "thinking_delta" {
						thought.WriteString(d.Delta.Thinking)
						continue
					}
					names = append(names, ev.name)
				}
				want := "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop"
				if strings.Join(names, " ") != want || thought.String() != reasoning {
					t.Fatalf("events %q thinking %q", names, thought.String())
				}
				return
			}
			if last := events[len(events)-1]; last.data != "[DONE]" {
				t.Fatalf("last event %+v", last)
			}
			var thought strings.Builder
			var stop string
			var usage *Usage
			for _, ev := range events[:len(events)-1] {
				var ck chunkOf
				if err := json.Unmarshal([]byte(ev.data), &ck); err != nil {
					t.Fatalf("chunk %q: %v", ev.data, err)
				}
				if ck.Usage != nil {
					usage = ck.Usage
				}
				for _, ch := range ck.Choices {
					if c := ch.Delta["content"]; c != nil && *c != "" {
						t.Fatalf("answer text in %q", ev.data)
					}
					if r := ch.Delta["reasoning_content"]; r != nil {
						thought.WriteString(*r)
					}
					if ch.FinishReason != nil {
						stop = *ch.FinishReason
					}
				}
			}
			if thought.String() != reasoning || stop != "stop" || usage == nil || usage.CompletionTokens != 5 {
				t.Fatalf("reasoning %q stop %q usage %+v", thought.String(), stop, usage)
			}
		})
		t.Run(string(rt.api)+"/whole", func(t *testing.T) {
			resp, body := rt.read(t, context.Background(), false)
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("response %+v", resp)
			}
			if rt.api == APIAnthropic {
				var msg struct {
					Content    []map[string]string `json:"content"`
					StopReason string              `json:"stop_reason"`
				}
				if err := json.Unmarshal([]byte(body), &msg); err != nil || len(msg.Content) != 1 || msg.Content[0]["type"] != "thinking" ||
					msg.Content[0]["thinking"] != reasoning || msg.Content[0]["signature"] == "" || msg.StopReason != "end_turn" {
					t.Fatalf("message %s: %v", body, err)
				}
				return
			}
			var out struct {
				Choices []struct {
					Message      map[string]string `json:"message"`
					FinishReason string            `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Choices) != 1 || out.Choices[0].Message["content"] != "" ||
				out.Choices[0].Message["reasoning_content"] != reasoning || out.Choices[0].FinishReason != "stop" {
				t.Fatalf("completion %s: %v", body, err)
			}
		})
	}
}

// The new modes are modes like the others: in scripts, phases and markers.
func TestBusyModesAreKnown(t *testing.T) {
	rules, err := ParseRules(strings.NewReader(`{"mode":"keepalive_only","delay":"50ms"}` + "\n" + `{"mode":"reasoning_only","reply":"hmm"}` + "\n"))
	if err != nil || len(rules) != 2 || rules[0].Mode != ModeKeepAliveOnly || rules[0].Delay != 50*time.Millisecond ||
		rules[1].Mode != ModeReasoningOnly || rules[1].Reply != "hmm" {
		t.Fatalf("rules %+v: %v", rules, err)
	}
	for _, m := range []Mode{ModeKeepAliveOnly, ModeReasoningOnly} {
		if !m.Valid() {
			t.Errorf("%s is not valid", m)
		}
		if got, _, found, ok := findMarker("x #fail:" + string(m)); !found || !ok || got != m {
			t.Errorf("marker %s read as %q", m, got)
		}
	}
	if _, err := ParseRules(strings.NewReader(`{"mode":"keepalive"}`)); err == nil || !strings.Contains(err.Error(), `unknown mode "keepalive"`) {
		t.Fatalf("unknown mode: %v", err)
	}
}
