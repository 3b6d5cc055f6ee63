package llm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// negativeUsage serves, in k's protocol, a streamed answer (a stream request)
// or a probe's answer (any other) whose token counts are negative.
func negativeUsage(t *testing.T, k kind) *rig {
	t.Helper()
	w := wireOf(k)
	var stream string
	if w.anthropic {
		stream = w.event("message_start", map[string]any{"message": map[string]any{"usage": map[string]int{"input_tokens": -5, "output_tokens": -1}}}) +
			w.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]string{"type": "text", "text": ""}}) +
			w.text("Hello.") +
			w.event("content_block_stop", map[string]any{"index": 0}) +
			w.event("message_delta", map[string]any{"delta": map[string]string{"stop_reason": "end_turn"}, "usage": map[string]int{"output_tokens": -7, "input_tokens": -9}}) +
			w.event("message_stop", map[string]any{})
	} else {
		stream = w.start() + w.text("Hello.") +
			w.data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}}) +
			w.data(map[string]any{"choices": []any{}, "usage": map[string]int{"prompt_tokens": -5, "completion_tokens": -7, "total_tokens": -12}}) +
			"data: [DONE]\n\n"
	}
	probe := `{"id":"x","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"p"},"finish_reason":"length"}],"usage":{"prompt_tokens":-5,"completion_tokens":-1,"total_tokens":-6}}`
	if w.anthropic {
		probe = `{"id":"x","type":"message","role":"assistant","content":[{"type":"text","text":"p"}],"stop_reason":"max_tokens","usage":{"input_tokens":-5,"output_tokens":-1}}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			rw.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(rw, stream)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, probe)
	}))
	cfg := k.config(fakeprovider.New(), canary)
	cfg.BaseURL = srv.URL + "/x"
	return clientRig(t, &rig{}, cfg, 3*time.Second, srv.Close)
}

// covers U1 (issue 37: negative token counts from a provider are summed as
// they are): whatever a provider reports, every protocol's Output holds no
// negative count, for an answer and for a check alike.
func TestKinds_U1_NegativeTokenCountsAreNone(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := negativeUsage(t, k)
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), nil)
			if err != nil || out.Text != "Hello." {
				t.Fatalf("chat: %+v %v", out, err)
			}
			if out.InputTokens < 0 || out.OutputTokens < 0 {
				t.Errorf("chat: tokens in %d, out %d: a negative count was kept", out.InputTokens, out.OutputTokens)
			}
			out, err = r.client.Check(context.Background(), "gpt-test")
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if out.InputTokens < 0 || out.OutputTokens < 0 {
				t.Errorf("check: tokens in %d, out %d: a negative count was kept", out.InputTokens, out.OutputTokens)
			}
		})
	}
}
