package fakeprovider

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// send posts body to url with headers and returns the status and body.
func send(t *testing.T, url string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const messagesBody = `{"model":"claude-x","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hello there"}]}`

// Each protocol's route refuses a request without the credential header the
// real API requires, in that API's words, before any rule is looked at; the
// refusal is logged as a call with its status.
func TestKinds_AuthHeadersEnforced(t *testing.T) {
	s := start(t)
	anth := s.BaseURLFor("claude", APIAnthropic) + "/messages"
	az := s.BaseURLFor("az", APIAzure) + "/openai/deployments/dep1/chat/completions"
	gem := s.BaseURLFor("gem", APIGemini) + "/chat/completions"
	chat := chatBody("m", "hi", false)
	cases := []struct {
		name    string
		url     string
		headers map[string]string
		body    string
		status  int
		says    string
	}{
		// https://docs.anthropic.com/en/api/overview: x-api-key and anthropic-version are required.
		{"anthropic without x-api-key", anth, map[string]string{"anthropic-version": "2023-06-01", "Authorization": "Bearer k"}, messagesBody, 401, `"type":"authentication_error","message":"x-api-key header is required"`},
		{"anthropic without anthropic-version", anth, map[string]string{"x-api-key": "k"}, messagesBody, 400, `anthropic-version: header is required`},
		{"anthropic ok", anth, map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}, messagesBody, 200, `"type":"message"`},
		// Azure: the key goes in api-key; Authorization is for Entra tokens; api-version is required.
		{"azure with the key as a bearer token", az + "?api-version=2024-10-21", map[string]string{"Authorization": "Bearer k"}, chat, 401, "Access token is missing, invalid"},
		{"azure without a key", az + "?api-version=2024-10-21", nil, chat, 401, "missing subscription key"},
		{"azure without api-version", az, map[string]string{"api-key": "k"}, chat, 404, `"code":"404","message":"Resource not found"`},
		{"azure with a bad api-version", az + "?api-version=latest", map[string]string{"api-key": "k"}, chat, 404, "Resource not found"},
		{"azure ok", az + "?api-version=2024-10-21", map[string]string{"api-key": "k"}, chat, 200, `"object":"chat.completion"`},
		// Gemini's OpenAI-compatible endpoint takes the key as a bearer token.
		{"gemini without a bearer key", gem, map[string]string{"x-goog-api-key": "k"}, chat, 403, "unregistered callers"},
		{"gemini ok", gem, map[string]string{"Authorization": "Bearer k"}, chat, 200, `"object":"chat.completion"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.Reset()
			status, _, body := send(t, tc.url, tc.headers, tc.body)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Fatalf("%d %s, want %d saying %q", status, body, tc.status, tc.says)
			}
			calls := settled(t, s)
			if len(calls) != 1 || calls[0].Status != tc.status {
				t.Fatalf("calls %+v", calls)
			}
		})
	}
}

// The Messages API's request rules (https://docs.anthropic.com/en/api/messages):
// model, max_tokens and messages are required, roles are user and assistant,
// a system prompt is the top-level field, text blocks are not empty.
func TestKinds_AnthropicRequestChecked(t *testing.T) {
	s := start(t)
	url := s.BaseURLFor("claude", APIAnthropic) + "/messages"
	h := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	for body, says := range map[string]string{
		`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`:                                        "model: Field required",
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                                           "max_tokens: Field required",
		`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`:                            "max_tokens: Input should be greater than or equal to 1",
		`{"model":"m","max_tokens":5,"messages":[]}`:                                                          "messages: Field required",
		`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`:                          `Unexpected role \"system\"`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"robot","content":"hi"}]}`:                           "messages.0.role: Input should be 'user' or 'assistant'",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`:     "messages.0.content: text content blocks must be non-empty",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"system":[{"type":"text"}]}`: "system: text content blocks must be non-empty",
		`not json`: "not valid JSON",
	} {
		status, _, got := send(t, url, h, body)
		if status != 400 || !strings.Contains(got, `"type":"invalid_request_error"`) || !strings.Contains(got, says) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, status, got, says)
		}
	}
}

