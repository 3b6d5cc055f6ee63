package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/testkit/fakellm"
)

// benchReply is 200 words, so the fake streams 200 content chunks.
var benchReply = strings.Repeat("word ", 200)

func benchFake(b *testing.B) *fakellm.Server {
	b.Helper()
	fake := fakellm.New(fakellm.WithRules(fakellm.Rule{Reply: benchReply}))
	if err := fake.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fake.Close)
	return fake
}

// BenchmarkChatStream200 is the whole client path (go-openai, capture transport,
// watchdog, normalisation) over a 200-chunk stream from the fake.
func BenchmarkChatStream200(b *testing.B) {
	fake := benchFake(b)
	c, err := New(Config{Provider: "openai", BaseURL: fake.BaseURL("openai"), APIKey: "sk-bench", IdleTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	req := userReq("gpt-bench", "hello")
	b.ReportAllocs()
	for b.Loop() {
		out, err := c.Chat(context.Background(), req, func(string) {})
		if err != nil || len(out.Text) != len(benchReply) {
			b.Fatalf("%v %d", err, len(out.Text))
		}
	}
}

// BenchmarkRawStream200 reads the same stream with a bare http.Client: the
// server's own cost, to subtract from BenchmarkChatStream200.
func BenchmarkRawStream200(b *testing.B) {
	fake := benchFake(b)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	body := []byte(`{"model":"gpt-bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`)
	url := fake.BaseURL("openai") + "/chat/completions"
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-bench")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n < 200*50 {
			b.Fatalf("short stream: %d bytes", n)
		}
	}
}
