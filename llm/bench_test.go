package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// benchReply is 200 words, so the fake streams 200 content chunks.
var benchReply = strings.Repeat("word ", 200)

func benchFake(b *testing.B) *fakeprovider.Server {
	b.Helper()
	fake := fakeprovider.New(fakeprovider.WithRules(fakeprovider.Rule{Reply: benchReply}))
	if err := fake.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fake.Close)
	return fake
}

// BenchmarkChatStream200 is the whole client path (go-openai, capture transport,
// bounded body, watchdog, normalisation) over a 200-chunk stream from the fake.
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

// rawBody asks the fake for the same stream as userReq("gpt-bench", "hello").
var rawBody = []byte(`{"model":"gpt-bench","messages":[{"role":"user","content":"hello"}],"stream":true,"stream_options":{"include_usage":true}}`)

// rawCall reads one whole stream with a bare http.Client over the same
// transport settings as the client: the server's and the socket's own cost.
func rawCall(b *testing.B, hc *http.Client, url string, buf []byte) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(rawBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var tail [16]byte
	n, _ := io.CopyBuffer(io.Discard, io.TeeReader(resp.Body, tailWriter(tail[:])), buf)
	_ = resp.Body.Close()
	if n < 200*50 || !bytes.HasSuffix(bytes.TrimRight(tail[:], "\x00"), []byte("data: [DONE]\n\n")) {
		b.Fatalf("short stream: %d bytes, tail %q", n, tail)
	}
}

// tailWriter keeps the last len(buf) bytes written.
type tailWriter []byte

func (t tailWriter) Write(p []byte) (int, error) {
	if len(p) >= len(t) {
		copy(t, p[len(p)-len(t):])
		return len(p), nil
	}
	copy(t, t[len(p):])
	copy(t[len(t)-len(p):], p)
	return len(p), nil
}

// BenchmarkRawStream200 reads the same stream with a bare http.Client: the
// server's own cost, to subtract from BenchmarkChatStream200.
func BenchmarkRawStream200(b *testing.B) {
	fake := benchFake(b)
	hc := &http.Client{Transport: defaultTransport()}
	defer hc.CloseIdleConnections()
	url := fake.BaseURL("openai") + "/chat/completions"
	buf := make([]byte, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		rawCall(b, hc, url, buf)
	}
}

// BenchmarkClientOverhead200 alternates one raw read and one Chat call of the
// same 200-chunk stream and reports their difference as client-ns/op: the
// time the client adds beyond the server's own time (issue 3 wants < 1 ms).
// Alternating keeps load changes on a shared machine from skewing one side.
func BenchmarkClientOverhead200(b *testing.B) {
	fake := benchFake(b)
	c, err := New(Config{Provider: "openai", BaseURL: fake.BaseURL("openai"), APIKey: "sk-bench", IdleTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	hc := &http.Client{Transport: defaultTransport()}
	defer hc.CloseIdleConnections()
	url := fake.BaseURL("openai") + "/chat/completions"
	req := userReq("gpt-bench", "hello")
	buf := make([]byte, 32<<10)
	b.ReportAllocs()
	var raw, chat time.Duration
	for b.Loop() {
		t0 := time.Now()
		rawCall(b, hc, url, buf)
		t1 := time.Now()
		out, err := c.Chat(context.Background(), req, func(string) {})
		t2 := time.Now()
		if err != nil || len(out.Text) != len(benchReply) {
			b.Fatalf("%v %d", err, len(out.Text))
		}
		raw += t1.Sub(t0)
		chat += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(float64(chat.Nanoseconds())/n, "chat-ns/op")
	b.ReportMetric(float64((chat-raw).Nanoseconds())/n, "client-ns/op")
}

// benchChunk is the shape of a fakeprovider (and OpenAI) content chunk.
var benchChunk = []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-bench","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`)

// BenchmarkDecodeChunk is what ChatCompletionStream.Recv spends decoding one
// content chunk (encoding/json into go-openai's struct), the client's per-chunk
// cost beyond reading the line.
func BenchmarkDecodeChunk(b *testing.B) {
	b.SetBytes(int64(len(benchChunk)))
	b.ReportAllocs()
	for b.Loop() {
		var r openai.ChatCompletionStreamResponse
		if err := json.Unmarshal(benchChunk, &r); err != nil || len(r.Choices) != 1 {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatStream200Protocols is BenchmarkChatStream200 in every protocol:
// the same 200-word answer through each client and the fake's route for it.
func BenchmarkChatStream200Protocols(b *testing.B) {
	fake := benchFake(b)
	for _, k := range kinds {
		b.Run(string(k.api), func(b *testing.B) {
			c, err := New(k.config(fake, "sk-bench"))
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
		})
	}
}