// An Anthropic stream is the documented event sequence: message_start,
// content_block_start, ping, text deltas, content_block_stop, message_delta
// with the stop reason, message_stop; each frame an event line, a data line
// whose type matches, and a blank line.
func TestKinds_AnthropicEventSequence(t *testing.T) {
	s := start(t)
	url := s.BaseURLFor("claude", APIAnthropic) + "/messages"
	h := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	status, hdr, body := send(t, url, h, strings.Replace(messagesBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") || hdr.Get("request-id") == "" {
		t.Fatalf("%d %v", status, hdr)
	}
	var types []string
	text := ""
	for _, frame := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		lines := strings.Split(frame, "\n")
		ev, ok1 := strings.CutPrefix(lines[0], "event: ")
		data, ok2 := strings.CutPrefix(lines[len(lines)-1], "data: ")
		var d struct {
			Type  string
			Delta struct {
				Text       string
				StopReason string `json:"stop_reason"`
			}
		}
		if len(lines) != 2 || !ok1 || !ok2 || json.Unmarshal([]byte(data), &d) != nil || d.Type != ev {
			t.Fatalf("bad frame %q", frame)
		}
		if ev == "content_block_delta" {
			text += d.Delta.Text
			continue
		}
		if ev == "message_delta" && d.Delta.StopReason != "end_turn" {
			t.Fatalf("stop reason %q", d.Delta.StopReason)
		}
		types = append(types, ev)
	}
	want := "message_start content_block_start ping content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want || text != "[claude/claude-x] you said: hello there" {
		t.Fatalf("events %q text %q", types, text)
	}

	// A stream that fails after its 200 ends with an error event.
	s.Script(Rule{Mode: ModeMidstreamError})
	_, _, body = send(t, url, h, strings.Replace(messagesBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1))
	if !strings.HasSuffix(body, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n") {
		t.Fatalf("no error event at the end: %q", body)
	}
}

// Each protocol's error shape, as its documentation gives it.
func TestKinds_ErrorShapes(t *testing.T) {
	s := start(t)
	anth := s.BaseURLFor("claude", APIAnthropic) + "/messages"
	ah := map[string]string{"x-api-key": "sk-ant-api03-abcdefghijkl", "anthropic-version": "2023-06-01"}
	gem := s.BaseURLFor("gem", APIGemini) + "/chat/completions"
	gh := map[string]string{"Authorization": "Bearer AIzaSyabcdefghijkl"}
	az := s.BaseURLFor("az", APIAzure) + "/openai/deployments/dep1/chat/completions?api-version=2024-10-21"
	zh := map[string]string{"api-key": "0123456789abcdef"}

	s.Script(Rule{Provider: "claude", Mode: ModeRateLimit, Times: 1})
	status, hdr, body := send(t, anth, ah, messagesBody)
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
		ID    string `json:"request_id"`
	}
	if status != 429 || json.Unmarshal([]byte(body), &ae) != nil || ae.Type != "error" || ae.Error.Type != "rate_limit_error" || ae.ID == "" ||
		hdr.Get("retry-after") != "20" || hdr.Get("anthropic-ratelimit-requests-remaining") != "0" || !strings.HasSuffix(hdr.Get("anthropic-ratelimit-requests-reset"), "Z") {
		t.Errorf("anthropic 429: %d %v %s", status, hdr, body)
	}
	s.Script(Rule{Provider: "claude", Mode: ModeOverloaded529, Times: 1})
	if status, _, body := send(t, anth, ah, messagesBody); status != 529 || !strings.Contains(body, `"type":"overloaded_error"`) {
		t.Errorf("anthropic 529: %d %s", status, body)
	}

	s.Script(Rule{Provider: "gem", Mode: ModeRateLimit, Times: 1})
	status, _, body = send(t, gem, gh, chatBody("gemini-x", "hi", false))
	var ge []struct {
		Error struct {
			Code    int
			Status  string
			Details []map[string]any
		}
	}
	if status != 429 || !strings.HasPrefix(body, "[{") || !strings.HasSuffix(body, "}\n]\n") || json.Unmarshal([]byte(body), &ge) != nil ||
		len(ge) != 1 || ge[0].Error.Code != 429 || ge[0].Error.Status != "RESOURCE_EXHAUSTED" || ge[0].Error.Details[0]["retryDelay"] != "20s" {
		t.Errorf("gemini 429: %d %s", status, body)
	}
	s.Script(Rule{Provider: "gem", Mode: ModeUnauthorized401, Times: 1})
	if status, _, body := send(t, gem, gh, chatBody("gemini-x", "hi", false)); status != 400 || !strings.Contains(body, `"INVALID_ARGUMENT"`) || !strings.Contains(body, "API_KEY_INVALID") {
		t.Errorf("gemini bad key: %d %s", status, body)
	}

	s.Script(Rule{Provider: "az", Mode: ModeModelNotFound404, Times: 1})
	if status, _, body := send(t, az, zh, chatBody("", "hi", false)); status != 404 || !strings.Contains(body, `{"error":{"code":"DeploymentNotFound"`) {
		t.Errorf("azure 404: %d %s", status, body)
	}
	if c := settled(t, s); c[len(c)-1].Deployment != "dep1" || c[len(c)-1].Model != "dep1" || c[len(c)-1].API != APIAzure {
		t.Errorf("azure call %+v: a body without a model is routed by the deployment", c[len(c)-1])
	}
	for _, c := range settled(t, s) {
		if c.KeyID == "" {
			t.Errorf("call %+v logged no key id", c)
		}
	}
}
