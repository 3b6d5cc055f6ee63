package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
)

// bodyTransport answers every request with status 200 and the given stream.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
}

// FuzzAnthropicStream feeds any bytes to the Messages API client as the event
// stream of a 200: it never panics, it returns an answer or a
// *failover.Failure, and the answer stays within its cap (T1, C12).
func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\nevent: message_stop\ndata: {}\n\n"))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte(": comment\r\nevent: ping\r\ndata: {}\r\n\r\ndata: a\ndata: b\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"" + string(bytes.Repeat([]byte("x"), 2048)) + "\"}}\n\n"))
	f.Add([]byte("event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"weird\"}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := New(Config{Provider: "anthropic", API: APIAnthropic, BaseURL: "http://fuzz.invalid/v1", APIKey: "sk-ant-fuzz",
			IdleTimeout: time.Second, MaxAnswerBytes: 1024, HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Chat(context.Background(), userReq("m", "x"), nil)
		var f *failover.Failure
		if err != nil && !errors.As(err, &f) {
			t.Fatalf("error %T %v is not a *failover.Failure", err, err)
		}
		if len(out.Text) > 1024 {
			t.Fatalf("T1: %d bytes of answer past the 1024-byte cap", len(out.Text))
		}
		if err == nil && (out.Text == "" && !out.Progress) {
			t.Fatalf("an empty answer succeeded: %+v", out)
		}
	})
}
